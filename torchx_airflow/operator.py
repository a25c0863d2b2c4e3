"""``TorchXOperator``: run a TorchX app (an AppDef or a component) as an Airflow task.

Life of one task try:

1. Resume or submit (:py:class:`ResumableJobMixin`): a handle stored by an earlier try of this
   task is reused while its app runs or after it succeeded; otherwise the app is submitted under
   a name derived from the task identity and its handle stored in the task's state store
   **before** waiting. On retries (the worker may have died between submitting and storing) and
   without a state store (Airflow < 3.3), a running or succeeded app is found again by that name.
2. ``app_handle`` and ``ui_url`` are pushed to XCom.
3. Wait: on the worker (streaming replica logs into the task log), or deferred to
   :py:class:`torchx_airflow.TorchXTrigger` (no worker slot held; a bounded log tail is printed
   at the end).
4. The final state is mapped by :py:mod:`torchx_airflow.states`; the task returns the status as
   a JSON-able dict.

Killing the task (SIGTERM, ``execution_timeout``) cancels the app (``cancel_on_kill``); a
deferred task is cancelled by the trigger's ``on_kill``.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from torchx_airflow._airflow import (
    AirflowException,
    AirflowTaskTimeout,
    BaseOperator,
    ResumableJobMixin,
    default_deferrable,
)
from torchx_airflow._runtime import (
    STREAM_DRAIN_TIMEOUT_S,
    LogStreamer,
    RunnerFactory,
    cancel_bounded,
    cancel_by_name_bounded,
    default_runner_factory,
    deterministic_app_name,
    find_app_by_name,
    status_from_payload,
    status_payload,
    tail_logs,
)
from torchx_airflow.errors import InvalidTaskArgumentError, check_number
from torchx_airflow.links import UI_URL_ATTR, TorchXAppLink
from torchx_airflow.states import (
    VANISHED_STATUS,
    Outcome,
    UnknownStateClock,
    exception_for,
    outcome_for,
)
from torchx_core.specs import AppDef, AppState, AppStatus

if TYPE_CHECKING:
    from torchx_core.runner import Runner

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["TorchXOperator"]

#: How long ``on_kill`` waits for the cancel call.
CANCEL_TIMEOUT_S = 30.0
#: Extra time Airflow's own deferral timeout allows after the trigger's deadline (backstop).
_DEFER_BACKSTOP = timedelta(seconds=60)


def _log_group(log: Any, title: str, lines: Sequence[str]) -> None:
    """Writes lines as a folded ``::group::`` section of the task log."""
    log.info("::group::%s", title)
    for line in lines:
        log.info("%s", line)
    log.info("::endgroup::")


class TorchXOperator(ResumableJobMixin, BaseOperator):
    """Runs a TorchX app on any TorchX scheduler and waits for it.

    Args:
        app: the AppDef to run (its fields are Jinja-templated); give ``app`` or ``component``
        component: a component name (``"utils.echo"``, ``"dist.ddp"``, ``"path/file.py:fn"``)
        component_args: the component's arguments, as CLI-style strings
            (``["--msg", "{{ ds }}"]``) or a ``{param: value}`` dict (templated)
        scheduler: the TorchX scheduler (``"local_cwd"``, ``"kubernetes"``, ``"slurm"``...)
        cfg: the scheduler run options (templated)
        workspace: the workspace to build into the app's image, if any (templated)
        wait: wait for the app to end; ``False`` returns right after submission
        deferrable: wait in the triggerer, freeing the worker slot (default: Airflow's
            ``[operators] default_deferrable``)
        poll_interval: seconds between status checks
        cancel_on_kill: cancel the app when the task is killed (SIGTERM, ``execution_timeout``,
            or a user acting on the deferred task)
        log_tail_lines: replica log lines printed per replica at the end when the logs were not
            streamed (deferrable mode, ``stream_logs=False``), and on failure; ``0`` prints none
        stream_logs: stream replica logs into the task log while waiting on a worker
        fail_fast: a FAILED app fails the task without Airflow retries
        skip_on_cancel: a CANCELLED app skips the task instead of failing it
        unknown_state_timeout: seconds an app may stay UNKNOWN, unreachable or vanished before
            the task fails
        runner_factory: builds the Runner (default ``torchx_core.runner.get_runner()``); not
            serialized, so deferred waiting always uses the default
        kwargs: :py:class:`BaseOperator` arguments (``task_id``, ``retries``...) and ``durable``

    Returns (from ``execute``): the final status as a dict (``app_handle``, ``state``,
    ``num_restarts``, ``msg``, ``structured_error_msg``, ``ui_url``, ``roles``).

    XCom keys: ``app_handle`` and ``ui_url`` (pushed before waiting), ``return_value``.
    """

    template_fields: Sequence[str] = (
        "app",
        "component",
        "component_args",
        "scheduler",
        "cfg",
        "workspace",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"component_args": "json", "cfg": "json"}
    operator_extra_links = (TorchXAppLink(),)
    ui_color = "#fde9e2"
    # Renaming this breaks reattaching of in-flight retries (the stored key is read back).
    external_id_key = "torchx_app_handle"

    def __init__(
        self,
        *,
        app: AppDef | None = None,
        component: str | None = None,
        component_args: Sequence[str] | Mapping[str, Any] | None = None,
        scheduler: str = "local_cwd",
        cfg: Mapping[str, Any] | None = None,
        workspace: Any = None,
        wait: bool = True,
        deferrable: bool | None = None,
        poll_interval: float = 5.0,
        cancel_on_kill: bool = True,
        log_tail_lines: int = 50,
        stream_logs: bool = True,
        fail_fast: bool = False,
        skip_on_cancel: bool = False,
        unknown_state_timeout: float = 300.0,
        runner_factory: RunnerFactory | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        resolved_deferrable = default_deferrable() if deferrable is None else deferrable
        _validate(
            app=app,
            component=component,
            component_args=component_args,
            scheduler=scheduler,
            cfg=cfg,
            workspace=workspace,
            flags={
                "wait": wait,
                "deferrable": resolved_deferrable,
                "cancel_on_kill": cancel_on_kill,
                "stream_logs": stream_logs,
                "fail_fast": fail_fast,
                "skip_on_cancel": skip_on_cancel,
            },
            explicit_deferrable=deferrable,
            poll_interval=poll_interval,
            log_tail_lines=log_tail_lines,
            unknown_state_timeout=unknown_state_timeout,
            runner_factory=runner_factory,
        )
        # our own copy: Airflow renders template fields in place, and one AppDef may be shared
        self.app = copy.deepcopy(app)
        self.component = component
        self.component_args = (
            list(component_args)
            if isinstance(component_args, (list, tuple))
            else dict(component_args)
            if isinstance(component_args, Mapping)
            else None
        )
        self.scheduler = scheduler
        self.cfg = dict(cfg) if cfg is not None else None
        self.workspace = workspace
        self.wait = wait
        self.deferrable = resolved_deferrable and wait
        self.poll_interval = float(poll_interval)
        self.cancel_on_kill = cancel_on_kill
        self.log_tail_lines = int(log_tail_lines)
        self.stream_logs = stream_logs
        self.fail_fast = fail_fast
        self.skip_on_cancel = skip_on_cancel
        self.unknown_state_timeout = float(unknown_state_timeout)
        self.runner_factory = runner_factory
        self._runner: Runner | None = None
        self._handle: str | None = None
        self._submitting: str | None = None  # the app name while runner.run() is in flight
        self._killed = False
        self._result: dict[str, Any] | None = None
        setattr(self, UI_URL_ATTR, None)

    # -- entry points -------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        """Submits (or reattaches to) the app and waits for it; see the class docstring."""
        try:
            return self.execute_resumable(context)
        finally:
            self._close_runner()

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Resumes after :py:class:`TorchXTrigger` fired: maps its event to the task outcome."""
        handle = str(event.get("app_handle", ""))
        self._handle = handle
        kind = event.get("event")
        status = status_from_payload(event["status"]) if event.get("status") else None
        self._remember_ui_url(status)
        try:
            if kind == "timeout":
                self._log_error(handle, status)
                raise AirflowTaskTimeout(str(event.get("message", "")))
            if kind in ("unknown_timeout", "error"):
                self._log_error(handle, status)
                raise AirflowException(str(event.get("message", "")))
            outcome = outcome_for(status.state if status is not None else None)
            return self._finish(handle, status, outcome, tail=True)
        finally:
            self._close_runner()

    def on_kill(self) -> None:
        """Cancels the app (``cancel_on_kill``): on SIGTERM and on ``execution_timeout``.

        A kill that arrives while the app is being submitted cancels what was submitted under the
        app's deterministic name (``execution_timeout`` aborts the submission), or the app as soon
        as the submission returns (SIGTERM lets it finish).
        """
        self._killed = True
        if not self.cancel_on_kill:
            return
        handle = self._handle
        if handle is not None:
            self.log.info("Task killed: cancelling TorchX app %s", handle)
            cancel_bounded(self.runner_factory, handle, CANCEL_TIMEOUT_S)
        elif self._submitting is not None:
            self.log.info(
                "Task killed while submitting: cancelling apps named %s", self._submitting
            )
            cancel_by_name_bounded(
                self.runner_factory, self.scheduler, self._submitting, CANCEL_TIMEOUT_S
            )

    # -- ResumableJobMixin hooks ----------------------------------------------------------------

    def submit_job(self, context: Any) -> str:
        """Submits the app under its deterministic name; returns the app handle."""
        runner = self._get_runner()
        if self.cfg:
            # unknown keys are an error here (the Runner only warns): says which keys are valid
            runner.scheduler_run_opts(self.scheduler).resolve(self.cfg, strict=True)
        app = self._build_app(runner, context)
        handle = self._find_earlier_try(runner, app.name, context)
        if handle is not None:
            self.log.info("Reattaching to TorchX app %s (found by name %s)", handle, app.name)
        else:
            # kept if run() raises: execution_timeout interrupts it, then on_kill finds the name
            self._submitting = app.name
            handle = runner.run(app, self.scheduler, cfg=self.cfg, workspace=self.workspace)
            self._submitting = None
            self.log.info("Submitted TorchX app %s as %s", app.name, handle)
        self._handle = handle
        if self._killed and self.cancel_on_kill:
            # SIGTERM came before the handle was known (on_kill could not cancel it)
            cancel_bounded(self.runner_factory, handle, CANCEL_TIMEOUT_S)
            raise AirflowException(f"the task was killed while submitting {handle}; cancelled it")
        return handle

    def get_job_status(self, external_id: Any, context: Any) -> str:
        """The app's state name (``"VANISHED"`` when the scheduler does not know it)."""
        try:
            status = self._get_runner().status(str(external_id))
        except Exception as e:  # noqa: BLE001 - unreachable: reattach and wait out the grace
            self.log.warning("Reading the status of %s failed: %s", external_id, e)
            return AppState.UNKNOWN.name
        return status.state.name if status is not None else VANISHED_STATUS

    def is_job_active(self, status: str) -> bool:
        """True while the app may still finish (non-terminal or UNKNOWN; not vanished)."""
        return outcome_for(status).reattachable

    def is_job_succeeded(self, status: str) -> bool:
        """True for SUCCEEDED."""
        return outcome_for(status) is Outcome.SUCCESS

    # The mixin declares ``-> None`` but returns this value on its reconnect path.
    def poll_until_complete(self, external_id: Any, context: Any) -> dict[str, Any]:  # type: ignore[override]
        """Pushes the handle to XCom and waits (blocking or deferred); returns the status dict."""
        handle = str(external_id)
        self._handle = handle
        status, outcome = self._announce(handle, context)
        if not self.wait:
            self._result = status_payload(handle, status)
            return self._result
        if self.deferrable and outcome.keeps_waiting:
            self._defer_to_trigger(handle, context)
        return self._wait_on_worker(handle, status, outcome)

    def get_job_result(self, external_id: Any, context: Any) -> dict[str, Any]:
        """The final status dict (checked again when a retry finds a finished app)."""
        if self._result is not None:
            return self._result
        handle = str(external_id)
        self._handle = handle
        status, outcome = self._announce(handle, context)
        if outcome.keeps_waiting:  # the status could not be read: wait out the grace
            return self._wait_on_worker(handle, status, outcome)
        return self._finish(handle, status, outcome, tail=False)

    # -- internals ------------------------------------------------------------------------------

    def _get_runner(self) -> Runner:
        if self._runner is None:
            self._runner = (self.runner_factory or default_runner_factory)()
        return self._runner

    def _close_runner(self) -> None:
        runner, self._runner = self._runner, None
        close = getattr(runner, "close", None)
        if callable(close):
            close()

    def _build_app(self, runner: Runner, context: Any) -> AppDef:
        """The rendered AppDef (or the materialized component) under its deterministic name."""
        if self.app is not None:
            app = copy.deepcopy(self.app)
        else:
            args = self.component_args if self.component_args is not None else []
            app = runner.materialize_component(str(self.component), args)
        ti = context["ti"]
        app.name = deterministic_app_name(
            app.name or ti.task_id,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=ti.map_index if ti.map_index is not None else -1,
        )
        return app

    def _find_earlier_try(self, runner: Runner, name: str, context: Any) -> str | None:
        """The app of an earlier try that the state store does not know, found by its name.

        Looked up on retries (the worker may have died between submitting and storing the
        handle) and on every try without a state store (Airflow < 3.3). Failed and cancelled
        apps are not reused.
        """
        ti = context["ti"]
        retry = int(getattr(ti, "try_number", 1) or 1) > 1
        if context.get("task_state_store") is not None and not retry:
            return None
        try:
            found = find_app_by_name(runner, self.scheduler, name)
        except Exception as e:  # noqa: BLE001 - a scheduler without list(): submit
            self.log.warning("Cannot look up earlier apps named %s: %s", name, e)
            return None
        return found[0] if found is not None else None

    def _announce(self, handle: str, context: Any) -> tuple[AppStatus | None, Outcome]:
        """Reads the status and pushes ``app_handle`` / ``ui_url`` to XCom (before waiting)."""
        status, outcome = self._poll(handle, None)
        ti = context["ti"]
        ti.xcom_push(key="app_handle", value=handle)
        self._remember_ui_url(status)
        url = getattr(self, UI_URL_ATTR)
        if url:
            ti.xcom_push(key="ui_url", value=url)
            ti.xcom_push(key=TorchXAppLink().xcom_key, value=url)
            self.log.info("TorchX app %s UI: %s", handle, url)
        self.log.info("TorchX app %s is %s", handle, status.state.name if status else outcome.name)
        return status, outcome

    def _remember_ui_url(self, status: AppStatus | None) -> None:
        if status is not None and status.ui_url:
            setattr(self, UI_URL_ATTR, status.ui_url)

    def _defer_to_trigger(self, handle: str, context: Any) -> NoReturn:
        from torchx_airflow.trigger import TorchXTrigger

        timeout_at: float | None = None
        defer_timeout: timedelta | None = None
        if self.execution_timeout is not None:
            start = getattr(context["ti"], "start_date", None)
            started = start.timestamp() if start is not None else time.time()
            timeout_at = started + self.execution_timeout.total_seconds()
            defer_timeout = timedelta(seconds=max(timeout_at - time.time(), 0)) + _DEFER_BACKSTOP
        trigger = TorchXTrigger(
            app_handle=handle,
            poll_interval=self.poll_interval,
            unknown_state_timeout=self.unknown_state_timeout,
            cancel_on_kill=self.cancel_on_kill,
            timeout_at=timeout_at,
        )
        self.log.info("Deferring: the triggerer waits for TorchX app %s", handle)
        self._close_runner()
        self.defer(trigger=trigger, method_name="execute_complete", timeout=defer_timeout)

    def _poll(self, handle: str, last: AppStatus | None) -> tuple[AppStatus | None, Outcome]:
        """One status read; a failing read counts as UNKNOWN (bounded by the grace period)."""
        try:
            status = self._get_runner().status(handle)
        except Exception as e:  # noqa: BLE001 - transient scheduler errors are retried
            self.log.warning("Reading the status of %s failed: %s", handle, e)
            return last, Outcome.UNKNOWN
        return status, outcome_for(status.state if status is not None else None)

    def _wait_on_worker(
        self, handle: str, status: AppStatus | None, outcome: Outcome
    ) -> dict[str, Any]:
        streamer: LogStreamer | None = None
        if self.stream_logs:
            streamer = LogStreamer(self.runner_factory, handle, lambda s: self.log.info("%s", s))
            streamer.start(status)
        clock = UnknownStateClock(self.unknown_state_timeout)
        ended = False
        try:
            while outcome.keeps_waiting and not clock.observe(outcome):
                time.sleep(self.poll_interval)
                status, outcome = self._poll(handle, status)
            ended = not outcome.keeps_waiting
        finally:
            if streamer is not None:
                # the streams end with the app: drain them only if it ended (a timeout or kill
                # must reach on_kill at once, not after the drain timeout)
                streamer.stop(timeout=STREAM_DRAIN_TIMEOUT_S if ended else 0)
        # a failure always gets a (folded) tail of its failed replicas first, even if streamed
        return self._finish(
            handle, status, outcome, tail=not self.stream_logs or outcome is not Outcome.SUCCESS
        )

    def _finish(
        self, handle: str, status: AppStatus | None, outcome: Outcome, *, tail: bool
    ) -> dict[str, Any]:
        """Returns the status dict on success; logs and raises the mapped exception otherwise."""
        payload = status_payload(handle, status)
        self._result = payload
        if tail and self.log_tail_lines > 0:
            self._log_tail(handle, status)
        if outcome is Outcome.SUCCESS:
            self.log.info("TorchX app %s SUCCEEDED", handle)
            return payload
        self._result = None
        self._log_error(handle, status)
        state = payload["state"] if outcome is not Outcome.UNKNOWN else "UNKNOWN"
        message = f"TorchX app {handle} ended {state}"
        if outcome is Outcome.UNKNOWN:
            message = (
                f"TorchX app {handle} stayed UNKNOWN (or unreachable) for more than"
                f" unknown_state_timeout={self.unknown_state_timeout:g} s"
            )
        elif outcome is Outcome.VANISHED:
            message = (
                f"TorchX app {handle} is gone: its scheduler has not known it for more than"
                f" unknown_state_timeout={self.unknown_state_timeout:g} s"
            )
        if status is not None and status.msg:
            message += f": {status.msg}"
        exc = exception_for(
            outcome, message, fail_fast=self.fail_fast, skip_on_cancel=self.skip_on_cancel
        )
        raise exc if exc is not None else AirflowException(message)

    def _log_tail(self, handle: str, status: AppStatus | None) -> None:
        for role, replica, lines in tail_logs(
            self._get_runner(), handle, status, self.log_tail_lines
        ):
            _log_group(self.log, f"TorchX logs {role}/{replica} (last {len(lines)} lines)", lines)

    def _log_error(self, handle: str, status: AppStatus | None) -> None:
        if status is None:
            return
        errors = [status.structured_error_msg] if status.structured_error_msg != "<NONE>" else []
        for role in status.roles:
            for rep in role.replicas:
                if rep.structured_error_msg != "<NONE>":
                    errors.append(f"{role.role}/{rep.id}: {rep.structured_error_msg}")
        _log_group(self.log, f"TorchX app {handle}: {status.state.name}", [status.format()])
        if errors:
            _log_group(self.log, "TorchX structured error", errors)


