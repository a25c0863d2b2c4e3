"""The Runner: submits AppDefs (or components) to schedulers and manages the apps it names::

    from torchx_core.runner import get_runner

    with get_runner() as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hi"], scheduler="local_cwd")
        status = runner.wait(handle, wait_interval=0.1)

Apps are named by handles ``{scheduler}://{session_name}/{app_id}``; every method that takes a
handle works on apps launched by any runner or process (the session name is informational).

As in TorchX, each public call (``run``, ``dryrun``, ``schedule``, ``status``, ``wait``,
``cancel``, ``delete``, ``describe``, ``log_lines``, ``list``, ``run_component``) records a
:class:`~torchx_core.runner.events.TorchxEvent` to the ``torchx-events-null`` logger; see
:mod:`torchx_core.runner.events`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, overload

from torchx_core.runner._checks import (
    RunnerError,
    as_stream,
    builtin_component,
    check_app,
    check_workspace,
    copy_app,
)
from torchx_core.runner.events import log_event
from torchx_core.settings import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppStatus,
    CfgVal,
    UnknownAppException,
    UnknownSchedulerException,
    Workspace,
    make_app_handle,
    parse_app_handle,
    runopts,
)
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    import contextlib
    from datetime import datetime

    from torchx_core.runner.status_watch import StatusWatcher
    from torchx_core.schedulers.api import (
        DescribeAppResponse,
        ListAppResponse,
        ReplicaUsage,
        Scheduler,
        Stream,
    )
    from torchx_core.schedulers.registry import SchedulerFactory

__all__ = [
    "Runner",
    "RunnerError",
    "get_configured_tracker_factories",
    "get_configured_trackers",
    "get_runner",
    "get_scheduler_factories",
]

logger: logging.Logger = logging.getLogger(__name__)

DEFAULT_SESSION_NAME = "torchx"

# wait(): first polls come quickly (short apps finish fast), then back off to wait_interval
_FIRST_POLL_INTERVAL = 0.005
# the longest owner token (fits a Slurm comment or a Kubernetes annotation comfortably)
_MAX_OWNER_LEN = 200


class Runner:
    """Submits apps to schedulers and manages them by handle.

    Scheduler instances are created on first use (``factory(name, **scheduler_params)``),
    cached per runner, and closed by :meth:`close`.

    Args:
        name: the session name, part of every handle this runner creates (may be empty)
        scheduler_factories: scheduler name -> factory ``(session_name, **kwargs) -> Scheduler``
            (default: every registered scheduler, :func:`get_scheduler_factories`)
        component_defaults: component name -> {argument: default as str} (``[component:...]``)
        scheduler_params: keyword arguments passed to every scheduler factory
        status_watcher: where :meth:`watch_status` and :meth:`shared_list` share their reads
            (default: the process-wide watcher, shared by every Runner of the process)
    """

    def __init__(
        self,
        name: str = "",
        scheduler_factories: Mapping[str, SchedulerFactory] | None = None,
        component_defaults: dict[str, dict[str, str]] | None = None,
        scheduler_params: dict[str, Any] | None = None,
        status_watcher: StatusWatcher | None = None,
    ) -> None:
        self._name: str = name
        self._scheduler_factories: Mapping[str, SchedulerFactory] = (
            get_scheduler_factories() if scheduler_factories is None else scheduler_factories
        )
        self._scheduler_params: dict[str, Any] = dict(scheduler_params or {})
        self._scheduler_instances: dict[str, Scheduler[Any]] = {}
        self._apps: dict[AppHandle, AppDef] = {}
        self._component_defaults: dict[str, dict[str, str]] = component_defaults or {}
        self._lock = threading.Lock()
        self._closed = False
        self._watcher = status_watcher  # the process-wide one when None (imported on first use)

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()  # exceptions raised in the ``with`` block propagate

    def close(self) -> None:
        """Closes every scheduler this runner created. Safe to call more than once."""
        with self._lock:
            instances = list(self._scheduler_instances.values())
            self._scheduler_instances.clear()
            self._closed = True
        for sched in instances:
            try:
                sched.close()
            except Exception:  # one failing close must not leak the others
                logger.exception("closing scheduler %s failed", sched.backend)

    def name(self) -> str:
        """The session name of this runner."""
        return self._name

    # -- submission --------------------------------------------------------------------------

    def run_component(
        self,
        component: str,
        component_args: list[str] | dict[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppHandle:
        """Materializes component ``component`` with ``component_args`` and runs it.

        Args:
            component: a builtin (``"dist.ddp"``), ``path/to/file.py:fn`` or ``module:fn``
            component_args: CLI-style arguments (``["--msg", "hi"]``) or a dict of kwargs
            scheduler: scheduler name
            cfg: scheduler run options
            workspace: local project directory to mirror into the job (overrides
                ``app.roles[0].workspace``)
            parent_run_id: the run this app derives from (experiment tracking; default
                ``$TORCHX_PARENT_RUN_ID``), injected as ``TORCHX_PARENT_RUN_ID``

        Returns:
            The app handle.
        """
        with log_event("run_component", scheduler) as ev:
            dryrun_info = self.dryrun_component(
                component, component_args, scheduler, cfg, workspace, parent_run_id
            )
            handle = self.schedule(dryrun_info)
            if ev.recording:
                ev.fill(workspace=str(workspace))
                _fill_app(ev, dryrun_info._app, parse_app_handle(handle)[2])
            return handle

    def dryrun_component(
        self,
        component: str,
        component_args: list[str] | dict[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Like :meth:`run_component` but only returns what would be submitted."""
        app = self.materialize_component(component, component_args)
        return self.dryrun(app, scheduler, cfg, workspace, parent_run_id)

    def materialize_component(
        self, component: str, component_args: list[str] | dict[str, Any]
    ) -> AppDef:
        """Builds the AppDef of ``component`` (with this runner's ``[component:*]`` defaults)."""
        from torchx_core.specs.builders import materialize_appdef

        fn = builtin_component(component)
        if fn is None:
            from torchx_core.specs.finder import get_component

            fn = get_component(component).fn
        return materialize_appdef(fn, component_args, self._component_defaults.get(component))

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = ...,
        workspace: str | Workspace | None = ...,
        parent_run_id: str | None = ...,
        *,
        dryrun: Literal[True],
    ) -> AppDryRunInfo[Any]: ...

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = ...,
        workspace: str | Workspace | None = ...,
        parent_run_id: str | None = ...,
        *,
        dryrun: Literal[False] = ...,
    ) -> AppHandle: ...

    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
        *,
        dryrun: bool = False,
    ) -> AppHandle | AppDryRunInfo[Any]:
        """Runs ``app`` on ``scheduler`` and returns its handle (or, with ``dryrun=True``, what
        would be submitted, as :meth:`dryrun` does).

        Args:
            app: the app
            scheduler: scheduler name (``runner.scheduler_backends()`` lists them)
            cfg: scheduler run options (``runner.scheduler_run_opts(scheduler)``)
            workspace: overrides ``app.roles[0].workspace``
            parent_run_id: the run this app derives from (experiment tracking; default
                ``$TORCHX_PARENT_RUN_ID``), injected as ``TORCHX_PARENT_RUN_ID``
            dryrun: build and return the request (an ``AppDryRunInfo``) without submitting it
        """
        with log_event("run", scheduler) as ev:
            info = self.dryrun(app, scheduler, cfg, workspace, parent_run_id)
            if dryrun:
                return info
            handle = self.schedule(info)
            if ev.recording:
                ev.fill(runcfg=_runcfg(cfg), workspace=str(workspace))
                _fill_app(ev, app, parse_app_handle(handle)[2])
            return handle

    def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Returns what :meth:`run` would submit, without submitting it.

        ``print(info)`` shows the scheduler request; ``info.request`` can be changed before
        :meth:`schedule`. The request is built from a copy of ``app`` (``info.app``), which
        shares each role's ``overrides`` dict with ``app``: ``app`` itself is left as it was,
        so one AppDef can be dry-run many times. Every role of the copy gets ``TORCHX_JOB_ID``
        (the app handle, as in TorchX); when trackers are configured
        (:func:`get_configured_trackers`) or a parent run is given, also ``TORCHX_TRACKERS``,
        ``TORCHX_TRACKER_<NAME>_CONFIG`` and ``TORCHX_PARENT_RUN_ID``.

        Raises:
            RunnerError: ``app`` is not an AppDef or a role cannot run (no entrypoint, ...).
            InvalidWorkspaceError: a local workspace directory does not exist.
            UnknownSchedulerException: no scheduler is named ``scheduler``.
            InvalidRunConfigException: ``cfg`` misses a required option or has a wrong type.
        """
        with log_event("dryrun", scheduler) as ev:
            if ev.recording:
                ev.fill(runcfg=_runcfg(cfg), workspace=str(workspace))
            dryrun_info = self._dryrun(app, scheduler, cfg, workspace, parent_run_id)
            if ev.recording:
                _fill_app(ev, app, app.name)  # TorchX records the app's name as its id here
            return dryrun_info

    def _dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None,
        workspace: str | Workspace | None,
        parent_run_id: str | None,
    ) -> AppDryRunInfo[Any]:
        check_app(app)
        app = copy_app(app)
        if workspace:
            if isinstance(workspace, str) and workspace.startswith("file://"):
                workspace = workspace[len("file://") :]  # TorchX 0.7's `file://{cwd}` form
            app.roles[0].workspace = (
                workspace if isinstance(workspace, Workspace) else Workspace.from_str(workspace)
            )
        for role in app.roles:
            check_workspace(role.workspace)
        tracker_env = _tracker_env(scheduler, self._name, parent_run_id)
        for role in app.roles:
            for key, value in tracker_env.items():
                if key == ENV_TORCHX_JOB_ID:
                    role.env.setdefault(key, value)  # a scheduler's own value is as good
                else:
                    role.env[key] = value
        sched = self._scheduler(scheduler)
        opts = sched.run_opts()
        resolved_cfg = opts.resolve(dict(cfg or {}), strict=not opts.free_form)
        if sched.checks_in_dryrun is not True:
            # TorchX's contract for a scheduler defined elsewhere: its submit_dryrun neither
            # builds workspaces nor validates, the runner does both (in TorchX's order)
            sched._build_workspaces(app, resolved_cfg)
            sched._validate(app, scheduler, resolved_cfg)
        dryrun_info = sched.submit_dryrun(app, resolved_cfg)
        dryrun_info._scheduler = scheduler
        return dryrun_info

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submits a request built by :meth:`dryrun` (possibly edited) and returns its handle.

        Raises:
            RunnerError: ``dryrun_info`` did not come from :meth:`dryrun`.
        """
        scheduler = dryrun_info._scheduler
        if not scheduler or dryrun_info._app is None:
            raise RunnerError(
                "dryrun_info has no scheduler/app attached; create it with `runner.dryrun(...)`"
                " or `runner.dryrun_component(...)`"
            )
        with log_event("schedule", scheduler) as ev:
            if ev.recording:
                ev.fill(runcfg=_runcfg(dryrun_info._cfg))
            sched = self._scheduler(scheduler)
            app_id = sched.schedule(dryrun_info)
            app_handle = make_app_handle(scheduler, self._name, app_id)
            self._apps[app_handle] = dryrun_info._app
            logger.debug("launched %s", app_handle)
            if ev.recording:
                _fill_app(ev, dryrun_info._app, app_id)
            return app_handle

    # -- schedulers --------------------------------------------------------------------------

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options (``cfg`` keys) scheduler ``scheduler`` accepts."""
        return self._scheduler(scheduler).run_opts()

    def cfg_from_str(self, scheduler: str, *cfg_literal: str) -> dict[str, CfgVal]:
        """Parses run options written as ``key=value,key=value`` strings (``torchx run -cfg``)
        against scheduler ``scheduler``'s :meth:`scheduler_run_opts`; later strings win::

            runner.cfg_from_str("local_cwd", "log_dir=/tmp/logs", "prepend_cwd=True")
            # {'log_dir': '/tmp/logs', 'prepend_cwd': True}

        Raises:
            UnknownSchedulerException: no scheduler is named ``scheduler``.
            InvalidRunConfigException: a value does not parse as its option's type.
        """
        opts = self.scheduler_run_opts(scheduler)
        cfg: dict[str, CfgVal] = {}
        for literal in cfg_literal:
            cfg.update(opts.cfg_from_str(literal))
        return cfg

    def supports_workspaces(self, scheduler: str) -> bool:
        """Whether scheduler ``scheduler`` builds workspaces (``workspace=`` / ``--workspace``)."""
        from torchx_core.workspace.api import WorkspaceMixin

        return isinstance(self._scheduler(scheduler), WorkspaceMixin)

    def scheduler_backends(self) -> list[str]:
        """Every scheduler name this runner can use."""
        return list(self._scheduler_factories.keys())

    def lookup_scope(self, app_handle: AppHandle) -> str:
        """Where the scheduler of ``app_handle`` looks for apps (the local scheduler names its
        root), or ``""`` when it does not say; for "does not exist" messages."""
        return self._scheduler_app_id(app_handle)[0].lookup_scope()

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        sched = self._scheduler_instances.get(scheduler)
        if sched is not None:
            return sched
        with self._lock:
            sched = self._scheduler_instances.get(scheduler)
            if sched is not None:
                return sched
            if self._closed:
                logger.debug("runner %s used after close(); reopening schedulers", self._name)
                self._closed = False
            try:
                factory = self._scheduler_factories[scheduler]
            except KeyError:
                raise UnknownSchedulerException(
                    scheduler, list(self._scheduler_factories)
                ) from None
            sched = factory(self._name, **self._scheduler_params)
            self._scheduler_instances[scheduler] = sched
            return sched

    def _scheduler_app_id(self, app_handle: AppHandle) -> tuple[Scheduler[Any], str, str]:
        scheduler_backend, _, app_id = parse_app_handle(app_handle)
        return self._scheduler(scheduler_backend), scheduler_backend, app_id

    # -- management --------------------------------------------------------------------------

    def status(self, app_handle: AppHandle) -> AppStatus | None:
        """The app's status, or ``None`` if the scheduler does not know the app (anymore).

        Raises:
            MalformedAppHandleException: the handle is malformed.
            UnknownSchedulerException: the handle names an unknown scheduler.
        """
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("status", backend, app_id):
            return self._to_status(app_handle, scheduler.describe(app_id))

    def status_many(self, app_handles: Iterable[AppHandle]) -> dict[AppHandle, AppStatus | None]:
        """The status of many apps with one batched scheduler call per scheduler.

        Returns ``{handle: status}`` in the order given (``None`` for apps the scheduler does not
        know). Schedulers answer through ``Scheduler.describe_many`` (one ``squeue``, one
        ``DescribeJobs`` per 100 jobs, one list by label, ...).

        Raises:
            MalformedAppHandleException: a handle is malformed (nothing is queried then).
            UnknownSchedulerException: a handle names an unknown scheduler.
        """
        by_backend: dict[str, dict[str, AppHandle]] = {}
        handles = list(dict.fromkeys(app_handles))
        for handle in handles:
            backend, _, app_id = parse_app_handle(handle)
            by_backend.setdefault(backend, {})[app_id] = handle
        out: dict[AppHandle, AppStatus | None] = {}
        for backend, ids in by_backend.items():
            described = self._scheduler(backend).describe_many(list(ids))
            for app_id, handle in ids.items():
                out[handle] = self._to_status(handle, described.get(app_id))
        return {h: out[h] for h in handles}

    # -- shared reads (many watchers, one scheduler call) -------------------------------------

    @property
    def status_watcher(self) -> StatusWatcher:
        """Where this runner's shared reads are made (:mod:`torchx_core.runner.status_watch`)."""
        if self._watcher is None:
            from torchx_core.runner.status_watch import default_watcher

            self._watcher = default_watcher()
        return self._watcher

    def watch_key(self, scheduler: str) -> Hashable:
        """What identifies scheduler ``scheduler``'s configuration for shared reads: runners with
        the same key (same scheduler name, factory and parameters) share their reads."""
        factory = self._scheduler_factories.get(scheduler)
        return (scheduler, factory, repr(sorted(self._scheduler_params.items())))

    def watch_status(self, app_handle: AppHandle, max_age: float) -> AppStatus | None:
        """The app's status, at most ``max_age`` seconds old, as shared by every watcher.

        Concurrent watchers of apps on one scheduler (Airflow triggers in one triggerer, Prefect
        tasks in one flow run) share one :meth:`status_many` call per ``max_age`` seconds: a status
        read less than ``max_age`` seconds ago is returned as is, and a fresh read fetches every
        watched app of that scheduler at once. See :mod:`torchx_core.runner.status_watch`.

        Raises:
            MalformedAppHandleException: the handle is malformed.
            UnknownSchedulerException: the handle names an unknown scheduler.
            Exception: whatever the shared read raised (the scheduler could not be asked).
        """
        key = self.watch_key(parse_app_handle(app_handle).scheduler_backend)
        return self.status_watcher.status(key, app_handle, max_age, self.status_many)

    async def awatch_status(self, app_handle: AppHandle, max_age: float) -> AppStatus | None:
        """:meth:`watch_status` for event loops (triggers): the loop never blocks, and waiting
        for another watcher's read holds no worker thread."""
        key = self.watch_key(parse_app_handle(app_handle).scheduler_backend)
        return await self.status_watcher.astatus(key, app_handle, max_age, self.status_many)

    def watch(self, app_handle: AppHandle) -> None:
        """Keeps the app in every shared read of its scheduler until :meth:`unwatch` (apps read
        with :meth:`watch_status` are kept while they are asked for)."""
        key = self.watch_key(parse_app_handle(app_handle).scheduler_backend)
        self.status_watcher.watch(key, app_handle)

    def unwatch(self, app_handle: AppHandle) -> None:
        """Undoes one :meth:`watch` (the app leaves the shared reads with its last watcher)."""
        key = self.watch_key(parse_app_handle(app_handle).scheduler_backend)
        self.status_watcher.unwatch(key, app_handle)

    def shared_list(
        self, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> list[ListAppResponse]:
        """:meth:`list`, shared by the callers that ask while a list of the same scheduler
        configuration and ``cfg`` is read; never a list read that began before this call."""
        return self.status_watcher.list(
            self.watch_key(scheduler), cfg, lambda: self.list(scheduler, cfg)
        )

    def _to_status(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> AppStatus | None:
        if desc is None:
            self._apps.pop(app_handle, None)
            return None
        return AppStatus(
            state=desc.state,
            num_restarts=desc.num_restarts,
            msg=desc.msg,
            structured_error_msg=desc.structured_error_msg,
            ui_url=desc.ui_url,
            roles=desc.roles_statuses,
        )

    def wait(
        self,
        app_handle: AppHandle,
        wait_interval: float = 10,
        timeout: float | None = None,
    ) -> AppStatus | None:
        """Blocks until the app reaches a terminal state; returns that status.

        Uses the scheduler's own blocking wait when it has one (the local scheduler does);
        otherwise polls quickly at first and then every ``wait_interval`` seconds.

        Args:
            app_handle: the app
            wait_interval: the longest pause between two status polls (seconds)
            timeout: give up after this many seconds and return the last status (None: never)

        Returns:
            The terminal status, the last status on timeout, or ``None`` if the app is unknown.
        """
        if not isinstance(wait_interval, (int, float)) or wait_interval <= 0:
            raise RunnerError(
                f"wait_interval must be a number of seconds > 0, got {wait_interval!r}"
            )
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("wait", backend, app_id):
            return self._wait(scheduler, app_handle, app_id, wait_interval, timeout)

    def _wait(
        self,
        scheduler: Scheduler[Any],
        app_handle: AppHandle,
        app_id: str,
        wait_interval: float,
        timeout: float | None,
    ) -> AppStatus | None:
        try:  # the scheduler's own blocking wait, where it has one (e.g. the local scheduler)
            return self._to_status(app_handle, scheduler.wait(app_id, timeout=timeout))
        except NotImplementedError:
            pass
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = min(_FIRST_POLL_INTERVAL, wait_interval)
        while True:
            app_status = self.status(app_handle)
            if app_status is None or app_status.is_terminal():
                return app_status
            if deadline is not None and time.monotonic() >= deadline:
                return app_status
            sleep = pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(sleep)
            pause = min(pause * 2, wait_interval)

    def cancel(self, app_handle: AppHandle, *, even_if_ended: bool = False) -> None:
        """Asks the scheduler to cancel the app.

        Idempotent: cancelling an unknown or already finished app does nothing (except on
        schedulers whose ``cancels_finished_apps`` is set, whose cancel of a finished app still
        stops its leftovers). Returns once the request is made; the app ends as CANCELLED (or
        FAILED if it could not be stopped).

        Args:
            app_handle: the app
            even_if_ended: hand the cancel to the scheduler without reading the status first,
                whatever the app's state (the scheduler may sweep what is left of an ended app;
                a kill path does not wait for a status read)
        """
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("cancel", backend, app_id):
            if even_if_ended:
                scheduler.cancel(app_id)
                return
            try:
                app_status = self.status(app_handle)
            except TorchXError as e:  # e.g. an unreadable local status file: cancel still stops it
                logger.warning("%s; cancelling anyway", e)
                scheduler.cancel(app_id)
                return
            if app_status is None:
                return
            if not app_status.is_terminal() or getattr(scheduler, "cancels_finished_apps", False):
                scheduler.cancel(app_id)

    def name_lock(self, scheduler: str, name: str) -> contextlib.AbstractContextManager[bool]:
        """Scheduler ``scheduler``'s lock on the app name ``name`` (``Scheduler.name_lock``):
        yields True where the backend serializes look-up and submit across processes."""
        return self._scheduler(scheduler).name_lock(name)

    def list_named(
        self, scheduler: str, name: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> list[ListAppResponse] | None:
        """The apps of scheduler ``scheduler`` submitted under ``name``, with their handles, when
        it finds them without listing every app (``Scheduler.list_named``); else None."""
        with log_event("list_named", scheduler):
            apps = self._scheduler(scheduler).list_named(name, cfg)
            for app in apps or []:
                app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
            return apps

    def submit_order(self, scheduler: str, app_ids: Sequence[str]) -> list[str] | None:
        """``app_ids`` earliest submitted first, or None when scheduler ``scheduler`` cannot tell
        (``Scheduler.submit_order``; ``[]`` asks whether it can)."""
        return self._scheduler(scheduler).submit_order(app_ids)

    def set_owner(self, app_handle: AppHandle, owner: str) -> bool:
        """Records ``owner`` with the app, where the scheduler keeps it for every process.

        The owner is an opaque token naming the attempt (task try, flow run...) that submitted
        or adopted the app; see :mod:`torchx_core.runner.lifecycle` for how kill paths use it.

        Returns:
            True if recorded; False if the scheduler cannot record owners or the app is unknown.

        Raises:
            RunnerError: ``owner`` is not a non-empty single-line string of at most 200 characters.
        """
        if (
            not isinstance(owner, str)
            or not owner.strip()
            or len(owner) > _MAX_OWNER_LEN
            or not owner.isprintable()
        ):
            raise RunnerError(
                f"owner must be a non-empty printable single-line string of at most"
                f" {_MAX_OWNER_LEN} characters, got {owner!r:.80};"
                " e.g. 'airflow:dag/task/run#try=2'"
            )
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        return scheduler.set_owner(app_id, owner)

    def owner(self, app_handle: AppHandle) -> str | None:
        """The owner recorded with the app (:meth:`set_owner`), or None (none or unsupported)."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        return scheduler.get_owner(app_id)

    def run_options(self, app_handle: AppHandle) -> dict[str, CfgVal] | None:
        """The run options the app was submitted with (defaults filled), where its scheduler
        keeps them (local does); None when it does not or the app is unknown."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        return scheduler.run_options(app_id)

    def resource_usage(self, app_handle: AppHandle) -> dict[tuple[str, int], ReplicaUsage] | None:
        """``{(role, replica index): ReplicaUsage}`` of the app's running replicas now, where its
        scheduler can measure it (local does, from ``/proc``); None when it cannot."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        return scheduler.resource_usage(app_id)

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel`."""
        import warnings

        warnings.warn(
            "Runner.stop is deprecated, use cancel", PendingDeprecationWarning, stacklevel=2
        )
        self.cancel(app_handle)

    def delete(self, app_handle: AppHandle) -> None:
        """Cancels the app if it runs and removes what the scheduler keeps of it.

        Deleting an unknown app does nothing.
        """
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("delete", backend, app_id):
            scheduler.delete(app_id)
            self._apps.pop(app_handle, None)

    def describe(self, app_handle: AppHandle) -> AppDef | None:
        """The app as submitted (as far as the scheduler can reconstruct it), or ``None``."""
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("describe", backend, app_id):
            app = self._apps.get(app_handle)
            if app is not None:
                return app
            desc = scheduler.describe(app_id)
            if desc is None:
                return None
            return AppDef(name=app_id, roles=desc.roles)

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Returns the log lines of replica ``k`` of role ``role_name`` (with their ``\\n``).

        Args:
            app_handle: the app
            role_name: the role
            k: the replica index (not the rank)
            regex: only lines matching this regular expression
            since: only lines at or after this time (where the scheduler can date lines)
            until: only lines at or before this time
            should_tail: follow the log until the app ends
            streams: stdout, stderr or combined (scheduler default if None)

        Raises:
            UnknownAppException: the scheduler does not know the app.
        """
        scheduler, backend, app_id = self._scheduler_app_id(app_handle)
        with log_event("log_lines", backend, app_id):
            stream = as_stream(streams)
            if self.status(app_handle) is None:
                raise UnknownAppException(app_handle)
            return scheduler.log_iter(
                app_id, role_name, k, regex, since, until, should_tail, streams=stream
            )

    def log_files(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        streams: Stream | None = None,
    ) -> list[str] | None:
        """The files of replica ``k``'s log (``Scheduler.log_files``): a byte-exact copy of
        what :meth:`log_lines` reads; None where the scheduler keeps no local log files.

        Raises:
            UnknownAppException: the scheduler does not know the app.
        """
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        return scheduler.log_files(app_id, role_name, k, as_stream(streams))

    def list(
        self, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> list[ListAppResponse]:
        """The apps scheduler ``scheduler`` knows, with their states and handles."""
        with log_event("list", scheduler):
            sched = self._scheduler(scheduler)
            apps = sched.list(cfg) if cfg is not None else sched.list()
            for app in apps:
                app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
            return apps

    def __repr__(self) -> str:
        return (
            f"Runner(name={self._name}, schedulers={self._scheduler_factories}, apps={self._apps})"
        )


def get_configured_tracker_factories() -> dict[str, str]:
    """Tracker name -> factory (entry point name or ``module:function``) from ``[torchx:tracker]``.

    Only entries whose factory differs from the name are returned (``fsspec = fsspec`` names the
    ``fsspec`` entry point by itself).
    """
    from torchx_core.runner.config import load_sections

    factories = load_sections("torchx").get("tracker", {})
    return {n: f.strip() for n, f in factories.items() if f.strip() and f.strip() != n}


def get_configured_trackers() -> dict[str, str | None]:
    """The trackers configured on the launcher side: tracker name -> its config (or None).

    Names are the keys of the ``[torchx:tracker]`` section of ``.torchxconfig`` (or the
    comma-separated ``$TORCHX_TRACKERS``, which replaces them); each config is ``config`` of the
    ``[tracker:<name>]`` section (or ``$TORCHX_TRACKER_<NAME>_CONFIG``, which replaces it).

    Raises:
        TrackerError: a tracker name cannot be an environment variable name part.
    """
    from torchx_core.runner.config import load_sections

    if ENV_TORCHX_TRACKERS in os.environ:
        names = [n.strip() for n in os.environ[ENV_TORCHX_TRACKERS].split(",") if n.strip()]
    else:
        names = list(load_sections("torchx").get("tracker", {}))
    if not names:
        return {}  # the common case: one config read, nothing else imported
    _check_tracker_names(names)
    from torchx_core.tracker.api import tracker_config_env_var_name

    sections = load_sections("tracker")
    configured: dict[str, str | None] = {}
    for name in names:
        configured[name] = os.environ.get(
            tracker_config_env_var_name(name), sections.get(name, {}).get("config")
        )
    return configured


def _check_tracker_names(names: list[str]) -> None:
    import re

    from torchx_core.tracker.api import TrackerError

    bad = [n for n in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    if bad:
        raise TrackerError(
            f"tracker names {bad} are not valid: a tracker name becomes part of environment"
            " variable names (TORCHX_TRACKER_<NAME>_CONFIG), so use letters, digits and `_`"
            " (e.g. `my_tracker = my_pkg.tracking:create` in [torchx:tracker])"
        )


def _tracker_env(scheduler: str, session: str, parent_run_id: str | None) -> dict[str, str]:
    """The tracking variables injected into every role (``TORCHX_JOB_ID`` always)."""
    from torchx_core.specs import macros

    # TORCHX_JOB_ID (the app handle) is set on every app, trackers or not, as TorchX does
    env = {ENV_TORCHX_JOB_ID: make_app_handle(scheduler, session, macros.app_id)}
    trackers = get_configured_trackers()
    parent = parent_run_id or os.environ.get(ENV_TORCHX_PARENT_RUN_ID)
    if not trackers and not parent:
        return env
    from torchx_core.tracker.api import tracker_config_env_var_name, tracker_factory_env_var_name

    if parent:
        env[ENV_TORCHX_PARENT_RUN_ID] = parent
    if trackers:
        env[ENV_TORCHX_TRACKERS] = ",".join(trackers)
        factories = get_configured_tracker_factories()
        for name, config in trackers.items():
            if config:
                env[tracker_config_env_var_name(name)] = config
            if name in factories:
                env[tracker_factory_env_var_name(name)] = factories[name]
    return env


def _runcfg(cfg: Mapping[str, CfgVal] | None) -> str | None:
    """``cfg`` as the JSON an event records (None when empty, as TorchX)."""
    if not cfg:
        return None
    import json

    return json.dumps(dict(cfg), default=str)


def _fill_app(ev: log_event, app: AppDef | None, app_id: str) -> None:
    """Records what TorchX records of a submitted app: its id, first role's image, metadata."""
    ev.fill(
        app_id=app_id,
        app_image=app.roles[0].image if app is not None and app.roles else None,
        app_metadata=dict(app.metadata) if app is not None else None,
    )


def get_runner(
    name: str | None = None,
    component_defaults: dict[str, dict[str, str]] | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Creates a Runner over every registered scheduler; use it as a context manager::

        with get_runner() as runner:
            handle = runner.run(app, scheduler="local_cwd")
            print(runner.status(handle))

    Args:
        name: the session name (default ``"torchx"``)
        component_defaults: component argument defaults; read from the ``[component:*]``
            sections of ``.torchxconfig`` when not given
        scheduler_params: keyword arguments for every scheduler factory
    """
    if component_defaults is None:
        from torchx_core.runner.config import load_sections

        component_defaults = load_sections("component")
    return Runner(
        name or DEFAULT_SESSION_NAME,
        get_scheduler_factories(),
        component_defaults,
        scheduler_params=scheduler_params,
    )


def get_scheduler_factories() -> Mapping[str, SchedulerFactory]:
    """Every registered scheduler name -> factory, as :func:`get_runner` and ``Runner()`` use.

    TorchX's ``torchx.runner.api.get_scheduler_factories``: tests patch it here to give every new
    Runner other schedulers. The mapping is lazy (a plugin scan happens only when a name that is
    not built in is asked for); ``torchx_core.schedulers.get_scheduler_factories`` returns the
    same as a plain dict.
    """
    from torchx_core.schedulers.registry import default_registry

    return default_registry().view()
