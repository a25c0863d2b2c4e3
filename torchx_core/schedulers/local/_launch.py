"""Starting an app's supervisor, detached from the launching process.

Two ways, same result (a process in its own session, re-parented away from the launcher, that
signals readiness by writing its pid to a pipe):

* ``fork``: double fork + ``setsid`` of the launcher itself – about a millisecond. Only safe when
  the launcher has a single thread (a forked child of a multithreaded process may inherit locks
  held by threads that do not exist in it), so it is used only then;
* ``spawn``: ``posix_spawn`` of a fresh ``python -S`` running the supervisor module by path
  (stdlib only) – a few tens of milliseconds.

``TORCHX_LOCAL_SUPERVISOR=fork|spawn`` forces one (for benchmarks and tests).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from torchx_core.schedulers.local import _supervisor

MODE_ENV = "TORCHX_LOCAL_SUPERVISOR"


class SupervisorStartError(RuntimeError):
    """The supervisor process did not come up (the cause is in its ``supervisor.log``)."""


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
    if mode in ("fork", "spawn"):
        return mode if mode == "spawn" or _single_threaded() else "spawn"
    return "fork" if _single_threaded() else "spawn"


def start_supervisor(plan: dict[str, Any], app_dir: str, mode: str | None = None) -> int:
    """Starts the supervisor of the app in ``app_dir``; returns its pid once it is running.

    ``plan.json`` must already be written when ``mode`` is ``"spawn"`` (the fresh interpreter
    reads it). Raises :class:`SupervisorStartError` if the supervisor exits before it is ready.
    """
    mode = mode or choose_mode()
    r, w = os.pipe()
    try:
        if mode == "fork":
            child = _fork_supervisor(plan, app_dir, r, w)
        else:
            child = _spawn_supervisor(app_dir, w)
    finally:
        os.close(w)
    try:
        try:
            os.waitpid(child, 0)  # the intermediate process exits right after forking again
        except ChildProcessError:
            pass  # someone else (a SIGCHLD handler of the host) reaped it
        chunks = []
        while True:
            data = os.read(r, 64)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(r)
    text = b"".join(chunks).decode()
    if not text.isdigit():
        raise SupervisorStartError(
            f"the local supervisor for {app_dir} did not start; see"
            f" {os.path.join(app_dir, _supervisor.SUPERVISOR_LOG)}"
        )
    return int(text)


def _fork_supervisor(plan: dict[str, Any], app_dir: str, r: int, w: int) -> int:
    pid = os.fork()
    if pid != 0:
        return pid
    # child: never return into the launcher's code
    code = 1
    try:
        os.close(r)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        code = _supervisor.run_detached(plan, app_dir, w)
    finally:
        os._exit(code)


def _spawn_supervisor(app_dir: str, w: int) -> int:
    target = 3 if w != 3 else 4  # dup2 onto a different number clears close-on-exec in the child
    argv = [sys.executable, "-S", "-E", _supervisor.__file__, app_dir, str(target)]
    return os.posix_spawn(
        sys.executable,
        argv,
        {"PATH": os.environ.get("PATH", os.defpath)},
        file_actions=[(os.POSIX_SPAWN_DUP2, w, target)],
        setsid=True,
    )
