"""The local scheduler (``local_cwd`` and ``local``): runs an app's replicas as processes here.

Apps outlive the process that submitted them: each app gets a directory under a per-user root
(``$TORCHX_LOCAL_ROOT``, see :mod:`torchx_core.schedulers.local._state`) holding the AppDef as
submitted, the per-replica logs and a status file, and a small detached supervisor process
(:mod:`torchx_core.schedulers.local._supervisor`) that starts the replicas in their own process
groups, reaps them, applies ``max_retries`` per ``RetryPolicy`` and handles cancellation. Any
process that knows the app handle can therefore ``describe``, ``log_iter``, wait on, ``cancel``
or ``delete`` the app; ``describe`` reads one small file.

* ``local_cwd`` runs every role in the current working directory (``image`` is ignored, as in
  TorchX), or in a copy of the role's workspace when it has one (``--workspace``);
* ``local`` runs each role in the directory named by its ``image`` (which must exist).

Replicas inherit the launcher's environment (less the ``env_drop`` run option's names and
prefixes; handed to the supervisor in memory, never written to disk) plus the role's ``env`` and get
``TORCHX_RANK0_HOST=localhost`` (the ``macros.rank0_env`` variable), ``MASTER_ADDR=localhost``,
``MASTER_PORT`` (a free port chosen per app), ``TORCHX_APP_ID``, ``TORCHX_JOB_ID`` (the app
handle), ``TORCHX_ROLE_NAME``, ``TORCHX_ROLE_IDX``, ``TORCHX_REPLICA_IDX``,
``TORCHELASTIC_ERROR_FILE`` (the reply file), ``PET_LOG_DIR`` and ``PYTHONUNBUFFERED``. Ranks and
world sizes are left to the launcher inside the replica (``torchrun``).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from torchx_core.schedulers.api import (
    AppValidationError,
    DescribeAppResponse,
    InvalidLogQueryError,
    ListAppResponse,
    ReplicaUsage,
    Scheduler,
    SchedulerError,
    Stream,
)
from torchx_core.schedulers.local import _logio, _owner, _state
from torchx_core.schedulers.local._create import LocalDiskError
from torchx_core.schedulers.local._layout import (
    APP_FILE,
    PLAN_FILE,
    STATUS_FILE,
    TERMINAL,
    StatusDoc,
    cancelled_status,
    log_path,
    write_status,
)
from torchx_core.schedulers.local._options import APP_ID_RULES as APP_ID_RULES
from torchx_core.schedulers.local._options import MAX_NAME_CHARS as MAX_NAME_CHARS
from torchx_core.schedulers.local._options import (
    SAFE_NAME,
    LocalOpts,
    local_runopts,
    make_unique,
)
from torchx_core.schedulers.local._procs import is_stopped, kill_apps_processes, killpg_or_kill
from torchx_core.schedulers.local._request import RANK0_ENV as RANK0_ENV
from torchx_core.schedulers.local._request import (
    LocalReplica,
    LocalRequest,
    LocalRole,
    RequestBuilder,
    app_problems,
    format_request,
    saved_app,
    submit_plan,
)
from torchx_core.schedulers.local._request import _join_PATH as _join_PATH
from torchx_core.schedulers.local._responses import (
    LOCAL_STATES,
    LazyRolesResponse,
    checked_status,
    list_rows,
)
from torchx_core.schedulers.local._state import CorruptAppStateError
from torchx_core.schedulers.local._torchx_face import TORCHX_NAMES as _TORCHX_NAMES
from torchx_core.schedulers.local._torchx_face import TorchXLocalFace
from torchx_core.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    Workspace,
    runopts,
)
from torchx_core.specs.errors import UnknownAppException
from torchx_core.util.lazy import lazy_exports
from torchx_core.workspace.api import WorkspaceMixin, copy_workspace

if TYPE_CHECKING:
    from torchx_core.schedulers.local._images import ImageProvider

__all__ = [
    "LOCAL_STATES",
    "CorruptAppStateError",
    "LocalDiskError",
    "LocalOpts",
    "LocalReplica",
    "LocalRequest",
    "LocalRole",
    "LocalScheduler",
    "Opts",
    "PopenRequest",
    "create_dir_scheduler",
    "create_scheduler",
    "make_unique",
    *_TORCHX_NAMES,
]

logger: logging.Logger = logging.getLogger(__name__)

# TorchX's module-level names (image providers, log names...), loaded from ``_images`` when used
__getattr__, __dir__ = lazy_exports(
    __name__, dict.fromkeys(_TORCHX_NAMES, "torchx_core.schedulers.local._images"), globals()
)

Opts = LocalOpts  # TorchX's names
PopenRequest = LocalRequest


class LocalScheduler(TorchXLocalFace, WorkspaceMixin[None], Scheduler[LocalRequest]):
    """Runs apps as local processes supervised by a detached per-app supervisor.

    Args:
        session_name: the runner session (part of the app handle)
        backend: ``"local_cwd"`` (roles run in the current directory) or ``"local"`` (roles run
            in the directory named by their ``image``)
        root: the state root (default: ``$TORCHX_LOCAL_ROOT`` or ``/tmp/torchx-local-<uid>``)
        ttl: seconds after which finished apps are garbage-collected (default
            ``$TORCHX_LOCAL_TTL`` or 7 days); collection runs on submit, at most every 10 min
        extra_paths: directories prepended to every replica's ``PATH``
        gpu_count: GPUs on this host for ``auto_set_cuda_visible_devices`` (default: counted by
            ``nvidia-smi -L``, as TorchX)
        image_provider_class: TorchX's way to choose the mode: ``LocalDirectoryImageProvider``
            is ``local``, ``CWDImageProvider`` is ``local_cwd``; another :class:`ImageProvider`
            class is built with the run options and asked where each role runs
        cache_size: accepted for TorchX (``>= 1``); apps are kept on disk, not in a cache

    Raises:
        SchedulerArgumentError: ``cache_size`` is not an int >= 1.
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates
    cancels_finished_apps = True  # cancel of a FAILED app still kills a dead supervisor's leftovers

    def __init__(
        self,
        session_name: str,
        backend: str = "local_cwd",
        root: str | None = None,
        ttl: float | None = None,
        extra_paths: list[str] | None = None,
        gpu_count: int | None = None,
        *,
        image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] | None = None,
        cache_size: int = 100,
    ) -> None:
        backend = self._set_provider(backend, image_provider_class, cache_size)
        super().__init__(backend, session_name)
        self._cache_size = cache_size
        self._root = os.path.abspath(root) if root else None
        self._ttl = ttl
        self._extra_paths = list(extra_paths or [])
        self._gpu_count = gpu_count
        self._roles_cache: dict[str, list[Role]] = {}

    # -- paths --------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The state root this scheduler reads and writes."""
        return self._root or _state.default_root()

    def lookup_scope(self) -> str:
        return (
            f"the local root {self.root} (an app submitted under another root is not seen: set"
            f" ${_state.ROOT_ENV} to that root)"
        )

    def _app_dir(self, app_id: str) -> str | None:
        if len(app_id) > 255 or not SAFE_NAME.match(app_id):
            return None
        return os.path.join(self.root, app_id)

    # -- options ------------------------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return local_runopts()

    def _requires_resource(self) -> bool:
        return False

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        super()._validate(app, scheduler, cfg)
        problems = app_problems(app, self.backend, cfg)
        if problems:
            raise AppValidationError(
                f"app `{app.name}` cannot run on `{scheduler}`: " + "; ".join(problems)
            )

    # -- workspaces ---------------------------------------------------------------------------
    _hook_takes_workspace = True  # the hook below takes the Workspace, not a path

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Copies the workspace into a staging directory and points ``role.image`` at it.

        On submit the copy moves into the app directory (``<app_dir>/workspace``) and the role
        runs there; copies of dry runs that are never submitted are garbage-collected.
        """
        staging = os.path.join(_ensure_root(self.root), _state.STAGING)
        os.makedirs(staging, 0o700, exist_ok=True)
        out = os.path.join(staging, make_unique("ws"))
        copy_workspace(workspace, out)
        role.image = out

    def _staging_dir(self) -> str:
        return os.path.join(self.root, _state.STAGING) + os.sep

    # -- dry run ------------------------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[LocalRequest]:
        # cfg is already resolved against run_opts() (defaults filled, types checked)
        builder = RequestBuilder(
            self.backend,
            self.session_name,
            self.root,
            self._staging_dir(),
            self._extra_paths,
            self._gpu_count if self._gpu_count is not None else self._cuda_device_count,
            self._custom_provider(cfg),
        )
        return AppDryRunInfo(builder.build(app, cfg, make_unique(app.name)), format_request)

    def _to_popen_request(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> LocalRequest:
        """The request for ``app`` (TorchX's ``PopenRequest``, see ``LocalRequest.role_params``),
        ``cfg`` resolved first; the app is not validated (as TorchX's method of this name)."""
        return self._submit_dryrun(app, self.run_opts().resolve(cfg)).request

    # -- submit -------------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[LocalRequest]) -> str:
        """Creates the app directory (all or nothing) and starts the app's supervisor.

        Returns the app id. Raises :class:`LocalDiskError` when the state cannot be written (full
        disk, read-only or unwritable root), naming the root and the cause.
        """
        from torchx_core.schedulers.local import _create, _launch

        req = dryrun_info.request
        root = _ensure_root(req.root)
        try:
            _state.maybe_gc(root, _state.ttl_seconds(self._ttl))
        except OSError as e:
            logger.debug("garbage collection of %s failed: %s", root, e)
        _create.check_free_space(root, req.app_id)
        app = getattr(dryrun_info, "_app", None)
        app_json = saved_app(app, req.app_id)
        plan = submit_plan(req, app.name if app is not None else None, dryrun_info._cfg)
        link = os.path.join(root, req.app_id)
        try:
            lock_fd = _create.create_app_dir(
                req.app_id,
                req.app_dir,
                link if req.app_dir != link else None,
                plan,
                app_json,
                req.staged,
            )
        except OSError as e:
            raise _create.disk_error(e, root, f"cannot create app {req.app_id}") from e
        from torchx_core.schedulers.local import _name_index

        _name_index.add(root, app.name if app is not None else "", req.app_id)
        try:
            _launch.start_supervisor(plan, req.app_dir, lock_fd)
        except OSError as e:
            now = time.time()
            written = _state.read_json(os.path.join(req.app_dir, STATUS_FILE))
            status = checked_status(written, req.app_id) or StatusDoc(
                req.app_id, "", "", [], created=now
            )
            status.state, status.ended = "FAILED", now
            status.msg = f"could not start the local supervisor: {e}"
            write_status(req.app_dir, status)
            raise SchedulerError(f"could not start app {req.app_id}: {e}") from e
        finally:
            os.close(lock_fd)  # the supervisor holds its own copy
        return req.app_id

    # -- inspection ---------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Reads the app's status file (and, once, its AppDef); ``None`` for unknown apps.

        Raises:
            CorruptAppStateError: the app exists but its status file cannot be read.
        """
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return None
        doc = _state.read_status(app_dir, app_id)
        if doc is None:  # no status file: maybe deleted while it runs
            from torchx_core.schedulers.local import _gone

            doc = _gone.status(self.root, app_id)
        return self._response(app_id, app_dir, doc)

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """One pass over the requested apps: each app's status file is read once, and the
        leftover processes of every app whose supervisor died are killed together, in one scan
        of ``/proc`` (not one scan per app).

        Raises:
            CorruptAppStateError: an app exists but its status file cannot be read.
        """
        dead: list[tuple[str, str | None]] = []
        found: dict[str, tuple[str, StatusDoc | None]] = {}
        try:
            for app_id in dict.fromkeys(app_ids):
                app_dir = self._app_dir(app_id)
                found[app_id] = (
                    ("", None)
                    if app_dir is None
                    else (app_dir, _state.read_status(app_dir, app_id, dead=dead))
                )
        finally:
            kill_apps_processes(dead)
        missing = [a for a, (d, doc) in found.items() if d and doc is None]
        if missing:
            from torchx_core.schedulers.local import _gone

            for app_id, doc in _gone.statuses(self.root, missing).items():  # deleted, running
                found[app_id] = (found[app_id][0], doc)
        return {a: self._response(a, d, s) if d else None for a, (d, s) in found.items()}

    def _response(
        self, app_id: str, app_dir: str, doc: StatusDoc | None
    ) -> DescribeAppResponse | None:
        if doc is None:
            return None
        failed = doc.failed
        error = doc.structured_error_msg or NONE
        roles_statuses = []
        for ridx, r in enumerate(doc.roles):
            name = r.name
            replicas = [
                ReplicaStatus(k, LOCAL_STATES.get(c, AppState.UNKNOWN), name, "localhost")
                for k, c in enumerate(r.states)
            ]
            if failed and failed[0] == ridx and failed[1] < len(replicas):
                replicas[failed[1]].structured_error_msg = error
            roles_statuses.append(RoleStatus(name, replicas))
        return LazyRolesResponse(
            lambda: self._roles(app_id, app_dir),
            app_id=app_id,
            state=AppState[doc.state],
            num_restarts=doc.num_restarts,
            msg=doc.msg,
            structured_error_msg=error,
            ui_url=f"file://{os.path.realpath(app_dir)}",
            roles_statuses=roles_statuses,
        )

    def _roles(self, app_id: str, app_dir: str) -> list[Role]:
        roles = self._roles_cache.get(app_id)
        if roles is None:
            path = os.path.join(app_dir, APP_FILE)
            try:
                data = _state.read_json(path)
            except RecursionError:
                raise CorruptAppStateError(
                    f"app {app_id}: its AppDef file {path} is nested too deeply to read (not as"
                    f" the scheduler wrote it); delete the app (`torchx delete`) or remove {path}"
                ) from None
            if data is None:
                return []
            try:
                roles = AppDef.from_dict(data).roles
            except Exception as e:  # noqa: BLE001 - a foreign/old app.json must not break describe
                logger.warning("cannot read the AppDef of %s: %s", app_id, e)
                roles = []
            self._roles_cache[app_id] = roles
        return roles

    @property
    def _handle_prefix(self) -> str:
        return f"{self.backend}://{self.session_name}/"

    def list_named(self, name: str, cfg: object = None) -> list[ListAppResponse]:
        """The apps submitted under ``name``: only theirs are read (``_name_index``)."""
        from torchx_core.schedulers.local import _name_index

        ids = _name_index.ids_for(
            self.root, name, lambda: [(a.app_id, a.name) for a in self.list()]
        )
        dirs = [(i, d) for i in ids if (d := self._app_dir(i)) is not None]
        return [row for row in list_rows(dirs, self._handle_prefix) if row.name == name]

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every app under the root with its state, oldest first (one scan; one small read per app).

        An app whose state cannot be read is listed as ``UNKNOWN`` (with a warning); entries
        that are not apps of this scheduler are skipped.
        """
        return list_rows(_state.iter_app_dirs(self.root), self._handle_prefix)

    def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Blocks until the app is finished: on the supervisor's lock, and until its status is
        terminal (read once a second, so a supervisor that is stopped or hung while its app was
        cancelled does not block the wait).

        Returns the final description, or the current one if ``timeout`` seconds passed first.
        """
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # mostly blocked on the lock; a status read per second catches a final status
            # written while the supervisor still holds it (a cancel of a hung supervisor)
            step = (
                _WAIT_CHECK
                if deadline is None
                else min(_WAIT_CHECK, max(0.0, deadline - time.monotonic()))
            )
            if _state.wait_supervisor(app_dir, step):
                return self.describe(app_id)
            desc = self.describe(app_id)
            if desc is None or desc.state in _TERMINAL_STATES:
                return desc
            if deadline is not None and time.monotonic() >= deadline:
                return desc

    # -- logs ---------------------------------------------------------------------------------

    def _log_target(
        self, app_id: str, role_name: str, k: int, streams: Stream | None
    ) -> tuple[str, StatusDoc, str]:
        """``(app dir, status doc, stream)`` of a replica's log; raises for a bad query."""
        app_dir = self._app_dir(app_id)
        doc = _state.read_status(app_dir, app_id) if app_dir else None
        if app_dir is None or doc is None:
            raise UnknownAppException(f"{self.backend}://{self.session_name}/{app_id}")
        from torchx_core.schedulers.local._logquery import log_stream

        return app_dir, doc, log_stream(doc, app_id, role_name, k, streams)

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[str] | None:
        """The replica's log file for ``streams`` (default: combined), as :meth:`log_iter`."""
        app_dir, doc, stream = self._log_target(app_id, role_name, k, streams)
        return [log_path(app_dir, role_name, k, stream, doc.layout)]

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` (with their ``\\n``).

        ``streams``: ``stdout``, ``stderr`` or ``combined`` (default; both streams interleaved
        line by line in arrival order). With ``should_tail`` the iterator follows the log until
        the app ends. ``since``/``until`` are ignored (the logs carry no timestamps).
        """
        app_dir, doc, stream = self._log_target(app_id, role_name, k, streams)
        if since or until:
            logger.warning(
                "since/until are ignored by the local scheduler: its logs carry no timestamps"
            )
        pattern = None
        if regex:
            try:
                pattern = re.compile(regex)
            except re.error as e:
                raise InvalidLogQueryError(
                    f"invalid log regex {regex!r}: {e}; pass a Python regular expression"
                ) from e
        path = log_path(app_dir, role_name, k, stream, doc.layout)
        if should_tail and not doc.terminal():
            lines: Iterator[str] = _logio.follow(path, app_dir)
        else:
            lines = _logio.read_lines(path)
        return filter(pattern.search, lines) if pattern is not None else lines

    # -- lifecycle ----------------------------------------------------------------------------

    def exists(self, app_id: str) -> bool:
        """Whether the app's directory exists (even if its status file is unreadable)."""
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return False
        # apps made before the marker have a status file only; a deleted one, its supervisor
        if _state.is_owned(app_dir, app_id) or os.path.isfile(os.path.join(app_dir, STATUS_FILE)):
            return True
        if os.path.lexists(app_dir):
            return False
        from torchx_core.schedulers.local import _gone

        return _gone.deleted_supervisor(self.root, app_id) != 0

    def _cancel_existing(self, app_id: str) -> None:
        """Stops the app: through its supervisor while it lives, else by killing its processes.

        Also for an app that already ended (its supervisor may have died and left replicas) or
        whose status file is unreadable: every process carrying the app's id is killed.
        """
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return
        if not os.path.lexists(app_dir):  # deleted while it runs: stopped through its supervisor
            from torchx_core.schedulers.local import _gone

            _gone.cancel(self.root, app_id)
            return
        try:
            status = _state.read_status(app_dir, app_id)  # kills leftovers of a dead supervisor
        except CorruptAppStateError as e:
            logger.warning("%s; stopping its processes anyway", e)
            status = None
        if status is not None and status.terminal():
            # survivors of a supervisor that died (or was killed)
            _state.kill_leftovers(app_dir, app_id)
            return
        self._stop_supervisor(app_id, app_dir, status)
        try:
            status = _state.read_status(app_dir, app_id)
        except CorruptAppStateError:
            status = None
        if status is None or not status.terminal():
            self._record_cancelled(app_id, app_dir, status)
            _state.kill_leftovers(app_dir, app_id)

    def _stop_supervisor(self, app_id: str, app_dir: str, status: StatusDoc | None) -> bool:
        """Stops a live supervisor; True if it had to be killed.

        SIGTERM first: the supervisor cancels its replicas (SIGTERM, its grace period, SIGKILL)
        and exits. One that is stopped (SIGSTOP), or still alive a few seconds after the grace
        period (hung), is SIGKILLed with its process group, and the app's processes with it.
        """
        pid = (status.sup_pid if status else 0) or _state.supervisor_pid(app_dir)
        deadline = time.monotonic() + 10.0
        while not pid and _state.supervisor_alive(app_dir) and time.monotonic() < deadline:
            time.sleep(0.005)  # just submitted: the supervisor has not recorded its pid yet
            pid = _state.supervisor_pid(app_dir)
        if not pid or not _state.supervisor_alive(app_dir):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        plan = _state.read_json(os.path.join(app_dir, PLAN_FILE)) or {}
        grace = plan.get("grace")
        grace = float(grace) if isinstance(grace, (int, float)) else 5.0
        if not is_stopped(pid) and _state.wait_supervisor(app_dir, grace + _CANCEL_MARGIN):
            return False
        logger.warning(
            "the supervisor (pid %d) of %s is stopped or hung; killing it and the app's processes",
            pid,
            app_id,
        )
        # recorded first: a reader that sees the lock go free must find CANCELLED, not "died"
        written = checked_status(_state.read_json(os.path.join(app_dir, STATUS_FILE)), app_id)
        if written is None or not written.terminal():
            self._record_cancelled(app_id, app_dir, written)
        killpg_or_kill(pid)
        _state.kill_leftovers(app_dir, app_id)
        _state.wait_supervisor(app_dir, _CANCEL_MARGIN)
        return True

    def _record_cancelled(self, app_id: str, app_dir: str, status: StatusDoc | None) -> None:
        """Writes a CANCELLED status for an app stopped without its supervisor's help."""
        try:
            write_status(app_dir, cancelled_status(status, app_id, time.time()))
        except OSError as e:
            logger.warning("app %s: could not record the cancellation: %s", app_id, e)

    def _delete_existing(self, app_id: str) -> None:
        """Cancels the app, then removes its directory.

        Raises:
            SchedulerError: something could not be removed (each path is named).
        """
        self._cancel_existing(app_id)
        app_dir = self._app_dir(app_id)
        self._roles_cache.pop(app_id, None)
        if app_dir is not None:  # a supervisor still finishing (its app just ended) writes there
            _state.wait_supervisor(app_dir, timeout=_DELETE_WAIT)
        if app_dir is None or not os.path.lexists(app_dir):  # deleted already (and stopped)
            return
        failures = _state.remove_app_dir(app_dir, app_id)
        if failures:
            shown = "; ".join(failures[:5]) + (
                f"; and {len(failures) - 5} more" if len(failures) > 5 else ""
            )
            raise SchedulerError(f"app {app_id} was stopped but not (fully) deleted: {shown}")

    def close(self) -> None:
        """Nothing to release: apps keep running after the scheduler (and its process) is gone."""

    # -- one app per name (``AppLifecycle.attach``) ---------------------------------------------

    def name_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """An exclusive lock per app name in the root, waited for a bounded time (see
        ``local/_names.py``: a stopped or gone holder, or a timeout, is a ``NameLockError``)."""
        from torchx_core.schedulers.local import _names

        return _names.name_lock(_ensure_root(self.root), name)

    # -- ownership (``<app_dir>/owner``, see local/_owner.py) ----------------------------------

    def set_owner(self, app_id: str, owner: str) -> bool:

        app_dir = self._app_dir(app_id)
        return app_dir is not None and _owner.write_owner(app_dir, owner)

    def get_owner(self, app_id: str) -> str | None:

        app_dir = self._app_dir(app_id)
        return None if app_dir is None else _owner.read_owner(app_dir)

    def resource_usage(self, app_id: str) -> dict[tuple[str, int], ReplicaUsage] | None:
        """CPU time and memory of each running replica and its descendants, from ``/proc``."""
        app_dir = self._app_dir(app_id)
        doc = _state.read_status(app_dir, app_id) if app_dir else None
        if doc is None:
            return None
        from torchx_core.schedulers.local import _usage

        return _usage.replica_usage(_usage.running_replicas(doc))

    def run_options(self, app_id: str) -> dict[str, CfgVal] | None:
        """The resolved run options kept in the app's ``plan.json`` (None for older apps)."""
        app_dir = self._app_dir(app_id)
        plan = _state.read_json(os.path.join(app_dir, PLAN_FILE)) if app_dir else None
        cfg = plan.get("cfg") if isinstance(plan, dict) else None
        return dict(cfg) if isinstance(cfg, dict) else None


# -- helpers ------------------------------------------------------------------------------------


_WAIT_CHECK = 1.0  # seconds between two status reads of a blocking wait
_TERMINAL_STATES = frozenset(AppState[s] for s in TERMINAL)
_CANCEL_MARGIN = 5.0  # seconds a cancelled supervisor gets beyond its grace period to exit
_DELETE_WAIT = 10.0  # seconds delete waits for the supervisor of an app that just ended to exit


def _ensure_root(root: str) -> str:
    try:
        return _state.ensure_root(root)
    except OSError as e:
        raise SchedulerError(
            f"cannot use {root} as the local scheduler's state root: {e}. Point"
            f" ${_state.ROOT_ENV} (or the `log_dir` run option) at a directory you own."
        ) from e


def create_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """The ``local_cwd`` scheduler: roles run in the current working directory.

    Takes TorchX's ``cache_size``, ``extra_paths`` and ``image_provider_class`` too.
    """
    return _create(session_name, "local_cwd", kwargs)


def create_dir_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """The ``local`` scheduler: each role runs in the directory named by its ``image``."""
    return _create(session_name, "local", kwargs)


def _create(session_name: str, backend: str, kwargs: dict[str, Any]) -> LocalScheduler:
    accepted = {"root", "ttl", "extra_paths", "gpu_count", "image_provider_class", "cache_size"}
    ignored = sorted(set(kwargs) - accepted)
    if ignored:
        logger.debug("local scheduler ignores kwargs: %s", ", ".join(ignored))
    return LocalScheduler(
        session_name, backend=backend, **{k: v for k, v in kwargs.items() if k in accepted}
    )
