"""The local scheduler's state on disk: root directory, app directories, status, GC.

Layout (``<root>`` is per user, see :func:`default_root`)::

    <root>/<app_id>/.torchx-app      written first: the app id (GC removes only what holds it)
                    app.json         the AppDef as submitted (``AppDef.to_dict``)
                    plan.json        what the supervisor runs (argv, role env, cwd per replica;
                                     nothing of the launcher's environment)
                    status.json      written atomically by the supervisor
                    supervisor.lock  flock()ed by the launcher before the status exists, then
                                     held by the supervisor (inherited) for its whole life
                    supervisor.log   the supervisor's own output
                    status.reserve   space set aside for the final status on a full disk
                    <role>/<k>.stdout.log, <k>.stderr.log, <k>.combined.log, <k>.error.json
    <root>/.gc                       mtime = last garbage collection
    <root>/.staging/                 workspaces copied before their app directory exists
    <root>/.names/                   name locks of ``AppLifecycle.attach`` (``_names``)
    <root>/.index/                   the ids submitted under each name (``_name_index``)
    <root>/.new-<app_id>/            an app directory being created (renamed into place whole)

With the ``log_dir`` run option the app directory is ``<log_dir>/<session>/<app_id>`` with
TorchX's log layout (``<role>/<k>/stdout.log``, ``stderr.log``, ``combined.log``,
``error.json``, and a ``SUCCESS`` file once the logs are complete), and ``<root>/<app_id>`` is a
symlink to it, so every process still finds the app by its id alone. App directories are 0700
and their files 0600, whatever the umask.

Garbage collection removes only what it can prove the scheduler created: app directories that
hold the marker naming them, and the symlinks of ``log_dir`` apps whose target holds it (the
link only: an app directory under ``log_dir`` is the user's). It never follows a symlink and
never touches anything else in the root, so the root may hold foreign entries.

Whether the supervisor is alive is answered by the lock: it holds an exclusive ``flock`` until it
exits (even on SIGKILL), so a non-blocking shared lock succeeds only once it is gone. Waiting for
an app is a blocking shared ``flock``: no polling.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading  # already imported by logging
import time
from collections.abc import Iterator
from typing import Any

from torchx_core.schedulers.api import SchedulerError
from torchx_core.schedulers.local._layout import (
    LOCK_FILE,
    MARKER_FILE,
    PLAN_FILE,
    STATUS_FILE,
    StatusDoc,
    check_status,
    instance_is_here,
    write_status,
)
from torchx_core.schedulers.local._procs import is_stopped, kill_app_processes, process_state

ROOT_ENV = "TORCHX_LOCAL_ROOT"
TTL_ENV = "TORCHX_LOCAL_TTL"
DEFAULT_TTL = 7 * 24 * 3600.0
GC_INTERVAL = 600.0
GC_STAMP = ".gc"
STAGING = ".staging"
CREATING = ".new-"  # prefix of app directories being created
DELETING = ".del-"  # prefix of app directories being removed
MAX_STATUS_BYTES = 64 << 20
NAMES = ".names"  # the name locks of ``AppLifecycle.attach`` (``_names.py``)


class CorruptAppStateError(SchedulerError, ValueError):
    """An app's state on disk cannot be read (garbled, truncated or missing status file).

    Only that app is affected: ``list`` shows it as ``UNKNOWN``; ``cancel`` and ``delete``
    still stop its processes.
    """


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
        raise NotADirectoryError(
            f"local scheduler root {root} exists and is not a directory"
        ) from e
    st = os.stat(root)
    if st.st_uid != os.getuid():
        raise PermissionError(
            f"local scheduler root {root} belongs to uid {st.st_uid}, not to you"
            f" (uid {os.getuid()}); set {ROOT_ENV} to a directory of your own"
        )
    if st.st_mode & 0o077:  # made by an older version, or by hand: the apps' state is private
        os.chmod(root, 0o700)
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


def read_marker(app_dir: str) -> tuple[str, str | None] | None:
    """``(app_id, instance)`` from the marker in ``app_dir`` (instance None: an app made before
    instances existed); None without a marker."""
    try:
        with open(os.path.join(app_dir, MARKER_FILE), "rb") as f:
            lines = f.read(512).decode("utf-8", "replace").split("\n")
    except OSError:
        return None
    instance = lines[1].strip() if len(lines) > 1 else ""
    return lines[0].strip(), instance or None


def is_owned(app_dir: str, app_id: str) -> bool:
    """Whether ``app_dir`` is an app directory this scheduler created for ``app_id``.

    It holds the marker written first at creation, naming the app. For a ``log_dir`` app,
    ``app_dir`` is our symlink and the marker is read in its target.
    """
    marker = read_marker(app_dir)
    return marker is not None and marker[0] == app_id


#: an app directory that is a copy (of another root, a restored backup): its processes, if any,
#: belong to the original and are never touched from here
COPY = "copy"


def sweep_target(app_dir: str, app_id: str) -> tuple[str, str | None] | str:
    """What a sweep of the app in ``app_dir`` may kill: ``(app_id, instance)``, or ``COPY``.

    ``COPY`` when the marker's instance was made for another directory (this one is a copy)
    or the marker names another app; instance None for an app made before instances existed.
    """
    marker = read_marker(app_dir)
    if marker is None:
        return (app_id, None)  # an app made before markers existed: its status file only
    if marker[0] != app_id:
        return COPY
    if marker[1] is not None and not instance_is_here(marker[1], app_dir):
        return COPY
    return (app_id, marker[1])


def kill_leftovers(app_dir: str, app_id: str) -> bool:
    """Kills the processes of the app in ``app_dir`` (see :func:`sweep_target`); False if the
    directory is a copy (nothing killed)."""
    target = sweep_target(app_dir, app_id)
    if target == COPY:
        return False
    kill_app_processes(*target)
    return True


def read_status(
    app_dir: str, app_id: str | None = None, dead: list[tuple[str, str | None]] | None = None
) -> StatusDoc | None:
    """The app's status, corrected (and its leftovers killed) when its supervisor died.

    Returns ``None`` when there is no app here. Raises :class:`CorruptAppStateError` when the
    app exists but its status cannot be read.

    A supervisor that died before writing a final state (SIGKILL, OOM killer) is noticed by
    the first reader (its lock is free): the app is recorded as FAILED and every process of it
    (by its ``TORCHX_APP_ID`` and ``TORCHX_APP_INSTANCE``) is killed. A reader of many apps
    passes ``dead``: the ``(app_id, instance)`` of such apps are appended to it instead, and the
    reader kills their processes together (``kill_apps_processes``, one scan of ``/proc``)
    before it answers. A directory that is a copy of an app (another root, a restored backup)
    is reported as such and kills nothing: its processes are the original's.
    """
    app_id = app_id or os.path.basename(app_dir)
    status = _load_status(app_dir, app_id)
    if status is None or status.terminal():
        return status
    if supervisor_alive(app_dir):
        return _unless_stopped(status)
    # the supervisor may have written its final status and exited since our first read
    status = _load_status(app_dir, app_id)
    if status is None or status.terminal():
        return status
    recorded = final_from_lock(app_dir)
    if recorded is not None:
        recorded.msg = (recorded.msg or recorded.state.lower()) + (
            f" (kept in {LOCK_FILE}: the supervisor could not write {STATUS_FILE} in {app_dir})"
        )
        return recorded
    status.state = "FAILED"
    target = sweep_target(app_dir, app_id)
    if target == COPY:
        status.msg = (
            f"{app_dir} is a copy of an app directory made elsewhere (another root, a restored"
            " backup); it has no supervisor here, and the original's processes are left alone"
        )
    elif not os.access(app_dir, os.W_OK):
        status.state = "UNKNOWN"
        status.msg = (
            f"the app's outcome is unknown: its supervisor (pid {status.sup_pid}) ended"
            f" without recording it, and {app_dir} is not writable (read-only filesystem or"
            " permissions); its replicas' logs may tell"
        )
    elif status.sup_pid:
        status.msg = (
            f"the local supervisor (pid {status.sup_pid}) died before the app finished;"
            f" see {os.path.join(app_dir, 'supervisor.log')}"
        )
    else:
        status.msg = (
            "the app failed to start: its supervisor died (or its launcher was killed) before"
            f" running it; see {os.path.join(app_dir, 'supervisor.log')}"
        )
    status.ended = time.time()
    for role in status.roles:
        role.states = "".join("U" if c in "PR" else c for c in role.states)
        role.pids = [0] * len(role.states)
    if isinstance(target, str):  # COPY
        pass
    elif dead is None:
        kill_app_processes(*target)
    else:
        dead.append(target)
    with contextlib.suppress(OSError):
        write_status(app_dir, status)
    return status


def _unless_stopped(status: StatusDoc) -> StatusDoc:
    """``status`` as written by a live supervisor, or, if that supervisor is stopped, marked
    stale: replicas it shows running whose process has exited are UNKNOWN (and the app too
    once none runs), and the message says why. Nothing is written."""
    sup_pid = status.sup_pid
    if not sup_pid or not is_stopped(sup_pid):
        return status
    exited = 0
    for role in status.roles:
        states = list(role.states)
        for k, c in enumerate(states):
            if c == "R" and process_state(role.pids[k]) in (None, "Z", "X"):
                states[k] = "U"
                exited += 1
        role.states = "".join(states)
    if not any(c in "PR" for role in status.roles for c in role.states):
        status.state = "UNKNOWN"
    status.msg = (
        f"the local supervisor (pid {sup_pid}) is stopped (SIGSTOP or a debugger), so this status"
        f" is stale{f': {exited} replica(s) it shows running have exited' if exited else ''};"
        f" `kill -CONT {sup_pid}` resumes it, `torchx cancel` stops the app"
    )
    return status


# finished apps' statuses by path, with the bytes they were parsed from: a finished status is
# read again (list, describe) but parsed and checked only once while its bytes stay the same
_FINISHED: dict[str, tuple[bytes, StatusDoc]] = {}
_FINISHED_MAX = 1024
_READ_SIZE = 1 << 13  # most statuses fit; read(n) allocates n bytes up front


def _load_status(app_dir: str, app_id: str) -> StatusDoc | None:
    path = os.path.join(app_dir, STATUS_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(_READ_SIZE)
            if len(data) == _READ_SIZE:  # a large (or hostile) file: bounded
                data += f.read(MAX_STATUS_BYTES + 1 - _READ_SIZE)
    except (FileNotFoundError, NotADirectoryError):
        if is_owned(app_dir, app_id):
            raise CorruptAppStateError(
                f"app {app_id}: its status file {path} is missing; delete the app"
                f" (`torchx delete`) or remove {app_dir}"
            ) from None
        return None
    except OSError as e:
        raise CorruptAppStateError(f"app {app_id}: cannot read its status file {path}: {e}") from e
    hit = _FINISHED.get(path)
    if hit is not None and hit[0] == data:
        return hit[1]  # checked when first read; nothing changes a finished status
    try:
        if len(data) > MAX_STATUS_BYTES:
            raise ValueError(f"larger than {MAX_STATUS_BYTES} bytes")
        raw = json.loads(data)
        check_status(raw)
    except (ValueError, RecursionError, TypeError) as e:
        if not is_owned(app_dir, app_id):
            return None  # not an app of ours (checked only here: the common path stays one read)
        raise CorruptAppStateError(
            f"app {app_id}: its status file {path} is corrupt ({e}); delete the app"
            f" (`torchx delete`, which still stops its processes) or remove {app_dir}"
        ) from None
    status = StatusDoc.from_json(raw, app_id)
    if status.terminal():
        if len(_FINISHED) >= _FINISHED_MAX:
            _FINISHED.clear()
        _FINISHED[path] = (data, status)
    return status


def supervisor_pid(app_dir: str) -> int:
    """The pid the supervisor wrote into its lock file (0 if none); trust it only while alive."""
    try:
        with open(os.path.join(app_dir, LOCK_FILE), "rb") as f:
            return int(f.read(32).split(b"\n", 1)[0].strip() or 0)
    except (OSError, ValueError):
        return 0


def final_from_lock(app_dir: str) -> StatusDoc | None:
    """The final status a supervisor recorded in its lock file when the status file could not
    be written (a root made read-only under the app), or None."""
    try:
        with open(os.path.join(app_dir, LOCK_FILE), "rb") as f:
            data = f.read(MAX_STATUS_BYTES + 64)
    except OSError:
        return None
    _, _, rest = data.partition(b"\n")
    if not rest.strip():
        return None
    try:
        raw = json.loads(rest)
        check_status(raw)
    except (ValueError, RecursionError, TypeError):
        return None
    status = StatusDoc.from_json(raw)
    return status if status.terminal() else None


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


def remove_app_dir(app_dir: str, app_id: str, keep_target: bool = False) -> list[str]:
    """Removes the app directory ``app_dir`` of ``app_id``; returns what could not be removed.

    Only what the scheduler created: a real directory holding the app's marker, or the
    ``log_dir`` symlink whose target holds it (the target too unless ``keep_target``). Never
    follows any other symlink.
    """
    import shutil

    if not is_owned(app_dir, app_id):
        return [f"{app_dir}: not an app directory of the local scheduler (left as is)"]
    failures: list[str] = []

    def failed(_func: Any, path: str, exc: Any) -> None:
        err = exc[1] if isinstance(exc, tuple) else exc
        failures.append(f"{path}: {getattr(err, 'strerror', None) or err}")

    # first out of sight in one step (readers see the whole app or none), then removed
    if os.path.islink(app_dir):
        target = os.path.realpath(app_dir)
        try:
            os.unlink(app_dir)
        except OSError as e:
            failures.append(f"{app_dir}: {e.strerror}")
        if not keep_target and not failures:
            shutil.rmtree(_hide(target, app_id, failures), onerror=failed)
    else:
        hidden = _hide(app_dir, app_id, failures)
        if not failures:
            shutil.rmtree(hidden, onerror=failed)
    return failures


def _hide(app_dir: str, app_id: str, failures: list[str]) -> str:
    name = f"{DELETING}{app_id}.{os.getpid()}.{threading.get_ident()}"
    hidden = os.path.join(os.path.dirname(app_dir), name)
    try:
        os.rename(app_dir, hidden)
        return hidden
    except OSError as e:
        failures.append(f"{app_dir}: {e.strerror}")
        return app_dir


def maybe_gc(
    root: str, ttl: float, interval: float = GC_INTERVAL, now: float | None = None
) -> list[str]:
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
    os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    os.utime(stamp, (now, now))
    return collect_garbage(root, ttl, now)


def collect_garbage(root: str, ttl: float, now: float | None = None) -> list[str]:
    """Removes the scheduler's own leftovers under ``root``; returns the removed app ids.

    * finished apps whose end is older than ``ttl`` seconds, and apps whose status is
      unreadable, older than ``ttl`` and without a live supervisor;
    * the symlinks of ``log_dir`` apps in those cases (the directory under ``log_dir`` stays:
      it is the user's);
    * app directories whose creation or removal was interrupted (``.new-*``, ``.del-*``,
      creator gone), at once;
    * workspace copies of dry runs never submitted, older than ``ttl`` (only in a real
      ``.staging`` directory: a symlinked one is not followed);
    * the removed apps' ids in the index by name (``_name_index.forget``; emptied files too).

    Anything without the scheduler's marker is left alone, and no symlink is followed.
    """
    import shutil

    now = time.time() if now is None else now
    removed = []
    by_name: dict[str, list[str]] = {}
    for app_id, app_dir in iter_app_dirs(root):
        if not _collectable(app_id, app_dir, ttl, now):
            continue
        name = _app_name(app_dir, app_id)
        if not remove_app_dir(app_dir, app_id, keep_target=True):
            removed.append(app_id)
            by_name.setdefault(name, []).append(app_id)
    if by_name:
        from torchx_core.schedulers.local import _name_index

        _name_index.forget(root, by_name)
    for name, path in _entries(root, hidden=True):
        if name.startswith(CREATING):
            owned = is_owned(path, name[len(CREATING) :]) or _just_begun(path, now)
        elif name.startswith(DELETING):  # a removal that was interrupted
            owned = is_owned(path, name[len(DELETING) :].rsplit(".", 2)[0])
        else:
            continue
        if owned and not supervisor_alive(path):
            shutil.rmtree(path, ignore_errors=True)
    names = os.path.join(root, NAMES)
    for _name, path in [] if os.path.islink(names) else _entries(names, hidden=False):
        try:
            if now - os.lstat(path).st_mtime > ttl and not os.path.islink(path):
                os.unlink(path)
        except OSError:
            pass
    staging = os.path.join(root, STAGING)
    for name, path in [] if os.path.islink(staging) else _entries(staging, hidden=False):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if name.startswith("ws-") and not os.path.islink(path) and now - st.st_mtime > ttl:
            shutil.rmtree(path, ignore_errors=True)
    return removed


def _collectable(app_id: str, app_dir: str, ttl: float, now: float) -> bool:
    if not is_owned(app_dir, app_id):
        return False  # a foreign entry (or a link whose target is gone): never touched
    try:
        status = _load_status(app_dir, app_id)
    except CorruptAppStateError:
        status = None
    if status is not None:
        ended = status.ended
        if not status.terminal() or not ended:
            return False
        return now - ended > ttl
    try:
        age = now - os.lstat(os.path.join(app_dir, MARKER_FILE)).st_mtime
    except OSError:
        return False
    return age > ttl and not supervisor_alive(app_dir)


def _app_name(app_dir: str, app_id: str) -> str:
    """The name the app was submitted under: from its status, else its plan ("" if unknown)."""
    try:
        status = _load_status(app_dir, app_id)
    except CorruptAppStateError:
        status = None
    if status is not None:
        return status.name
    plan = read_json(os.path.join(app_dir, PLAN_FILE))
    name = plan.get("name") if plan is not None else None
    return name if isinstance(name, str) else ""


def _just_begun(path: str, now: float) -> bool:
    """A creation killed before its marker was written: nothing but the lock (and an empty
    marker), a minute old."""
    try:
        return (
            set(os.listdir(path)) <= {LOCK_FILE, MARKER_FILE} and now - os.lstat(path).st_mtime > 60
        )
    except OSError:
        return False


def _entries(path: str, hidden: bool) -> Iterator[tuple[str, str]]:
    try:
        entries = os.scandir(path)
    except OSError:
        return
    with entries:
        for entry in entries:
            if entry.name.startswith(".") == hidden:
                yield entry.name, entry.path
