"""Processes of local apps: finding them in ``/proc``, killing them, the supervisor's title.

An app's processes are found by their environment: every replica carries ``TORCHX_APP_ID`` and
``TORCHX_APP_INSTANCE`` (see ``_layout``) and leads its own process group, so a sweep finds the
replicas of an app whatever its supervisor managed to record, their children, and descendants
that left the group (``setsid``, daemons).

Standard library only, and no other module of the project but ``_layout``: the supervisor,
started as a bare interpreter (``python -S``), imports it as a top-level module.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

if __package__:
    from torchx_core.schedulers.local._layout import APP_ID_ENV, INSTANCE_ENV
else:  # loaded by the supervisor run by path (``python -S``): its siblings are top-level
    from _layout import APP_ID_ENV, INSTANCE_ENV  # type: ignore[no-redef]


def read_proc_file(path: str) -> bytes | None:
    """The bytes of a ``/proc`` file (raw ``os.read``: no file objects), None if unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def kill_app_processes(app_id: str, instance: str | None) -> int:
    """SIGKILLs every other process whose environment carries the app's id and instance.

    A process found that leads its group has its whole group killed. ``instance`` None: an app
    made before instances existed, matched by id alone. Returns how many processes were found.
    """
    return kill_apps_processes([(app_id, instance)])


def kill_apps_processes(apps: Iterable[tuple[str, str | None]]) -> int:
    """:func:`kill_app_processes` for several ``(app_id, instance)`` in one scan of ``/proc``."""
    wanted: dict[bytes, bytes | None] = {
        f"{APP_ID_ENV}={a}".encode(): None if i is None else f"{INSTANCE_ENV}={i}".encode()
        for a, i in apps
    }
    if not wanted:
        return 0
    prefix = next(iter(wanted)) if len(wanted) == 1 else f"{APP_ID_ENV}=".encode()
    me = os.getpid()
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        env = read_proc_file(f"/proc/{name}/environ")
        # the substring test rejects almost every process without splitting its environment
        # (5x faster on a full machine: this scan runs before an app's final status)
        if env is None or prefix not in env:
            continue
        items = set(env.split(b"\0"))
        if any(m in items and (i is None or i in items) for m, i in wanted.items()):
            pid = int(name)
            found += 1
            killpg_or_kill(pid)
    return found


def killpg_or_kill(pid: int) -> None:
    """SIGKILLs ``pid`` and, if it leads one (a supervisor does), its process group."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def killpg_quietly(pgid: int, sig: int) -> None:
    """``os.killpg``, ignoring a group that is gone (or not ours)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` in ``/proc`` (``R``, ``S``, ``T``, ``Z``...); None
    if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def is_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, a debugger): it cannot make progress."""
    return process_state(pid) in ("T", "t")


def set_process_title(title: str) -> None:
    """Shows ``title`` in ``ps``/``top`` (as ``setproctitle`` does, without a dependency).

    Sets the thread name (``comm``, 15 bytes) and rewrites the process's original argv area
    (``/proc/self/cmdline``) in place through ``/proc/self/mem``; a title longer than that area
    is cut. Best effort: failures are ignored.
    """
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(title[:15])
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        data = title.encode()[: end - start - 1]
        fd = os.open("/proc/self/mem", os.O_WRONLY)
        try:
            os.pwrite(fd, data + b"\0" * (end - start - len(data)), start)
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        pass
