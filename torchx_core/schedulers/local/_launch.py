"""Starting an app's supervisor, detached from the launching process.

The launcher creates the app's lock file, takes an exclusive ``flock`` on it and writes the
``PENDING`` status *before* starting the supervisor, which inherits the locked descriptor: the
app counts as alive from the moment its status exists, and the launcher never waits for the
supervisor to come up. If the supervisor dies (even before it ran a line), the lock is released
and readers report the app as failed.

Two ways to start it, same result (a process in its own session, re-parented away from the
launcher):

* ``fork``: double fork + ``setsid`` of the launcher itself - about a millisecond. Only safe when
  the launcher has a single thread (a forked child of a multithreaded process may inherit locks
  held by threads that do not exist in it), so it is used only then;
* ``spawn``: ``posix_spawn`` of a fresh ``python -S -E`` running the supervisor module by path
  (stdlib only), which forks once more.

The replicas inherit the launcher's environment through the supervisor's own environment (the
forked launcher's, or the one the fresh interpreter is spawned with), never through a file: the
plan on disk holds none of it.

Either way the launcher's direct child exits at once; it is reaped without blocking, on later
calls (or by the host's own SIGCHLD handling).

``TORCHX_LOCAL_SUPERVISOR=fork|spawn`` forces one (for benchmarks and tests).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from torchx_core.schedulers.local import _detached

MODE_ENV = "TORCHX_LOCAL_SUPERVISOR"

_UNREAPED: list[int] = []  # spawned interpreters that exit after forking the supervisor
_UNREAPED_LOCK = threading.Lock()


def _single_threaded() -> bool:
    if threading.active_count() != 1:
        return False
    try:
        # also counts threads started by C extensions, which `threading` does not see
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def choose_mode() -> str:
    """``"fork"`` when it is safe (single-threaded launcher), else ``"spawn"``."""
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    if mode == "spawn":
        return mode
    return "fork" if _single_threaded() else "spawn"


def start_supervisor(
    plan: dict[str, Any], app_dir: str, lock_fd: int, mode: str | None = None
) -> None:
    """Starts the supervisor of the app in ``app_dir``, handing it the locked ``lock_fd``.

    The caller keeps (and then closes) its own ``lock_fd``. ``plan.json`` must already be
    written when ``mode`` is ``"spawn"`` (the fresh interpreter reads it).
    """
    _reap_spawned()
    mode = mode or choose_mode()
    if mode == "fork":
        child = _fork_supervisor(plan, app_dir, lock_fd)
    else:
        child = _spawn_supervisor(app_dir, lock_fd)
    # the child exits right after forking the supervisor; reap it later, without waiting now
    with _UNREAPED_LOCK:
        _UNREAPED.append(child)


def _fork_supervisor(plan: dict[str, Any], app_dir: str, lock_fd: int) -> int:
    pid = os.fork()
    if pid != 0:
        return pid
    # child: never return into the launcher's code
    code = 1
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        code = _detached.run_detached(plan, app_dir, lock_fd)
    finally:
        os._exit(code)


def _spawn_supervisor(app_dir: str, lock_fd: int) -> int:
    # dup2 onto a different number gives the child a copy without close-on-exec
    target = 3 if lock_fd != 3 else 4
    python = sys.executable or "python3"
    argv = [python, "-S", "-E", _detached.__file__, app_dir, str(target)]
    return os.posix_spawn(
        python,
        argv,
        os.environ,  # what the replicas inherit, in memory (``-E``: not read by the interpreter)
        file_actions=[(os.POSIX_SPAWN_DUP2, lock_fd, target)],
        setsid=True,
    )


def _reap_spawned() -> None:
    with _UNREAPED_LOCK:
        pending = list(_UNREAPED)
        _UNREAPED.clear()
    left = []
    for pid in pending:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if not done:
            left.append(pid)
    if left:
        with _UNREAPED_LOCK:
            _UNREAPED.extend(left)
