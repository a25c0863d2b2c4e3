"""Apps whose directory was deleted while they run: found by their supervisor, stopped by it.

Deleting an app directory (``rm -rf`` of it or of the root) does not stop the app: its
supervisor keeps running and holds the deleted directory's lock file open, which ``/proc``
shows as ``<root>/<app_id>/supervisor.lock (deleted)``. That is how a reader of the root finds
the app (:func:`deleted_supervisor`), and :func:`stop` ends it: SIGTERM to the supervisor (it
cancels its replicas as on any cancel), SIGKILL if it is stopped or does not exit, then a sweep
of every process carrying the app's id and the instance its replicas carry. A copy of the root
never matches: its path differs, and its apps' supervisors, if any, hold their own lock files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time

from torchx_core.schedulers.local._layout import APP_ID_ENV, INSTANCE_ENV, LOCK_FILE, StatusDoc
from torchx_core.schedulers.local._procs import (
    is_stopped,
    kill_app_processes,
    killpg_or_kill,
    process_state,
    read_proc_file,
)

_TITLE = b"torchx-supervis"  # the supervisor's ``comm`` (its title, cut to 15 bytes)

logger: logging.Logger = logging.getLogger(__name__)


def status(root: str, app_id: str) -> StatusDoc | None:
    """The status of ``app_id`` if its directory in ``root`` was deleted while it runs: UNKNOWN
    (its outcome will not be recorded), saying so and how to stop it; None otherwise."""
    return statuses(root, [app_id]).get(app_id)


def statuses(root: str, app_ids: list[str]) -> dict[str, StatusDoc]:
    """:func:`status` of several apps, in one scan of ``/proc`` (none if every directory is
    there); only the apps whose directory was deleted while they run are in the answer."""
    return {
        app_id: StatusDoc(
            app_id,
            "",
            "UNKNOWN",
            [],
            created=0.0,
            msg=(
                f"the app directory {os.path.join(root, app_id)} was deleted while the app runs:"
                f" its outcome will not be recorded; its supervisor (pid {pid}) still runs:"
                " `torchx cancel` stops it"
            ),
            sup_pid=pid,
        )
        for app_id, pid in deleted_supervisors(root, app_ids).items()
    }


#: seconds the supervisor of a deleted app gets to cancel its replicas and exit (the app's own
#: grace period went with its plan: the default one, plus the cancel's margin)
CANCEL_GRACE = 10.0


def cancel(root: str, app_id: str, grace: float = CANCEL_GRACE) -> bool:
    """Stops ``app_id`` if its directory in ``root`` was deleted while it runs (see
    :func:`stop`); False when there is no such app."""
    pid = deleted_supervisor(root, app_id)
    if not pid:
        return False
    logger.warning(
        "the directory of app %s was deleted while it ran; stopping its supervisor (pid %d) and"
        " its processes",
        app_id,
        pid,
    )
    stop(app_id, pid, grace)
    return True


def deleted_supervisor(root: str, app_id: str) -> int:
    """The pid of the live supervisor of ``app_id`` whose directory in ``root`` was deleted
    while it runs; 0 when there is none."""
    return deleted_supervisors(root, [app_id]).get(app_id, 0)


def deleted_supervisors(root: str, app_ids: list[str]) -> dict[str, int]:
    """:func:`deleted_supervisor` of several apps, in one scan of ``/proc`` (none when every
    app's directory, or something else of that name, is there)."""
    real = os.path.realpath(root)
    wanted = {
        os.path.join(real, a, LOCK_FILE) + " (deleted)": a
        for a in app_ids
        if not os.path.lexists(os.path.join(root, a))  # else not deleted (or not an app)
    }
    if not wanted:
        return {}
    names = [a.encode() for a in wanted.values()]
    found: dict[str, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        cmdline = read_proc_file(f"/proc/{entry}/cmdline")
        if cmdline is None:
            continue
        if not any(n in cmdline for n in names):  # the title, or the spawned argv, names it
            comm = read_proc_file(f"/proc/{entry}/comm")
            if comm is None or not comm.startswith(_TITLE):
                continue
        app_id = _holding(entry, wanted)
        if app_id is not None and process_state(int(entry)) not in (None, "Z", "X"):
            found[app_id] = int(entry)
    return found


def _holding(pid: str, wanted: dict[str, str]) -> str | None:
    """The app whose deleted lock file process ``pid`` holds (None: none of them)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        with contextlib.suppress(OSError):
            app_id = wanted.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if app_id is not None:
                return app_id
    return None


def instances(app_id: str, sup_pid: int) -> set[str]:
    """The instances carried by the replicas (children) of the supervisor ``sup_pid``."""
    app = f"{APP_ID_ENV}={app_id}".encode()
    prefix = f"{INSTANCE_ENV}=".encode()
    found: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = read_proc_file(f"/proc/{entry}/environ")
        if env is None or app not in env:
            continue
        stat = read_proc_file(f"/proc/{entry}/stat")
        try:
            ppid = int(stat.rsplit(b")", 1)[1].split()[1]) if stat else 0
        except (IndexError, ValueError):
            continue
        items = env.split(b"\0")
        if ppid == sup_pid and app in items:
            found |= {i[len(prefix) :].decode() for i in items if i.startswith(prefix)}
    return found


def stop(app_id: str, sup_pid: int, grace: float) -> None:
    """Stops the app of a deleted directory: its supervisor (SIGTERM, then SIGKILL once
    ``grace`` seconds passed or at once if it is stopped) and every process of its instance."""
    found = instances(app_id, sup_pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(sup_pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while not is_stopped(sup_pid) and time.monotonic() < deadline:
        if process_state(sup_pid) in (None, "Z", "X"):
            break
        time.sleep(0.02)
    else:
        killpg_or_kill(sup_pid)
    for instance in found:
        kill_app_processes(app_id, instance)
