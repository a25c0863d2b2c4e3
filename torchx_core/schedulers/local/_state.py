"""The local scheduler's state on disk: root directory, app directories, status, GC.

Layout (``<root>`` is per user, see :func:`default_root`)::

    <root>/<app_id>/app.json         the AppDef as submitted (``AppDef.to_dict``)
                    plan.json        what the supervisor runs (argv, env, cwd per replica)
                    status.json      written atomically by the supervisor
                    supervisor.lock  flock()ed by the launcher before the status exists, then
                                     held by the supervisor (inherited) for its whole life
                    supervisor.log   the supervisor's own output
                    <role>/<k>.stdout.log, <k>.stderr.log, <k>.combined.log, <k>.error.json
    <root>/.gc                       mtime = last garbage collection
    <root>/.staging/                 workspaces copied before their app directory exists

With the ``log_dir`` run option the app directory lives under ``log_dir`` and ``<root>/<app_id>``
is a symlink to it, so every process still finds the app by its id alone.

Whether the supervisor is alive is answered by the lock: it holds an exclusive ``flock`` until it
exits (even on SIGKILL), so a non-blocking shared lock succeeds only once it is gone. Waiting for
an app is a blocking shared ``flock``: no polling.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading  # already imported by logging
import time
from collections.abc import Iterator
from typing import Any

from torchx_core.schedulers.local._supervisor import (
    LOCK_FILE,
    STATUS_FILE,
    TERMINAL,
    write_json_atomic,
)

ROOT_ENV = "TORCHX_LOCAL_ROOT"
TTL_ENV = "TORCHX_LOCAL_TTL"
DEFAULT_TTL = 7 * 24 * 3600.0
GC_INTERVAL = 600.0
GC_STAMP = ".gc"
STAGING = ".staging"


def default_root() -> str:
    """The per-user state root: ``$TORCHX_LOCAL_ROOT``, else ``$XDG_STATE_HOME/torchx/local``,
    else ``$TMPDIR/torchx-local-<uid>`` (``/tmp`` by default)."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return os.path.join(xdg, "torchx", "local")
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"torchx-local-{os.getuid()}")


def ensure_root(root: str) -> str:
    """Creates ``root`` (mode 0700) if needed and checks that it belongs to the current user."""
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
    except FileExistsError as e:
        raise NotADirectoryError(f"local scheduler root {root} exists and is not a directory") from e
    st = os.stat(root)
    if st.st_uid != os.getuid():
        raise PermissionError(
            f"local scheduler root {root} belongs to uid {st.st_uid}, not to you"
            f" (uid {os.getuid()}); set {ROOT_ENV} to a directory of your own"
        )
    return root


def ttl_seconds(value: float | None = None) -> float:
    """Age after which finished apps are garbage-collected (``$TORCHX_LOCAL_TTL`` seconds)."""
    if value is not None:
        return float(value)
    env = os.environ.get(TTL_ENV)
    if env:
        try:
            return float(env)
        except ValueError:
            pass
    return DEFAULT_TTL


