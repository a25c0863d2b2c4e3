"""``TorchXSensor``: waits for an existing TorchX app (poke, reschedule or deferrable mode).

The sensor does not own the app: it never cancels it. In reschedule mode, it asks to be
rescheduled :data:`RESCHEDULE_MIN_S` seconds later at the earliest, whatever ``poke_interval``
says: a shorter gap meets Airflow 3.3's stale-event race, where the scheduler reads the exit of
the poke before as the end of the rescheduled try and fails it ("finished with state success,
but the task instance's state attribute is queued"; Airflow's own sensors fail the same way).
Outcomes follow
:py:mod:`torchx_airflow.states`; success returns the final status dict as the sensor's XCom
``return_value``.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from torchx_airflow._airflow import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    BaseSensorOperator,
    PokeReturnValue,
    default_deferrable,
)
from torchx_airflow._connection import DEFAULT_CONN_ID
from torchx_airflow._runtime import (
    RunnerFactory,
    conn_id_to_look_up,
    open_runner,
    scheduler_of,
    status_payload,
)
from torchx_airflow.errors import InvalidTaskArgumentError, sentence
from torchx_airflow.hook import TorchXHook, runner_for
from torchx_airflow.states import exception_for
from torchx_airflow.trigger import TriggerEnd, read_event
from torchx_core.runner.lifecycle import (
    AppFailedError,
    AppLifecycle,
    GraceClock,
    Observation,
    Phase,
)
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import parse_app_handle
from torchx_core.specs.errors import MalformedAppHandleException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from torchx_core.runner import Runner

__all__ = ["TorchXSensor"]

#: task_state_store key holding the start (UNIX time) of the current UNKNOWN streak.
_UNKNOWN_SINCE_KEY = "torchx_unknown_since"
#: In reschedule mode, the shortest time (seconds) to the next poke (see the module docstring).
RESCHEDULE_MIN_S = 30.0


class TorchXSensor(BaseSensorOperator):
    """Waits until the app named by ``app_handle`` ends.

    Args:
        app_handle: the app handle (templated, e.g.
            ``"{{ ti.xcom_pull(task_ids='train', key='app_handle') }}"``)
        fail_fast: a FAILED app fails the sensor without Airflow retries
        skip_on_cancel: a CANCELLED app skips the sensor instead of failing it
        unknown_state_timeout: seconds the app may stay UNKNOWN, unreachable or vanished before the
            sensor fails
        deferrable: wait in the triggerer (default: ``[operators] default_deferrable``)
        runner_factory: builds the Runner (default: from the connection); deferred waits use the
            connection
        torchx_conn_id: the ``torchx`` connection giving the session name and the scheduler
            client's environment (default ``torchx_default``, which may be absent)
        kwargs: :py:class:`BaseSensorOperator` arguments (``poke_interval``, ``mode``,
            ``timeout``, ``soft_fail``...); in ``mode="reschedule"`` the pokes are at least
            :data:`RESCHEDULE_MIN_S` apart (a shorter gap meets Airflow 3.3's stale-event race)
    """

    template_fields = ("app_handle",)

    def __init__(
        self,
        *,
        app_handle: str,
        fail_fast: bool = False,
        skip_on_cancel: bool = False,
        unknown_state_timeout: float = 300.0,
        deferrable: bool | None = None,
        runner_factory: RunnerFactory | None = None,
        torchx_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        resolved = default_deferrable() if deferrable is None else deferrable
        problems: list[str] = []
        if not isinstance(app_handle, str) or not app_handle.strip():
            problems.append(f"app_handle must be a non-empty str, got {app_handle!r}")
        elif "{{" not in app_handle:  # a template is checked once rendered (in poke)
            try:
                parse_app_handle(app_handle)
            except MalformedAppHandleException as e:
                problems.append(f"app_handle: {e}")
        flags = {"fail_fast": fail_fast, "skip_on_cancel": skip_on_cancel, "deferrable": resolved}
        fail_fast, skip_on_cancel, resolved = [
            bool(SETTINGS["flag"].read(value, problems, name)) for name, value in flags.items()
        ]
        unknown = SETTINGS["unknown_timeout"].read(
            unknown_state_timeout, problems, "unknown_state_timeout"
        )
        if deferrable is True and getattr(self, "mode", "poke") == "reschedule":
            problems.append("deferrable=True and mode='reschedule' are exclusive; pick one")
        if runner_factory is not None and not callable(runner_factory):
            problems.append(f"runner_factory must be callable, got {runner_factory!r}")
        if not isinstance(torchx_conn_id, str) or not torchx_conn_id.strip():
            problems.append(f"torchx_conn_id must name a connection, got {torchx_conn_id!r}")
        if problems:
            raise InvalidTaskArgumentError("TorchXSensor", problems)
        self.app_handle = app_handle
        self.fail_fast = fail_fast
        self.skip_on_cancel = skip_on_cancel
        self.unknown_state_timeout = float(unknown)  # type: ignore[arg-type]  # read as a number
        self.deferrable = resolved and self.mode != "reschedule"
        self.runner_factory = runner_factory
        self.torchx_conn_id = torchx_conn_id
        self._unknown_since: float | None = None

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """One status check: done (with the status dict), not yet, or raise per the state table."""
        try:
            parse_app_handle(self.app_handle)
        except MalformedAppHandleException as e:
            # e.g. an xcom_pull that found nothing rendered "None": retrying cannot fix it
            raise AirflowFailException(
                f"TorchXSensor {self.task_id}: app_handle rendered to {self.app_handle!r}:"
                f" {sentence(e)}"
                " Check the app_handle template (the upstream task's XCom key 'app_handle')."
            ) from e
        with open_runner(self._new_runner) as runner:
            life = self._lifecycle(runner)
            obs = life.poll(self.app_handle, max_age=0)
            if self._grace_expired(obs.phase, context):
                if obs.phase is Phase.VANISHED:
                    raise AirflowException(
                        f"TorchX app {self.app_handle} is gone: its scheduler has not known it for"
                        f" more than {self.unknown_state_timeout:g} s"
                    )
                raise AirflowException(
                    f"TorchX app {self.app_handle} stayed UNKNOWN (or unreachable) for more than"
                    f" {self.unknown_state_timeout:g} s"
                )
            if not obs.done:
                state = obs.status.state.name if obs.status else obs.phase.name
                self.log.info("TorchX app %s is %s", self.app_handle, state)
                return False
            return PokeReturnValue(is_done=True, xcom_value=self._final(life, obs))

    def execute(self, context: Context) -> Any:
        """Pokes (or reschedules) as configured; in deferrable mode, defers after one poke."""
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowRescheduleException as e:
                raise _not_before(e, RESCHEDULE_MIN_S) from None
        result = self.poke(context)
        if isinstance(result, PokeReturnValue) and result.is_done:
            return result.xcom_value
        from torchx_airflow.trigger import TorchXTrigger

        timeout_s = float(self.timeout) if self.timeout is not None else None
        self.defer(
            trigger=TorchXTrigger(
                app_handle=self.app_handle,
                poll_interval=float(self.poke_interval),
                unknown_state_timeout=self.unknown_state_timeout,
                cancel_on_kill=False,
                torchx_conn_id=self._trigger_conn_id(),
                timeout_at=time.time() + timeout_s if timeout_s is not None else None,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=timeout_s + 60) if timeout_s is not None else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Maps the trigger's event to the sensor outcome."""
        end, obs = read_event(event)
        message = str(event.get("message", ""))
        if end is TriggerEnd.TIMEOUT:
            raise AirflowSensorTimeout(message)
        if end is TriggerEnd.ERROR or obs is None or obs.expired:
            raise AirflowException(message)
        with open_runner(self._new_runner) as runner:
            return self._final(self._lifecycle(runner), obs)

    def _trigger_conn_id(self) -> str | None:
        """The connection the trigger looks up: none when the default one is absent."""
        if self.torchx_conn_id != DEFAULT_CONN_ID:
            return self.torchx_conn_id
        settings = TorchXHook(DEFAULT_CONN_ID).settings(missing_ok=True)
        return conn_id_to_look_up(DEFAULT_CONN_ID, settings, DEFAULT_CONN_ID)

    def _new_runner(self) -> Runner:
        return runner_for(self.torchx_conn_id, self.runner_factory)

    def _lifecycle(self, runner: Runner) -> AppLifecycle:
        # the sensor never cancels: it only reads statuses and logs through the lifecycle
        return AppLifecycle(
            runner,
            scheduler_of(self.app_handle),
            owner=f"airflow-sensor:{self.task_id}",
            unknown_timeout=self.unknown_state_timeout,
        )

    def _final(self, life: AppLifecycle, obs: Observation) -> dict[str, Any]:
        """The status dict of a SUCCEEDED app; the mapped exception for a failed/cancelled one."""
        try:
            status = life.result(self.app_handle, obs)
        except AppFailedError as e:
            exc = exception_for(
                e.phase, f"TorchX {e}", fail_fast=self.fail_fast, skip_on_cancel=self.skip_on_cancel
            )
            raise (exc if exc is not None else AirflowException(str(e))) from e
        return status_payload(self.app_handle, status)

    def _grace_expired(self, phase: Phase, context: Context) -> bool:
        """UNKNOWN/VANISHED grace across pokes; in reschedule mode (a new sensor object per poke)
        the streak's start is kept in the task state store."""
        store = context.get("task_state_store") if self.mode == "reschedule" else None
        since = self._unknown_since
        if store is not None:
            stored = store.get(_UNKNOWN_SINCE_KEY)
            since = float(stored) if isinstance(stored, (int, float)) else None
        clock = GraceClock(self.unknown_state_timeout, clock=time.time, since=since)
        expired = clock.observe(phase)
        if store is not None and clock.since != since:
            if clock.since is None:
                store.delete(_UNKNOWN_SINCE_KEY)
            else:
                store.set(_UNKNOWN_SINCE_KEY, clock.since)
        self._unknown_since = clock.since
        return expired


def _not_before(reschedule: AirflowRescheduleException, seconds: float) -> BaseException:
    """``reschedule``, or the same request moved to ``seconds`` from now if it asked for less."""
    earliest = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    asked = reschedule.reschedule_date
    if asked.tzinfo is not None and asked >= earliest:
        return reschedule
    return AirflowRescheduleException(earliest)  # type: ignore[no-untyped-call]  # Airflow untyped
