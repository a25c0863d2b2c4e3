"""Creating an app's directory: all of it or nothing, before its supervisor starts.

The directory is built under a hidden temporary name next to its final place
(``.new-<app_id>``), starting with the marker that proves the scheduler made it, and renamed
into place only once complete (and, for ``log_dir`` apps, linked from the root): a launcher that
dies half way leaves a hidden directory that garbage collection removes once its creator is gone,
never an app that ``status`` and ``list`` cannot see. On any error (full disk, read-only or
unwritable root, a name too long) the partial directory is removed and a typed error names the
root, the cause and, for a full disk, the free space.

Everything created here is private to the user (directories 0700, files 0600; a umask can only
narrow that), under the root and under a ``log_dir`` alike: an app directory holds the role
environments and the replicas' output.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from typing import Any

from torchx_core.schedulers.api import SchedulerError
from torchx_core.schedulers.local._layout import (
    APP_FILE,
    LOCK_FILE,
    MARKER_FILE,
    PLAN_FILE,
    RESERVE_BYTES,
    RESERVE_FILE,
    STATUS_FILE,
    TORCHX_LAYOUT,
    new_instance,
    pending_status,
    write_json_atomic,
)
from torchx_core.schedulers.local._state import CREATING

MIN_FREE_BYTES = 256 << 10  # below this a submit is refused (the app could not even log)


class LocalDiskError(SchedulerError, OSError):
    """The local scheduler cannot write its state (full disk, read-only or unwritable root)."""


def free_bytes(path: str) -> int:
    """Bytes available to this user on the filesystem of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def disk_error(e: OSError, root: str, what: str) -> LocalDiskError:
    """A typed error for an ``OSError`` hit while writing the state under ``root``."""
    hint = "Point $TORCHX_LOCAL_ROOT (or the `log_dir` run option) at a writable directory."
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f"{free_bytes(root)} bytes free"
        except OSError:
            free = "free space unknown"
        cause = f"the filesystem of {root} is full ({free})"
        hint = (
            "Free some space there (`torchx delete` finished apps) or point $TORCHX_LOCAL_ROOT"
            " elsewhere."
        )
    elif e.errno == errno.EROFS:
        cause = f"{root} is on a read-only filesystem"
    elif e.errno in (errno.EACCES, errno.EPERM):
        cause = f"{root} is not writable by this user"
    elif e.errno == errno.ENAMETOOLONG:
        cause = f"a path under {root} is too long ({e.filename})"
        hint = "Use shorter app and role names."
    else:
        cause = f"{e.strerror or e} ({e.filename or root})"
    err = LocalDiskError(f"{what}: {cause}. {hint}")
    err.errno = e.errno
    return err


def check_free_space(root: str, app_id: str) -> None:
    """Refuses a submit up front when the root's filesystem is (nearly) full."""
    try:
        free = free_bytes(root)
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise LocalDiskError(
            f"cannot submit app {app_id}: the filesystem of the local scheduler's root {root}"
            f" has {free} bytes free (at least {MIN_FREE_BYTES} needed). Free some space there"
            " (`torchx delete` finished apps) or point $TORCHX_LOCAL_ROOT elsewhere."
        )


def create_app_dir(
    app_id: str,
    app_dir: str,
    link: str | None,
    plan: dict[str, Any],
    app: dict[str, Any] | None,
    staged: dict[str, str],
) -> int:
    """Builds ``app_dir`` (plus the root's ``link`` to it); returns the app's locked lock fd.

    Sets ``plan["instance"]`` (kept in the marker and given to every replica) before writing it.

    The lock is taken first (before the marker and the status file exist), so whoever sees
    the status also sees a live supervisor (the caller hands the descriptor to it). Raises
    ``OSError`` after removing whatever it created.
    """
    parent = os.path.dirname(app_dir)
    os.makedirs(parent, 0o700, exist_ok=True)
    if os.path.lexists(app_dir) or (link and os.path.lexists(link)):
        raise SchedulerError(
            f"app directory {app_dir} already exists; app ids are random, so this dry run was"
            " probably submitted twice. Build a new dry run (or call submit) instead."
        )
    tmp = os.path.join(parent, CREATING + app_id)
    os.mkdir(tmp, 0o700)  # private whatever the umask or log_dir (see the module docstring)
    lock_fd = -1
    placed = False
    try:
        # locked before the marker: garbage collection removes a `.new-*` directory only when
        # it holds the marker and its lock is free (its creator is gone)
        lock_fd = os.open(
            os.path.join(tmp, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        # the instance binds the marker (and the replicas) to this very directory: see new_instance
        plan["instance"] = new_instance(tmp)
        _write_new(os.path.join(tmp, MARKER_FILE), f"{app_id}\n{plan['instance']}\n".encode())
        _make_role_dirs(tmp, plan)
        for src, dst in staged.items():
            os.rename(src, os.path.join(tmp, os.path.relpath(dst, app_dir)))
        if app is not None:
            write_json_atomic(os.path.join(tmp, APP_FILE), app)
        write_json_atomic(os.path.join(tmp, PLAN_FILE), plan)
        write_json_atomic(
            os.path.join(tmp, STATUS_FILE), pending_status(plan, time.time()).to_json()
        )
        _reserve(os.path.join(tmp, RESERVE_FILE))
        os.rename(tmp, app_dir)
        placed = True
        if link:
            os.symlink(app_dir, link)
        return lock_fd
    except BaseException:
        import shutil  # only on this path: it costs milliseconds to import on the CLI's hot path

        if lock_fd >= 0:
            os.close(lock_fd)
        shutil.rmtree(app_dir if placed else tmp, ignore_errors=True)
        raise


def _make_role_dirs(app_dir: str, plan: dict[str, Any]) -> None:
    nested = plan.get("layout") == TORCHX_LAYOUT
    for r in plan["roles"]:
        role_dir = os.path.join(app_dir, r["name"])
        os.mkdir(role_dir, 0o700)
        if nested:  # TorchX's layout: the reply file goes to <role>/<k>/error.json
            for k in range(r["num_replicas"]):
                os.mkdir(os.path.join(role_dir, str(k)), 0o700)


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _reserve(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            os.write(fd, bytes(RESERVE_BYTES))  # a filesystem without fallocate
    finally:
        os.close(fd)