def _validate(
    *,
    app: object,
    component: object,
    component_args: object,
    scheduler: object,
    cfg: object,
    workspace: object,
    flags: Mapping[str, object],
    explicit_deferrable: object,
    poll_interval: object,
    log_tail_lines: object,
    unknown_state_timeout: object,
    runner_factory: object,
) -> None:
    """Collects every problem with the operator arguments, then raises once."""
    problems: list[str] = []
    if (app is None) == (component is None):
        problems.append(
            "give exactly one of app= (an AppDef) or component= (a component name such as"
            f" 'utils.echo'); got app={app!r}, component={component!r}"
        )
    if app is not None and not isinstance(app, AppDef):
        problems.append(f"app must be a torchx_core.specs.AppDef, got {type(app).__name__}")
    if component is not None and (not isinstance(component, str) or not component.strip()):
        problems.append(f"component must be a non-empty str, got {component!r}")
    if component_args is not None:
        if app is not None:
            problems.append("component_args only applies to component=, not to app=")
        if not isinstance(component_args, (list, tuple, Mapping)):
            problems.append(
                "component_args must be a list of CLI-style strings or a {param: value} dict,"
                f" got {type(component_args).__name__}"
            )
    if not isinstance(scheduler, str) or not scheduler.strip():
        problems.append(
            f"scheduler must be a scheduler name such as 'local_cwd', got {scheduler!r}"
        )
    if cfg is not None and not isinstance(cfg, Mapping):
        problems.append(f"cfg must be a dict of scheduler run options, got {type(cfg).__name__}")
    if isinstance(workspace, (int, float, bool)):
        problems.append(f"workspace must be a path/URL string or a Workspace, got {workspace!r}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            problems.append(f"{name} must be True or False, got {value!r}")
    if explicit_deferrable is True and flags.get("wait") is False:
        problems.append(
            "deferrable=True needs wait=True (there is nothing to defer without waiting)"
        )
    check_number(problems, "poll_interval", poll_interval, minimum=0, strict=True)
    check_number(problems, "unknown_state_timeout", unknown_state_timeout, minimum=0)
    if (
        not isinstance(log_tail_lines, int)
        or isinstance(log_tail_lines, bool)
        or log_tail_lines < 0
    ):
        problems.append(f"log_tail_lines must be an int >= 0, got {log_tail_lines!r}")
    if runner_factory is not None and not callable(runner_factory):
        problems.append(
            f"runner_factory must be callable (returning a Runner), got {runner_factory!r}"
        )
    if problems:
        raise InvalidTaskArgumentError("TorchXOperator", problems)
