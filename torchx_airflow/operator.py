"""``TorchXOperator``: run a TorchX app (an AppDef or a component) as an Airflow task.

Life of one task try (the decisions are the shared lifecycle's,
:py:mod:`torchx_core.runner.lifecycle`; this module is Airflow glue):

1. Resume or submit (:py:class:`ResumableJobMixin` keeps the handle in the task's state store):
   ``AppLifecycle.attach`` names the app from the task identity (dag, task, run, map index),
   reattaches to a running app of an earlier try (the stored handle first, then by name), reuses
   a succeeded one, or submits anew; either way this try is recorded as the app's *owner*.
2. ``app_handle`` and ``ui_url`` are pushed to XCom.
3. Wait: on the worker, or (deferrable) on the worker for ``defer_after`` seconds and then in
   :py:class:`torchx_airflow.TorchXTrigger` (no worker slot held). With ``stream_logs`` every
   line of every replica (up to 16) reaches this try's log exactly once: streamed while the task
   waits on the worker, and the rest when a deferred task resumes (the lines already given are
   carried through the deferral). A reattached or reused app's lines are given from the start
   (each try has its own log).
4. The final phase is mapped by :py:mod:`torchx_airflow.states`; the task returns the status as
   a JSON-able dict.

Errors of configuration (an unknown scheduler, a wrong run option, a missing connection or
component: :py:func:`torchx_core.specs.errors.is_permanent_error`) fail the task at once with
``AirflowFailException``, naming the connection and task arguments they came from; other errors
(a scheduler briefly unreachable) are retried as Airflow's ``retries`` allow.

Killing the task (SIGTERM, ``execution_timeout``) cancels the app (``cancel_on_kill``) if this
try still owns it; a deferred task is cancelled by the trigger's ``on_kill`` under the same rule,
so a stale try never cancels the app a newer try adopted.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from torchx_airflow._airflow import (
    AirflowException,
    AirflowFailException,
    AirflowTaskTimeout,
    BaseOperator,
    ResumableJobMixin,
    default_deferrable,
)
from torchx_airflow._connection import DEFAULT_CONN_ID
from torchx_airflow._runtime import (
    RunnerFactory,
    check_run_options,
    conn_id_to_look_up,
    open_runner,
    owner_token,
    replica_of,
    status_payload,
    task_identity,
)
from torchx_airflow.errors import InvalidTaskArgumentError, sentence
from torchx_airflow.hook import ConnectionSettings, TorchXHook, runner_for
from torchx_airflow.links import DASHBOARD_URL_ATTR, UI_URL_ATTR, TorchXAppLink, app_link
from torchx_airflow.states import ACTIVE_PHASES, VANISHED_STATUS, exception_for, phase_for
from torchx_airflow.trigger import TriggerEnd, read_event
from torchx_core.runner.launch_options import LaunchOptions
from torchx_core.runner.lifecycle import (
    AppFailedError,
    AppLifecycle,
    Attachment,
    LogFollower,
    Observation,
    Phase,
    app_name,
)
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import AppDef, AppStatus
from torchx_core.specs.errors import is_permanent_error

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pydantic import JsonValue

    from torchx_core.runner import Runner

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["TorchXOperator"]

#: How long ``on_kill`` waits for the cancel call.
CANCEL_TIMEOUT_S = 30.0
#: How long the log streams may take to drain after the app ended.
STREAM_DRAIN_TIMEOUT_S = 15.0
#: How long a deferrable task watches its app on the worker before deferring (``defer_after``).
DEFER_AFTER_S = 15.0
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
        scheduler: the TorchX scheduler (``"local_cwd"``, ``"kubernetes"``, ``"slurm"``...);
            default: the connection's, else ``"local_cwd"``
        cfg: the scheduler run options (templated); they override the connection's, key by key
        torchx_conn_id: the ``torchx`` connection holding the scheduler, its run options, the
            session name and the scheduler client's environment (:py:class:`TorchXHook`); the
            default ``torchx_default`` may be absent
        workspace: the workspace to build into the app's image, if any (templated)
        wait: wait for the app to end; ``False`` returns right after submission
        deferrable: wait in the triggerer, freeing the worker slot (default: Airflow's
            ``[operators] default_deferrable``)
        defer_after: seconds a deferrable task first watches the app on the worker; an app that
            ends sooner never defers (Airflow 3.3 may fail a task whose trigger fires within
            seconds of deferring although its app succeeded: apache/airflow#67287, #72716);
            ``0`` defers at once
        poll_interval: seconds between status checks
        cancel_on_kill: cancel the app when the task is killed (SIGTERM, ``execution_timeout``,
            or a user acting on the deferred task)
        log_tail_lines: replica log lines printed per replica at the end when the logs were not
            streamed (``stream_logs=False``), and in a failure's message; ``0`` prints none
        stream_logs: every line of every replica (up to 16) into the task log, once: streamed
            while the task waits on the worker and, once deferred, by the trigger (the lines
            stamped when read); what is left when a deferred task resumes
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
    #: The trigger class a deferred task waits in (a :py:class:`TorchXTrigger` subclass, in an
    #: importable module); None: :py:class:`TorchXTrigger`.
    trigger_class: ClassVar[type | None] = None

    def __init__(
        self,
        *,
        app: AppDef | None = None,
        component: str | None = None,
        component_args: Sequence[str] | Mapping[str, Any] | None = None,
        scheduler: str | None = None,
        cfg: Mapping[str, Any] | None = None,
        workspace: Any = None,
        wait: bool = True,
        deferrable: bool | None = None,
        defer_after: float = DEFER_AFTER_S,
        poll_interval: float = 5.0,
        cancel_on_kill: bool = True,
        log_tail_lines: int = 50,
        stream_logs: bool = True,
        fail_fast: bool = False,
        skip_on_cancel: bool = False,
        unknown_state_timeout: float = 300.0,
        runner_factory: RunnerFactory | None = None,
        torchx_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        resolved_deferrable = default_deferrable() if deferrable is None else deferrable
        options, defer_after = _validate(
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
            defer_after=defer_after,
            log_tail_lines=log_tail_lines,
            unknown_state_timeout=unknown_state_timeout,
            runner_factory=runner_factory,
            torchx_conn_id=torchx_conn_id,
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
        self.torchx_conn_id = torchx_conn_id
        self.cfg = dict(cfg) if cfg is not None else None
        self.workspace = workspace
        flags = options.flags
        self.wait = flags["wait"]
        self.deferrable = flags["deferrable"] and self.wait
        self.poll_interval = options.poll_interval
        self.defer_after = defer_after
        self.cancel_on_kill = flags["cancel_on_kill"]
        self.log_tail_lines = options.tail_lines
        self.stream_logs = flags["stream_logs"]
        self.fail_fast = flags["fail_fast"]
        self.skip_on_cancel = flags["skip_on_cancel"]
        self.unknown_state_timeout = options.unknown_timeout
        self.runner_factory = runner_factory
        self._runner: Runner | None = None
        self._life: AppLifecycle | None = None
        self._owner: str | None = None  # this try's owner token (set in execute)
        self._identity: tuple[str, str, str, int] | None = None
        self._scheduler = scheduler or "local_cwd"  # resolved with the connection per try
        self._cfg: dict[str, Any] = dict(cfg or {})
        self._conn: ConnectionSettings | None = None  # the connection's settings (this try)
        self._attachment: Attachment | None = None
        self._handle: str | None = None
        self._submitting: str | None = None  # the app name while attach() is in flight
        self._killed = False
        self._result: dict[str, Any] | None = None
        setattr(self, UI_URL_ATTR, None)

    # -- entry points -------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        """Submits (or reattaches to) the app and waits for it; see the module docstring."""
        try:
            self._start_try(context)
            result = self.execute_resumable(context)
            self._show_tracker_results(context, result)
            return result
        except Exception as e:
            if is_permanent_error(e):
                raise self._config_failure(e) from e
            raise
        finally:
            self._close_runner()

    def execute_complete(
        self, context: Context, event: dict[str, Any], log_positions: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """Resumes after :py:class:`TorchXTrigger` fired: gives the log lines given neither
        before deferring (``log_positions``) nor by the trigger (the event's), maps the event to
        the task outcome."""
        handle = str(event.get("app_handle", ""))
        self._handle = handle
        end, obs = read_event(event)
        status = obs.status if obs is not None else None
        self._remember_ui_url(status)
        try:
            self._start_try(context)
            if end is TriggerEnd.TIMEOUT:
                self._log_status(handle, status)
                raise AirflowTaskTimeout(str(event.get("message", "")))
            if end is TriggerEnd.ERROR or obs is None:
                message = str(event.get("message", ""))
                if event.get("permanent"):
                    raise AirflowFailException(f"{message} ({self._config_origin()}; not retried)")
                raise AirflowException(message)
            log_positions = event.get("log_positions", log_positions)
            streamed = self.stream_logs and log_positions is not None
            if streamed and not obs.expired:
                self._give_rest_of_log(handle, log_positions or {})
            result = self._finish(handle, obs, tail=not streamed)
            self._show_tracker_results(context, result)
            return result
        except Exception as e:
            if is_permanent_error(e):
                raise self._config_failure(e) from e
            raise
        finally:
            self._close_runner()

    def _show_tracker_results(self, context: Context, result: Any) -> None:
        """What a SUCCEEDED app recorded through its tracker (``torchx_core.tracker``): the
        ``tracker_metadata`` XCom and a log line (nothing without a configured tracker)."""
        if not isinstance(result, Mapping) or not result.get("app_handle"):
            return
        from torchx_core.runner import tracker_results

        handle = str(result["app_handle"])
        results = tracker_results(handle)
        if results is None:
            return
        payload = results.to_json()
        self.log.info(
            "tracker results of %s (%s): %s",
            handle,
            results.tracker,
            json.dumps(payload["metadata"]),
        )
        context["ti"].xcom_push(key="tracker_metadata", value=payload)

    def on_kill(self) -> None:
        """Cancels the app (``cancel_on_kill``) if this try still owns it: on SIGTERM and on
        ``execution_timeout``.

        A kill that arrives while the app is being submitted cancels what was submitted under the
        app's deterministic name (``execution_timeout`` aborts the submission), or the app as soon
        as the submission returns (SIGTERM lets it finish).
        """
        self._killed = True
        if not self.cancel_on_kill or self._owner is None:
            return
        handle, name = self._handle, self._submitting
        if handle is None and name is None:
            return
        # a Runner of its own: the task's may be closed (execution_timeout unwound execute)
        with open_runner(self._new_runner) as runner:
            life = self._new_lifecycle(runner)
            if handle is not None:
                self.log.info("Task killed: cancelling TorchX app %s", handle)
                done = life.cancel(handle, timeout=CANCEL_TIMEOUT_S)
            else:
                self.log.info("Task killed while submitting: cancelling apps named %s", name)
                done = life.cancel_by_name(str(name), timeout=CANCEL_TIMEOUT_S)
        if not done:
            self.log.warning("TorchX app not cancelled: a newer try owns it, or the cancel failed")

    # -- ResumableJobMixin hooks ----------------------------------------------------------------

    def submit_job(self, context: Context) -> str:
        """Attaches to this task's app (submitting it if needed); returns the app handle."""
        runner = self._get_runner()
        # unknown keys are an error here (the Runner only warns): says which keys are valid
        check_run_options(runner, self._scheduler, self._cfg)
        return self._attach(context, known_handle=None)

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        """The app's phase name (``"VANISHED"`` when the scheduler does not know it)."""
        obs = self._lifecycle().poll(str(external_id), max_age=0)
        return VANISHED_STATUS if obs.phase is Phase.VANISHED else obs.phase.name

    def is_job_active(self, status: str) -> bool:
        """True while the app may still finish (waiting or UNKNOWN; not vanished)."""
        return self._phase(status) in ACTIVE_PHASES

    def is_job_succeeded(self, status: str) -> bool:
        """True for SUCCEEDED."""
        return self._phase(status) is Phase.SUCCEEDED

    # The mixin declares ``-> None`` but returns this value on its reconnect path.
    def poll_until_complete(self, external_id: JsonValue, context: Context) -> dict[str, Any]:  # type: ignore[override]
        """Pushes the handle to XCom and waits (blocking or deferred); returns the status dict."""
        handle = str(external_id)
        if self._attachment is None or self._attachment.app_handle != handle:
            handle = self._reattach(context, handle)  # the mixin reconnected to a stored handle
        obs = self._announce(handle, context)
        if not self.wait:
            self._result = status_payload(handle, obs.status)
            return self._result
        # this try's log gets every line, also of an app that already ended or was reattached
        follower = self._follow(handle)
        if self.deferrable and not obs.done:
            try:
                obs = self._watch(handle, obs, self.defer_after)
            except BaseException:
                if follower is not None:
                    follower.stop(timeout=0)
                raise
            if not obs.done:
                positions = None
                if follower is not None:
                    follower.stop(timeout=0)  # the rest is given when the task resumes
                    positions = follower.positions()
                self._defer_to_trigger(handle, context, positions)
        return self._wait_on_worker(handle, obs, follower)

    def get_job_result(self, external_id: JsonValue, context: Context) -> dict[str, Any]:
        """The final status dict (checked again when a retry finds a finished app)."""
        if self._result is not None:
            return self._result
        return self.poll_until_complete(external_id, context)

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _phase(status: str) -> Phase:
        try:
            return Phase[status]
        except KeyError:
            return phase_for(status)

    def _start_try(self, context: Context) -> None:
        ti = context["ti"]
        self._owner = owner_token(ti)
        self._identity = task_identity(ti)
        settings = self._hook().settings(missing_ok=self.torchx_conn_id == DEFAULT_CONN_ID)
        self._conn = settings
        self._scheduler = self.scheduler or settings.scheduler or "local_cwd"
        self._cfg = {**settings.cfg, **(self.cfg or {})}
        setattr(self, DASHBOARD_URL_ATTR, settings.dashboard_url)

    def _uses_connection(self) -> bool:
        """False when the default connection is absent (or empty): nothing to look up."""
        settings = self._conn if self._conn is not None else ConnectionSettings()
        return conn_id_to_look_up(self.torchx_conn_id, settings, DEFAULT_CONN_ID) is not None

    def _config_origin(self) -> str:
        """Where this try's scheduler and run options came from (names and keys, no values)."""
        conn = self._conn
        if conn is None:  # the connection itself could not be read
            return f"connection {self.torchx_conn_id!r}"
        if not self._uses_connection():
            where = f"no connection ({self.torchx_conn_id!r} is not defined)"
        else:
            where = (
                f"connection {self.torchx_conn_id!r} (scheduler {conn.scheduler!r}, run"
                f" options {sorted(conn.cfg)})"
            )
        task = f"scheduler {self.scheduler!r}, cfg {sorted(self.cfg or {})}"
        return f"settings from {where} and the task ({task}); scheduler used: {self._scheduler!r}"

    def _config_failure(self, error: BaseException) -> BaseException:
        """``AirflowFailException`` for an error a retry cannot fix (no retry is spent)."""
        return AirflowFailException(
            "TorchX configuration error (not retried; fix it and clear the task):"
            f" {sentence(error)} Came from {self._config_origin()}"
        )

    def _hook(self) -> TorchXHook:
        return TorchXHook(self.torchx_conn_id)

    def _new_runner(self) -> Runner:
        return runner_for(self.torchx_conn_id, self.runner_factory)

    def _get_runner(self) -> Runner:
        if self._runner is None:
            self._runner = self._new_runner()
        return self._runner

    def _new_lifecycle(self, runner: Runner) -> AppLifecycle:
        return AppLifecycle(
            runner,
            self._scheduler,
            owner=str(self._owner),
            cfg=self._cfg,
            workspace=self.workspace,
            unknown_timeout=self.unknown_state_timeout,
            poll_interval=self.poll_interval,
            tail_lines=self.log_tail_lines,
        )

    def _lifecycle(self) -> AppLifecycle:
        if self._life is None:
            self._life = self._new_lifecycle(self._get_runner())
        return self._life

    def _close_runner(self) -> None:
        runner, self._runner, self._life = self._runner, None, None
        if runner is not None:
            runner.close()

    def _build_app(self, runner: Runner, context: Context) -> AppDef:
        """The rendered AppDef, or the materialized component (named by the lifecycle)."""
        if self.app is not None:
            app = copy.deepcopy(self.app)
        else:
            args = self.component_args if self.component_args is not None else []
            app = runner.materialize_component(str(self.component), args)
        app.name = app.name or context["ti"].task_id
        return app

    def _attach(self, context: Context, known_handle: str | None) -> str:
        """Submits, reattaches or reuses (the lifecycle's policy); this try becomes the owner."""
        life = self._lifecycle()
        app = self._build_app(life.runner, context)
        # kept if attach() raises: execution_timeout interrupts it, then on_kill finds the name
        self._submitting = app_name(app.name, self._identity or ())
        att = life.attach(app, self._identity or (), known_handle=known_handle)
        self._submitting = None
        self._attachment, self._handle = att, att.app_handle
        if att.how == "submitted":
            self.log.info("Submitted TorchX app %s as %s", att.app_name, att.app_handle)
        else:
            self.log.info(
                "Reattaching to TorchX app %s (%s, %s)", att.app_handle, att.how, att.app_name
            )
        if self._killed and self.cancel_on_kill:
            # SIGTERM came before the handle was known (on_kill could not cancel it)
            life.cancel(att.app_handle, timeout=CANCEL_TIMEOUT_S)
            raise AirflowException(
                f"the task was killed while submitting {att.app_handle}; cancelled it"
            )
        return att.app_handle

    def _reattach(self, context: Context, handle: str) -> str:
        """Adopts the stored handle's app (recording this try as owner); a failed or vanished one
        is replaced by a new app, whose handle is stored."""
        new = self._attach(context, known_handle=handle)
        store = context.get("task_state_store")
        if new != handle and store is not None:
            store.set(self.external_id_key, new)
        return new

    def _announce(self, handle: str, context: Context) -> Observation:
        """Reads the status and pushes ``app_handle`` / ``ui_url`` to XCom (before waiting)."""
        obs = self._lifecycle().poll(handle, max_age=0)
        ti = context["ti"]
        ti.xcom_push(key="app_handle", value=handle)
        self._remember_ui_url(obs.status)
        url = getattr(self, UI_URL_ATTR)
        if url:
            ti.xcom_push(key="ui_url", value=url)
            self.log.info("TorchX app %s UI: %s", handle, url)
        link = app_link(handle, url, getattr(self, DASHBOARD_URL_ATTR, None))
        if link:
            ti.xcom_push(key=TorchXAppLink().xcom_key, value=link)
            if link != url:
                self.log.info("TorchX app %s on the dashboard: %s", handle, link)
        state = obs.status.state.name if obs.status is not None else obs.phase.name
        self.log.info("TorchX app %s is %s", handle, state)
        return obs

    def _remember_ui_url(self, status: AppStatus | None) -> None:
        if status is not None and status.ui_url:
            setattr(self, UI_URL_ATTR, status.ui_url)

    def _follow(self, handle: str, start_at: dict[str, int] | None = None) -> LogFollower | None:
        """Streams the app's replica logs into the task log (None without ``stream_logs``).

        ``start_at``: the lines already given to this log (before a deferral), per replica.
        """
        if not self.stream_logs:
            return None
        options: dict[str, Any] = {}
        if start_at:
            options["start_at"] = start_at
            options["replicas"] = [replica_of(key) for key in start_at]  # the same ones as before
        return self._lifecycle().follow_logs(
            handle, lambda line: self.log.info("%s", line), **options
        )

    def _give_rest_of_log(self, handle: str, given: dict[str, int]) -> None:
        """After a deferral: the lines of the ended app not given before deferring."""
        follower = self._follow(handle, given)
        if follower is not None:
            follower.join(timeout=STREAM_DRAIN_TIMEOUT_S)
            follower.stop(timeout=STREAM_DRAIN_TIMEOUT_S)

    def _watch(self, handle: str, obs: Observation, seconds: float) -> Observation:
        """Polls the app on the worker for up to ``seconds`` (fast at first); the last
        observation (done if the app ended meanwhile)."""
        life = self._lifecycle()
        deadline = time.monotonic() + seconds
        pause = min(0.1, self.poll_interval)
        while not obs.done:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(pause, left))
            pause = min(pause * 2, self.poll_interval)
            obs = life.poll(handle, max_age=0)
        return obs

    def _defer_to_trigger(
        self, handle: str, context: Context, log_positions: dict[str, int] | None
    ) -> NoReturn:
        from torchx_airflow.trigger import TorchXTrigger

        timeout_at: float | None = None
        defer_timeout: timedelta | None = None
        if self.execution_timeout is not None:
            start = getattr(context["ti"], "start_date", None)
            started = start.timestamp() if start is not None else time.time()
            timeout_at = started + self.execution_timeout.total_seconds()
            defer_timeout = timedelta(seconds=max(timeout_at - time.time(), 0)) + _DEFER_BACKSTOP
        trigger = (self.trigger_class or TorchXTrigger)(
            app_handle=handle,
            poll_interval=self.poll_interval,
            unknown_state_timeout=self.unknown_state_timeout,
            cancel_on_kill=self.cancel_on_kill,
            timeout_at=timeout_at,
            owner=self._owner,
            # the default connection is looked up only if it exists (a triggerer's lookup of an
            # absent one is slow)
            torchx_conn_id=self.torchx_conn_id if self._uses_connection() else None,
            # the trigger streams the app's output into the task's log while deferred
            **({} if log_positions is None else {"log_positions": log_positions}),
        )
        self.log.info("Deferring: the triggerer waits for TorchX app %s", handle)
        self._close_runner()
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            kwargs=None if log_positions is None else {"log_positions": log_positions},
            timeout=defer_timeout,
        )

    def _wait_on_worker(
        self, handle: str, obs: Observation, follower: LogFollower | None
    ) -> dict[str, Any]:
        life = self._lifecycle()
        ended = False
        try:
            if not obs.done:
                life.wait(handle)
            ended = True
        except AppFailedError as e:
            ended = True
            raise self._failure(handle, e) from e
        finally:
            if follower is not None:
                # the streams end with the app: drain them only if it ended (a timeout or kill
                # must reach on_kill at once, not after the drain timeout)
                follower.stop(timeout=STREAM_DRAIN_TIMEOUT_S if ended else 0)
        return self._finish(handle, life.poll(handle, max_age=0), tail=not self.stream_logs)

    def _finish(self, handle: str, obs: Observation, *, tail: bool) -> dict[str, Any]:
        """Returns the status dict on success; logs and raises the mapped exception otherwise."""
        life = self._lifecycle()
        try:
            status = life.result(handle, obs)
        except AppFailedError as e:
            raise self._failure(handle, e) from e
        payload = status_payload(handle, status)
        self._result = payload
        if tail and self.log_tail_lines > 0:
            lines = life.failure_tail(handle, status)
            _log_group(
                self.log, f"TorchX logs (last {self.log_tail_lines} lines per replica)", lines
            )
        self.log.info("TorchX app %s SUCCEEDED", handle)
        return payload

    def _failure(self, handle: str, error: AppFailedError) -> BaseException:
        """The Airflow exception for a failed app: its message says what happened, with the
        structured errors and the log tail (logged once, by Airflow)."""
        self._result = None
        message = f"TorchX {error}"
        exc = exception_for(
            error.phase, message, fail_fast=self.fail_fast, skip_on_cancel=self.skip_on_cancel
        )
        return exc if exc is not None else AirflowException(message)

    def _log_status(self, handle: str, status: AppStatus | None) -> None:
        if status is not None:
            _log_group(self.log, f"TorchX app {handle}: {status.state.name}", [status.format()])


