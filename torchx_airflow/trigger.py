"""``TorchXTrigger``: waits for a TorchX app in the Airflow triggerer.

The trigger polls through the shared lifecycle (``AppLifecycle.apoll``: the status read runs in a
worker thread, the triggerer's event loop is never blocked) and fires exactly one event when the
app ends, stays vanished or UNKNOWN past its grace period, or passes the task's deadline.
``cleanup()`` never touches the app (it runs on every triggerer restart). ``on_kill()`` (a user
marked the deferred task failed/success or cleared it) cancels the app only if the try that
deferred still owns it: after a clear, the new try records itself as the owner when it adopts the
app, and the old trigger then leaves it alone.

Event payload (plain JSON; :class:`TriggerEnd` says why the trigger fired)::

    {"event": "observed" | "timeout" | "error",
     "app_handle": str, "message": str,
     "observation": Observation.to_json() | None,
     "permanent": bool (only for "error": a configuration error a retry cannot fix)}

``observed``: the lifecycle decided (``Observation.done``: the app ended, or stayed VANISHED or
UNKNOWN past its grace; the last status read is kept). ``timeout``: the task's deadline passed
(the observation holds the last status read, if any). ``error``: no Runner could be built
(no observation).

Events of the version before (``"event"``: ``terminal``, ``vanished``, ``unknown_timeout``,
``timeout`` or ``error``, with the status as ``status_payload`` wrote it under ``"status"``) are
still read (:func:`read_event`): a task deferred by the old triggerer resumes on the new worker
after an upgrade.

``torchx_conn_id=None`` builds the Runner without looking a connection up (the operator and the
sensor pass None when the default ``torchx_default`` connection does not exist).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from torchx_airflow._airflow import BaseTrigger, TriggerEvent
from torchx_airflow._runtime import RunnerFactory, scheduler_of, status_from_payload
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_core.runner.lifecycle import AppLifecycle, Observation, Phase, phase_of
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import AppStatus, parse_app_handle
from torchx_core.specs.errors import MalformedAppHandleException, is_permanent_error

if TYPE_CHECKING:
    from torchx_core.runner import Runner

__all__ = ["TorchXTrigger", "TriggerEnd", "read_event"]

#: ``on_kill`` and the deadline give up waiting for the cancel call after this long (Airflow
#: allows ``on_kill`` 30 s).
ON_KILL_TIMEOUT_S = 25.0


class TriggerEnd(str, enum.Enum):
    """Why a :class:`TorchXTrigger` fired (the event's ``"event"``)."""

    OBSERVED = "observed"
    """The lifecycle decided: the event's observation is ``done``."""
    TIMEOUT = "timeout"
    """The task's deadline (``timeout_at``) passed."""
    ERROR = "error"
    """The trigger could not watch the app (no Runner)."""


_ENDS = frozenset(e.value for e in TriggerEnd)
#: the event kinds of the version before :class:`TriggerEnd`: kind -> (end, expired)
_LEGACY_KINDS = {
    "terminal": (TriggerEnd.OBSERVED, False),
    "vanished": (TriggerEnd.OBSERVED, True),
    "unknown_timeout": (TriggerEnd.OBSERVED, True),
    "timeout": (TriggerEnd.TIMEOUT, False),
    "error": (TriggerEnd.ERROR, False),
}


def read_event(event: Mapping[str, Any]) -> tuple[TriggerEnd, Observation | None]:
    """Why a trigger fired and what it observed, from its event payload: this version's, or the
    version before's (fired by a triggerer not yet upgraded, resumed by an upgraded worker).

    Raises:
        InvalidTaskArgumentError: the payload is neither (its ``"event"`` names no known end)
    """
    kind = event.get("event")
    known = isinstance(kind, str)
    if "observation" in event and known and kind in _ENDS:
        data = event["observation"]
        return TriggerEnd(kind), None if data is None else Observation.from_json(data)
    if "observation" not in event and known and kind in _LEGACY_KINDS:
        end, expired = _LEGACY_KINDS[kind]
        data = event.get("status")
        status = status_from_payload(data) if isinstance(data, Mapping) else None
        if end is TriggerEnd.ERROR or (end is TriggerEnd.TIMEOUT and status is None):
            return end, None
        phase = Phase.UNKNOWN if kind == "unknown_timeout" else phase_of(status)
        return end, Observation(phase, status, expired)
    valid = ", ".join(e.value for e in TriggerEnd)
    raise InvalidTaskArgumentError(
        "TorchXTrigger event",
        [
            f"event {kind!r} is not a TorchXTrigger end (this version's: {valid}; the version"
            f" before's: {', '.join(_LEGACY_KINDS)}); the task was resumed with an event of"
            " another trigger: clear the task to run it again"
        ],
    )


class TorchXTrigger(BaseTrigger):
    """Waits for a TorchX app to end, without blocking the triggerer.

    Args:
        app_handle: the app to wait for (``{scheduler}://{session}/{app_id}``)
        poll_interval: seconds between status checks
        unknown_state_timeout: seconds the app may stay UNKNOWN, unreachable or vanished before the
            trigger fires its expired observation (``observed``)
        cancel_on_kill: cancel the app when a user kills the deferred task (``on_kill``) and at
            the deadline; the sensor passes False because it does not own the app
        timeout_at: a UNIX time; past it the app is cancelled (if ``cancel_on_kill``) and a
            ``timeout`` event fires (the operator's ``execution_timeout``)
        owner: the owner token of the task try that deferred; kill paths cancel only an app this
            owner still owns (None: cancel unconditionally, as triggers serialized before
            owners existed)
        torchx_conn_id: the ``torchx`` connection the triggerer builds its Runner from (its
            session name and scheduler client environment); only the id is serialized, never
            the connection's values or secrets
        runner_factory: builds the Runner (tests only; never serialized)
    """

    def __init__(
        self,
        app_handle: str,
        poll_interval: float = 5.0,
        unknown_state_timeout: float = 300.0,
        cancel_on_kill: bool = True,
        timeout_at: float | None = None,
        owner: str | None = None,
        torchx_conn_id: str | None = None,
        runner_factory: RunnerFactory | None = None,
    ) -> None:
        # Airflow's BaseTrigger and TriggerEvent are untyped (no-untyped-call under --strict)
        super().__init__()  # type: ignore[no-untyped-call,unused-ignore]
        problems: list[str] = []
        try:
            parse_app_handle(app_handle)
        except MalformedAppHandleException as e:
            problems.append(str(e))
        poll = SETTINGS["poll_interval"].read(poll_interval, problems)
        unknown = SETTINGS["unknown_timeout"].read(
            unknown_state_timeout, problems, "unknown_state_timeout"
        )
        cancel = SETTINGS["flag"].read(cancel_on_kill, problems, "cancel_on_kill")
        deadline = SETTINGS["timeout_at"].read(timeout_at, problems)
        if owner is not None:
            owner = SETTINGS["owner"].read(owner, problems)  # type: ignore[assignment]  # a str
        if torchx_conn_id is not None and (
            not isinstance(torchx_conn_id, str) or not torchx_conn_id.strip()
        ):
            problems.append(
                f"torchx_conn_id must name a connection or be None, got {torchx_conn_id!r}"
            )
        if problems:
            raise InvalidTaskArgumentError("TorchXTrigger", problems)
        self.app_handle = app_handle
        self.poll_interval = float(poll)  # type: ignore[arg-type]  # read as a number
        self.unknown_state_timeout = float(unknown)  # type: ignore[arg-type]
        self.cancel_on_kill = bool(cancel)
        self.timeout_at = float(deadline) if deadline is not None else None
        self.owner = owner
        self.torchx_conn_id = torchx_conn_id
        self._runner_factory = runner_factory

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Classpath and JSON kwargs to rebuild this trigger in the triggerer."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "app_handle": self.app_handle,
                "poll_interval": self.poll_interval,
                "unknown_state_timeout": self.unknown_state_timeout,
                "cancel_on_kill": self.cancel_on_kill,
                "timeout_at": self.timeout_at,
                "owner": self.owner,
                "torchx_conn_id": self.torchx_conn_id,
            },
        )

    def _new_runner(self) -> Runner:
        """A Runner (in a worker thread): from the connection, the factory, or ``get_runner()``."""
        from torchx_airflow.hook import runner_for

        return runner_for(self.torchx_conn_id, self._runner_factory)

    def _lifecycle(self, runner: Runner) -> AppLifecycle:
        return AppLifecycle(
            runner,
            scheduler_of(self.app_handle),
            owner=self.owner or f"airflow-trigger:{self.app_handle}",
            unknown_timeout=self.unknown_state_timeout,
            poll_interval=self.poll_interval,
        )

    def _event(
        self,
        end: TriggerEnd,
        obs: Observation | None,
        message: str,
        *,
        permanent: bool = False,
    ) -> TriggerEvent:
        payload: dict[str, Any] = {
            "event": end.value,
            "app_handle": self.app_handle,
            "message": message,
            "observation": None if obs is None else obs.to_json(),
        }
        if end is TriggerEnd.ERROR:
            payload["permanent"] = permanent
        return TriggerEvent(payload)  # type: ignore[no-untyped-call,unused-ignore]

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Polls until the app ends; yields one event, then returns."""
        try:
            runner = await asyncio.to_thread(self._new_runner)
        except Exception as e:  # noqa: BLE001 - reported to the task as an error event
            yield self._event(
                TriggerEnd.ERROR,
                None,
                f"cannot create a TorchX Runner: {e!r}",
                permanent=is_permanent_error(e),
            )
            return
        try:
            yield await self._wait(self._lifecycle(runner))
        finally:
            # Local resources only: the app keeps running (a triggerer restart re-runs us).
            await asyncio.to_thread(runner.close)

    async def _wait(self, life: AppLifecycle) -> TriggerEvent:
        last: AppStatus | None = None
        while True:
            if self.timeout_at is not None and time.time() >= self.timeout_at:
                cancelled = self.cancel_on_kill and await self._cancel(life)
                last_obs = None if last is None else Observation(phase_of(last), last, False)
                return self._event(
                    TriggerEnd.TIMEOUT,
                    last_obs,
                    f"TorchX app {self.app_handle} passed the task's execution_timeout"
                    + (" and was cancelled" if cancelled else ""),
                )
            obs = await life.apoll(self.app_handle)
            last = obs.status or last
            if obs.done:
                return self._final_event(obs, last)
            await asyncio.sleep(self._sleep_time())

    def _final_event(self, obs: Observation, last: AppStatus | None) -> TriggerEvent:
        grace = f"{self.unknown_state_timeout:g} s"
        if obs.expired and obs.phase is Phase.VANISHED:
            message = (
                f"TorchX app {self.app_handle} is gone: its scheduler has not known it for more"
                f" than {grace}"
            )
        elif obs.expired:
            # keep the last status read: an unreadable status is None
            obs = Observation(obs.phase, last, expired=True)
            message = (
                f"TorchX app {self.app_handle} stayed UNKNOWN (or unreachable) for more than"
                f" {grace}"
            )
        else:
            state = obs.status.state.name if obs.status is not None else obs.phase.name
            message = f"TorchX app {self.app_handle} {state}"
        return self._event(TriggerEnd.OBSERVED, obs, message)

    def _sleep_time(self) -> float:
        if self.timeout_at is None:
            return self.poll_interval
        return max(0.0, min(self.poll_interval, self.timeout_at - time.time()))

    async def _cancel(self, life: AppLifecycle) -> bool:
        """Cancels the app if this try still owns it (bounded); True if it was cancelled."""
        done = await asyncio.to_thread(
            life.cancel,
            self.app_handle,
            timeout=ON_KILL_TIMEOUT_S,
            only_if_owned=self.owner is not None,
        )
        if done:
            self.log.info("Cancelled TorchX app %s", self.app_handle)
        else:
            self.log.warning(
                "Did not cancel TorchX app %s: a newer try (not %s) owns it, or the cancel failed",
                self.app_handle,
                self.owner,
            )
        return bool(done)

    async def cleanup(self) -> None:
        """Runs on every trigger exit (including triggerer restarts): never cancels the app."""

    async def on_kill(self) -> None:
        """A user killed the deferred task: cancel the app if this try still owns it."""
        if not self.cancel_on_kill:
            return
        self.log.info(
            "Deferred task killed: cancelling TorchX app %s if %s still owns it",
            self.app_handle,
            self.owner or "this trigger",
        )
        runner = await asyncio.to_thread(self._new_runner)
        try:
            await self._cancel(self._lifecycle(runner))
        finally:
            await asyncio.to_thread(runner.close)
