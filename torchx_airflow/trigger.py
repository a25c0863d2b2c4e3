"""``TorchXTrigger``: waits for a TorchX app in the Airflow triggerer.

The trigger polls through the shared lifecycle (``AppLifecycle.apoll``: the status read runs in a
worker thread, the triggerer's event loop is never blocked) and fires exactly one event when the
app ends, stays vanished or UNKNOWN past its grace period, or passes the task's deadline.
``cleanup()`` never touches the app (it runs on every triggerer restart).

With ``log_positions`` (the operator's ``stream_logs``), the trigger also streams the replicas'
output while the task is deferred, continuing where the worker stopped: the lines go through
the trigger's logger, which Airflow 3 writes to the task's log (a ``.trigger.<id>.log`` part the
UI shows with it), each stamped when it was read (at most :data:`LOG_FLUSH_S` late). Its event
then carries the positions reached, so the resumed task gives only the lines after them. A
triggerer restart re-creates the trigger with the positions of the deferral: lines the previous
triggerer already gave are given again. ``on_kill()`` (a user
marked the deferred task failed/success or cleared it) cancels the app only if the try that
deferred still owns it: after a clear, the new try records itself as the owner when it adopts the
app, and the old trigger then leaves it alone.

Event payload (plain JSON; :class:`TriggerEnd` says why the trigger fired)::

    {"event": "observed" | "timeout" | "error",
     "app_handle": str, "message": str,
     "observation": Observation.to_json() | None,
     "permanent": bool (only for "error": a configuration error a retry cannot fix),
     "log_positions": {"role/k": lines given} (only when the trigger streamed logs)}

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
import collections
import enum
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from torchx_airflow._airflow import BaseTrigger, TriggerEvent
from torchx_airflow._runtime import (
    RunnerFactory,
    replica_of,
    scheduler_of,
    status_from_payload,
)
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_core.runner.lifecycle import AppLifecycle, LogFollower, Observation, Phase, phase_of
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import AppStatus, parse_app_handle
from torchx_core.specs.errors import MalformedAppHandleException, is_permanent_error

if TYPE_CHECKING:
    from torchx_core.runner import Runner

__all__ = ["TorchXTrigger", "TriggerEnd", "read_event"]

#: ``on_kill`` and the deadline give up waiting for the cancel call after this long (Airflow
#: allows ``on_kill`` 30 s).
ON_KILL_TIMEOUT_S = 25.0
#: While it streams logs, the trigger writes the lines read at least this often (seconds).
LOG_FLUSH_S = 1.0
#: At the end, the log streams get this long (seconds without a new line) to drain.
LOG_DRAIN_S = 10.0


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
        log_positions: stream the replicas' output into the task's log from these positions
            (``LogFollower.positions()`` of the worker's follower; ``{}``: from the start);
            None: do not stream
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
        log_positions: Mapping[str, int] | None = None,
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
        if log_positions is not None and not (
            isinstance(log_positions, Mapping)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in log_positions.items())
        ):
            problems.append(
                "log_positions must map 'role/k' to a line count (LogFollower.positions()) or be"
                f" None, got {log_positions!r}"
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
        self.log_positions = None if log_positions is None else dict(log_positions)
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
                # only when set: a triggerer of the version before can rebuild the others
                **({} if self.log_positions is None else {"log_positions": self.log_positions}),
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
        log_positions: dict[str, int] | None = None,
    ) -> TriggerEvent:
        payload: dict[str, Any] = {
            "event": end.value,
            "app_handle": self.app_handle,
            "message": message,
            "observation": None if obs is None else obs.to_json(),
        }
        if end is TriggerEnd.ERROR:
            payload["permanent"] = permanent
        if log_positions is not None:
            payload["log_positions"] = log_positions
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
            life = self._lifecycle(runner)
            streams = await self._start_streams(life)
            try:
                end, obs, message = await self._wait(life, streams)
            finally:
                if streams is not None:
                    await streams.stop(drain=False)
            positions = None if streams is None else streams.follower.positions()
            yield self._event(end, obs, message, log_positions=positions)
        finally:
            # Local resources only: the app keeps running (a triggerer restart re-runs us).
            await asyncio.to_thread(runner.close)

    async def _start_streams(self, life: AppLifecycle) -> _Streams | None:
        """The log streams of the app into the task's log (None without ``log_positions``)."""
        if self.log_positions is None:
            return None
        lines: collections.deque[str] = collections.deque()  # appends are thread-safe
        options: dict[str, Any] = {}
        if self.log_positions:  # the same replicas as the worker streamed
            options["start_at"] = self.log_positions
            options["replicas"] = [replica_of(key) for key in self.log_positions]
        follower = await asyncio.to_thread(
            life.follow_logs, self.app_handle, lines.append, **options
        )
        return _Streams(follower, lines, self.log)

    async def _wait(
        self, life: AppLifecycle, streams: _Streams | None
    ) -> tuple[TriggerEnd, Observation | None, str]:
        last: AppStatus | None = None
        while True:
            if self.timeout_at is not None and time.time() >= self.timeout_at:
                cancelled = self.cancel_on_kill and await self._cancel(life)
                last_obs = None if last is None else Observation(phase_of(last), last, False)
                return (
                    TriggerEnd.TIMEOUT,
                    last_obs,
                    f"TorchX app {self.app_handle} passed the task's execution_timeout"
                    + (" and was cancelled" if cancelled else ""),
                )
            obs = await life.apoll(self.app_handle)
            last = obs.status or last
            if obs.done:
                if streams is not None and not obs.expired:
                    await streams.stop(drain=True)  # the app ended: its last lines, in order
                return (TriggerEnd.OBSERVED, *self._final(obs, last))
            await self._pause(self._sleep_time(), streams)

    @staticmethod
    async def _pause(seconds: float, streams: _Streams | None) -> None:
        """Sleeps ``seconds``, writing the lines read meanwhile at least each LOG_FLUSH_S."""
        if streams is None:
            await asyncio.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        while True:
            streams.flush()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(LOG_FLUSH_S, left))

    def _final(self, obs: Observation, last: AppStatus | None) -> tuple[Observation, str]:
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
        return obs, message

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


class _Streams:
    """A trigger's log follower and the lines its threads read, written to the trigger's logger
    from the trigger's own task (where Airflow routes them to the task's log)."""

    def __init__(self, follower: LogFollower, lines: collections.deque[str], log: Any) -> None:
        self.follower = follower
        self.lines = lines
        self.log = log

    def flush(self) -> None:
        """Writes the lines read so far."""
        while self.lines:
            self.log.info("%s", self.lines.popleft())

    async def stop(self, *, drain: bool) -> None:
        """Stops the streams (after they drain, if ``drain``), then writes what they read."""
        await asyncio.to_thread(self.follower.stop, timeout=LOG_DRAIN_S if drain else 0)
        self.flush()