_NAMES = {
    "scheduler": "scheduler (or None: the connection's)",
    "unknown_timeout": "unknown_state_timeout",
    "tail_lines": "log_tail_lines",
}


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
    defer_after: object,
    log_tail_lines: object,
    unknown_state_timeout: object,
    runner_factory: object,
    torchx_conn_id: object,
) -> tuple[LaunchOptions, float]:
    """Collects every problem with the operator arguments, then raises once.

    The options every engine shares are checked by
    :class:`~torchx_core.runner.launch_options.LaunchOptions`; the rest is the operator's own.
    Returns the options and ``defer_after`` as the table of step settings reads them.
    """
    problems = _app_problems(app, component, component_args)
    options = LaunchOptions(
        # None: the connection's scheduler, read when the task runs
        scheduler="local_cwd" if scheduler is None else scheduler,  # type: ignore[arg-type]
        cfg=cfg,  # type: ignore[arg-type]
        poll_interval=poll_interval,  # type: ignore[arg-type]
        unknown_timeout=unknown_state_timeout,  # type: ignore[arg-type]
        tail_lines=log_tail_lines,  # type: ignore[arg-type]
        flags=flags,  # type: ignore[arg-type]
    )
    problems += options.problems(_NAMES)
    if not isinstance(torchx_conn_id, str) or not torchx_conn_id.strip():
        problems.append(
            f"torchx_conn_id must name a connection of type torchx, got {torchx_conn_id!r}"
        )
    if isinstance(workspace, (int, float, bool)):
        problems.append(f"workspace must be a path/URL string or a Workspace, got {workspace!r}")
    if _switch(explicit_deferrable) is True and _switch(flags.get("wait")) is False:
        problems.append(
            "deferrable=True needs wait=True (there is nothing to defer without waiting)"
        )
    defer = SETTINGS["defer_after"].read(defer_after, problems)  # inf: never defer
    if runner_factory is not None and not callable(runner_factory):
        problems.append(
            f"runner_factory must be callable (returning a Runner), got {runner_factory!r}"
        )
    if problems:
        raise InvalidTaskArgumentError("TorchXOperator", problems)
    return options.parsed(), float(defer)  # type: ignore[arg-type]  # read as a number


def _switch(value: object) -> object:
    """An on/off value as the table reads it (``"no"`` -> False); anything else as given."""
    return value if SETTINGS["flag"].problem(value) else SETTINGS["flag"].parse(value)


def _app_problems(app: object, component: object, component_args: object) -> list[str]:
    """What is wrong with the app (or component and its arguments) an operator runs."""
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
    return problems