def read_json(path: str) -> dict[str, Any] | None:
    """Reads a JSON object; ``None`` if the file is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def supervisor_alive(app_dir: str) -> bool:
    """Whether the app's supervisor still runs (it holds an exclusive lock on its lock file)."""
    try:
        fd = os.open(os.path.join(app_dir, LOCK_FILE), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def wait_supervisor(app_dir: str, timeout: float | None = None) -> bool:
    """Waits until the supervisor exits; True if it did within ``timeout`` seconds.

    Blocks on the supervisor's lock (no polling), so it returns as soon as the supervisor ends.
    With a timeout the blocking wait runs in a daemon thread, shared by every waiter of the same
    app, so repeated short waits do not pile up threads.
    """
    if not supervisor_alive(app_dir):
        return True
    if timeout is None:
        _block_on_lock(app_dir)
        return True
    return _shared_waiter(app_dir).wait(timeout)


_WAITERS: dict[str, threading.Event] = {}  # app_dir -> set once its supervisor has exited
_WAITERS_LOCK = threading.Lock()


def _shared_waiter(app_dir: str) -> threading.Event:
    with _WAITERS_LOCK:
        event = _WAITERS.get(app_dir)
        if event is None:
            event = _WAITERS[app_dir] = threading.Event()

            def waiter() -> None:
                _block_on_lock(app_dir)
                with _WAITERS_LOCK:
                    _WAITERS.pop(app_dir, None)
                event.set()

            threading.Thread(target=waiter, name="torchx-local-wait", daemon=True).start()
    return event


def _block_on_lock(app_dir: str) -> None:
    try:
        fd = os.open(os.path.join(app_dir, LOCK_FILE), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def read_status(app_dir: str) -> dict[str, Any] | None:
    """The app's status, corrected when its supervisor died without writing a final state."""
    status = read_json(os.path.join(app_dir, STATUS_FILE))
    if status is None or status.get("state") in TERMINAL:
        return status
    if supervisor_alive(app_dir):
        return status
    # the supervisor may have written its final status and exited since our first read
    status = read_json(os.path.join(app_dir, STATUS_FILE))
    if status is None or status.get("state") in TERMINAL:
        return status
    status["state"] = "FAILED"
    status["msg"] = (
        f"the local supervisor (pid {status.get('sup_pid')}) died before the app finished;"
        f" see {os.path.join(app_dir, 'supervisor.log')}"
    )
    status["ended"] = time.time()
    for role in status.get("roles", []):
        role["states"] = "".join("U" if c in "PR" else c for c in role.get("states", ""))
    kill_orphans(status)
    try:
        write_json_atomic(os.path.join(app_dir, STATUS_FILE), status)
    except OSError:
        pass
    return status


def kill_orphans(status: dict[str, Any]) -> int:
    """SIGKILLs the process groups of replicas left behind by a dead supervisor.

    A recorded pid is only trusted if the process still carries the app's ``TORCHX_APP_ID`` in
    its environment (pids are reused). Clears the pids; returns how many groups were signalled.
    """
    marker = f"TORCHX_APP_ID={status.get('app_id')}".encode()
    killed = 0
    for role in status.get("roles", []):
        pids = role.get("pids", [])
        for pid in pids:
            if not pid:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker not in f.read().split(b"\0"):
                        continue
                os.killpg(pid, signal.SIGKILL)
                killed += 1
            except (OSError, ProcessLookupError):
                continue
        role["pids"] = [0] * len(pids)
    return killed


def iter_app_dirs(root: str) -> Iterator[tuple[str, str]]:
    """Yields ``(app_id, app_dir)`` for every app under ``root`` (one directory scan)."""
    try:
        entries = os.scandir(root)
    except FileNotFoundError:
        return
    with entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            yield entry.name, entry.path


def remove_app_dir(app_dir: str) -> None:
    """Removes an app directory (and its symlink target when the app used ``log_dir``)."""
    import shutil

    if os.path.islink(app_dir):
        target = os.path.realpath(app_dir)
        os.unlink(app_dir)
        shutil.rmtree(target, ignore_errors=True)
    else:
        shutil.rmtree(app_dir, ignore_errors=True)


def maybe_gc(root: str, ttl: float, interval: float = GC_INTERVAL, now: float | None = None) -> list[str]:
    """Removes finished apps older than ``ttl`` seconds, at most once per ``interval``.

    Cheap when there is nothing to do: one ``stat`` of the stamp file. Returns the removed ids.
    """
    now = time.time() if now is None else now
    stamp = os.path.join(root, GC_STAMP)
    try:
        if now - os.stat(stamp).st_mtime < interval:
            return []
    except FileNotFoundError:
        pass
    with open(stamp, "a"):
        pass
    os.utime(stamp, (now, now))
    return collect_garbage(root, ttl, now)


def collect_garbage(root: str, ttl: float, now: float | None = None) -> list[str]:
    """Removes every finished app whose end is older than ``ttl`` seconds (and stale staging)."""
    now = time.time() if now is None else now
    removed = []
    for app_id, app_dir in iter_app_dirs(root):
        status = read_json(os.path.join(app_dir, STATUS_FILE))
        if status is None:
            # a half-created app dir (crashed launcher) or a dangling log_dir link
            try:
                age = now - os.lstat(app_dir).st_mtime
            except OSError:
                continue
            if age > ttl and not supervisor_alive(app_dir):
                remove_app_dir(app_dir)
                removed.append(app_id)
            continue
        ended = status.get("ended")
        if status.get("state") in TERMINAL and ended and now - float(ended) > ttl:
            remove_app_dir(app_dir)
            removed.append(app_id)
    import shutil

    staging = os.path.join(root, STAGING)
    for _, path in iter_app_dirs(staging):
        try:
            if now - os.lstat(path).st_mtime > ttl:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass
    return removed
