"""The supervisor as a detached process: a clean daemon, its crash recorded, its two entry points.

``run_detached`` runs in the launcher's double-forked child (``fork`` mode); ``python -S -E
<this file> APP_DIR LOCK_FD`` (``spawn`` mode, see ``_launch``) runs it in a fresh interpreter.
Either way every inherited descriptor but the app's lock is closed, signals are reset, stdio goes
to ``supervisor.log``, and a crash before or during the run ends in a ``FAILED`` status.

Standard library only, and no other module of the project but its stdlib-only siblings: run by
path, it imports them as top-level modules (``sys.path[0]`` is this directory).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

if __package__:
    from torchx_core.schedulers.local import _layout, _procs
    from torchx_core.schedulers.local._supervisor import Supervisor, note
else:  # run by path (``python -S``, see _launch): the sibling modules are top-level
    import _layout  # type: ignore[no-redef]
    import _procs  # type: ignore[no-redef]
    from _supervisor import Supervisor, note  # type: ignore[no-redef]


def _reset_process_state() -> None:
    """Makes a forked (or spawned) process a clean daemon: default signals, stdio to the log."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.alarm(0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGQUIT):  # fmt: skip
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)


def _redirect_stdio(app_dir: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(
        os.path.join(app_dir, _layout.SUPERVISOR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def _fail_startup(app_dir: str, plan: dict[str, Any] | None, err: BaseException) -> None:
    """Records a supervisor crash in the status file (so the app is not stuck RUNNING)."""
    import traceback

    text = "".join(traceback.format_exception(err))
    note(f"crashed:\n{text}")
    path = os.path.join(app_dir, _layout.STATUS_FILE)
    now = time.time()
    try:
        with open(path, encoding="utf-8") as f:
            old = _layout.StatusDoc.from_json(json.load(f))
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        old = None  # none yet, or not as the launcher wrote it
    status = _layout.StatusDoc(
        (plan or {}).get("app_id", os.path.basename(app_dir)),
        (plan or {}).get("name", ""),
        "FAILED",
        old.roles if old else [],
        created=old.created if old else now,
        updated=now,
        ended=now,
        msg=f"local supervisor crashed: {err!r} (see {_layout.SUPERVISOR_LOG})",
        sup_pid=os.getpid(),
        layout=old.layout if old else None,
    )
    with contextlib.suppress(OSError):
        _layout.write_status(app_dir, status)


def run_detached(plan: dict[str, Any] | None, app_dir: str, lock_fd: int) -> int:
    """Entry point once detached: cleans up the process, runs the app, returns an exit code.

    ``lock_fd`` is the app's lock file, locked (``flock``) by the launcher before the status
    file existed and inherited by this process; as long as it is open here, the supervisor
    counts as alive (see ``_state.supervisor_alive``).
    """
    import gc

    gc.disable()  # short-lived and allocation-light; also keeps a forked host's finalizers away
    try:
        os.closerange(3, lock_fd)
        os.closerange(lock_fd + 1, 1 << 20)
        os.set_inheritable(lock_fd, False)  # replicas must not hold the lock
        # the supervisor reaches its app directory through a descriptor of it once its path no
        # longer leads there (it, or the root, renamed): the status and logs keep landing in it
        pinned = _layout.pin_dir(app_dir, lock_fd)
        _redirect_stdio(_layout.current_dir(app_dir, pinned))
        _reset_process_state()
        if plan is None:
            where = _layout.current_dir(app_dir, pinned)
            with open(os.path.join(where, _layout.PLAN_FILE), encoding="utf-8") as f:
                plan = json.load(f)
        sup = Supervisor(plan, app_dir, lock_fd, pinned)
        app_dir = pinned  # a crash below is recorded where the directory is
    except BaseException as e:  # noqa: BLE001 - anything here must end up in the status file
        _fail_startup(app_dir, plan, e)
        return 1
    try:
        return sup.run()
    except BaseException as e:  # noqa: BLE001
        for slot in list(sup.procs.values()):
            _procs.killpg_quietly(slot.pid, signal.SIGKILL)
        _fail_startup(app_dir, plan, e)
        return 1


def main_spawned(argv: list[str] | None = None) -> None:
    """Entry point of ``python -S <this file> APP_DIR LOCK_FD`` (a fresh interpreter).

    The launcher started us with ``setsid``; fork once more so that our parent exits at once
    (the launcher reaps it) and the supervisor is re-parented (fully detached).
    """
    args = sys.argv[1:] if argv is None else argv
    app_dir, lock_fd = args[0], int(args[1])
    if os.fork() != 0:
        os._exit(0)
    os._exit(run_detached(None, app_dir, lock_fd))


if __name__ == "__main__":
    main_spawned()
