"""The name locks of a local root: one ``flock``ed file per app name, ``<root>/.names/<digest>``.

``AppLifecycle.attach`` holds the lock of an app name around its look-up by name, its submit
and the recording of its owner, so two attempts of one identity (a retried task racing its
predecessor) never both submit, and the owner recorded last is the attempt that took the lock
last. The lock goes with its holder (even on SIGKILL).

The holder writes its pid into the file while it holds it (the file is emptied on release). A
waiter takes the lock as soon as it is free, and otherwise waits at most ``timeout`` seconds,
logging the holder's pid. It gives up early, with a :class:`NameLockError` naming the pid, the
file and what to do, when the holder cannot make progress: it is stopped (SIGSTOP, a debugger)
for :data:`STOPPED_GRACE` seconds, or it is gone while a process it forked still holds the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator

from torchx_core.schedulers.api import SchedulerError
from torchx_core.schedulers.local._procs import process_state
from torchx_core.schedulers.local._state import NAMES

DEFAULT_TIMEOUT = 120.0  # seconds a waiter waits for a holder that makes progress
STOPPED_GRACE = 2.0  # seconds a holder may be seen stopped (or gone) before the waiter gives up
_LOG_EVERY = 15.0  # seconds between two "still waiting" lines
_MAX_PAUSE = 0.25  # seconds between two tries of a waiter

logger: logging.Logger = logging.getLogger(__name__)


class NameLockError(SchedulerError):
    """The name lock of an app could not be taken: its holder is stopped, gone (a process it
    forked still holds the lock) or held it longer than the timeout. A retry may succeed once
    the holder is dealt with, so this error is not permanent.

    Args:
        message: what happened and what to do
        path: the lock file
        pid: the holder's pid (0 when it is not known)
    """

    def __init__(self, message: str, path: str = "", pid: int = 0) -> None:
        super().__init__(message)
        self.path = path
        self.pid = pid

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.path, self.pid))


def lock_path(root: str, name: str) -> str:
    """The lock file of the app name ``name`` in ``root``."""
    import hashlib  # not loaded by the status path (which imports _state, not this module)

    return os.path.join(root, NAMES, hashlib.sha256(name.encode()).hexdigest()[:32])


@contextlib.contextmanager
def name_lock(
    root: str,
    name: str,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bool]:
    """Holds an exclusive ``flock`` on the lock file of ``name`` in ``root`` (yields True).

    Raises:
        NameLockError: the lock was not free within ``timeout`` seconds, or its holder is
            stopped or gone (see the module docstring)
    """
    path = lock_path(root, name)
    os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        _acquire(fd, path, name, timeout, sleep)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.utime(fd)  # last use, for the garbage collection
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # nobody holds it (a crashed holder's pid is harmless)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _holder(fd: int) -> int:
    """The pid the holder wrote into the lock file (0: none yet, or not a pid)."""
    try:
        return int(os.pread(fd, 32, 0).split(b"\n", 1)[0].strip() or 0)
    except (OSError, ValueError):
        return 0


class _Watch:
    """What a waiter saw of the holder: its pid, and since when it cannot make progress."""

    def __init__(self, path: str, name: str) -> None:
        self.path, self.name = path, name
        self.pid = 0
        self.stuck_since: float | None = None
        self.next_log = 0.0

    def see(self, pid: int, now: float, waited: float) -> None:
        """Logs a new holder (and a long wait); raises once the holder cannot make progress."""
        if pid != self.pid:
            self.pid, self.stuck_since = pid, None
            if pid:
                logger.info(
                    "waiting for the name lock %s of app name %s: held by pid %d",
                    self.path,
                    self.name,
                    pid,
                )
                self.next_log = now + _LOG_EVERY
        elif pid and now >= self.next_log:
            logger.warning(
                "still waiting (%.0f s) for the name lock %s of app name %s: held by pid %d",
                waited,
                self.path,
                self.name,
                pid,
            )
            self.next_log = now + _LOG_EVERY
        state = process_state(pid) if pid else "R"
        if state not in ("T", "t", None, "Z", "X"):
            self.stuck_since = None
            return
        if self.stuck_since is None:
            self.stuck_since = now
        elif now - self.stuck_since >= STOPPED_GRACE:
            raise self._stuck_error(state)

    def _stuck_error(self, state: str | None) -> NameLockError:
        pid, path = self.pid, self.path
        if state in ("T", "t"):
            return NameLockError(
                f"the name lock {path} of app name {self.name} is held by pid {pid}, which is"
                f" stopped (SIGSTOP or a debugger) and cannot release it: resume it (`kill -CONT"
                f" {pid}`) or end it (`kill {pid}`), then retry",
                path,
                pid,
            )
        others = _holders(path)
        held_by = ", ".join(map(str, others)) or "a process that inherited its descriptor"
        return NameLockError(
            f"the name lock {path} of app name {self.name} was taken by pid {pid}, which has"
            f" exited, but is still held by {held_by} (forked while holding it): end"
            f" {'them' if len(others) > 1 else 'it'} (`kill {' '.join(map(str, others)) or '...'}`)"
            " or wait for it, then retry",
            path,
            pid,
        )


def _acquire(fd: int, path: str, name: str, timeout: float, sleep: Callable[[float], None]) -> None:
    if _try_lock(fd):
        return
    start = time.monotonic()
    watch = _Watch(path, name)
    pause = 0.005
    while True:
        now = time.monotonic()
        watch.see(_holder(fd), now, now - start)
        if now - start >= timeout:
            who = f"pid {watch.pid}" if watch.pid else "another process"
            raise NameLockError(
                f"the name lock {path} of app name {name} has been held by {who} for more than"
                f" {timeout:g} s (it is looking up or submitting that app): retry later, or end"
                f" it (`kill {watch.pid or '<pid>'}`) if it hangs",
                path,
                watch.pid,
            )
        sleep(min(pause, max(0.0, timeout - (now - start))))
        pause = min(2 * pause, _MAX_PAUSE)
        if _try_lock(fd):
            return


def _holders(path: str) -> list[int]:
    """The pids of the processes that have ``path`` open (a scan of ``/proc/*/fd``)."""
    try:
        target = os.stat(path)
    except OSError:
        return []
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue  # closed meanwhile, or not ours to look at
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                found.append(int(entry))
                break
    return found
