"""``TorchXTrigger``: waits for a TorchX app in the Airflow triggerer.

The trigger polls ``Runner.status`` through ``asyncio.to_thread`` (the triggerer's event loop is
never blocked), and fires exactly one event when the app ends, stays vanished or UNKNOWN past its
grace period, or passes the task's deadline. ``cleanup()`` never touches the app (it runs on every
triggerer restart); ``on_kill()`` cancels it when a user kills the deferred task.

Event payload (plain JSON)::

    {"event": "terminal" | "vanished" | "unknown_timeout" | "timeout" | "error",
     "app_handle": str, "status": <status dict> | None, "message": str}
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from torchx_airflow._airflow import BaseTrigger, TriggerEvent
from torchx_airflow._runtime import RunnerFactory, default_runner_factory, status_payload
from torchx_airflow.errors import InvalidTaskArgumentError, check_number
from torchx_airflow.states import Outcome, UnknownStateClock, outcome_for
from torchx_core.specs import AppStatus, parse_app_handle
from torchx_core.specs.errors import MalformedAppHandleException

if TYPE_CHECKING:
    from torchx_core.runner import Runner

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["TorchXTrigger"]

#: ``on_kill`` and the deadline give up waiting for the cancel call after this long (Airflow
#: allows ``on_kill`` 30 s).
ON_KILL_TIMEOUT_S = 25.0


class TorchXTrigger(BaseTrigger):
    """Waits for a TorchX app to end, without blocking the triggerer.

    Args:
        app_handle: the app to wait for (``{scheduler}://{session}/{app_id}``)
        poll_interval: seconds between status checks
        unknown_state_timeout: seconds the app may stay UNKNOWN, unreachable or vanished before the
            trigger fires an ``unknown_timeout`` (or ``vanished``) event
        cancel_on_kill: cancel the app when a user kills the deferred task (``on_kill``); the
            sensor passes False because it does not own the app
        timeout_at: a UNIX time; past it the app is cancelled (if ``cancel_on_kill``) and a
            ``timeout`` event fires (the operator's ``execution_timeout``)
        runner_factory: builds the Runner (tests only; never serialized)
    """

    def __init__(
        self,
        app_handle: str,
        poll_interval: float = 5.0,
        unknown_state_timeout: float = 300.0,
        cancel_on_kill: bool = True,
        timeout_at: float | None = None,
        runner_factory: RunnerFactory | None = None,
    ) -> None:
        super().__init__()
        problems: list[str] = []
        try:
            parse_app_handle(app_handle)
        except MalformedAppHandleException as e:
            problems.append(str(e))
        check_number(problems, "poll_interval", poll_interval, minimum=0, strict=True)
        check_number(problems, "unknown_state_timeout", unknown_state_timeout, minimum=0)
        if not isinstance(cancel_on_kill, bool):
            problems.append(f"cancel_on_kill must be True or False, got {cancel_on_kill!r}")
        if timeout_at is not None:
            check_number(problems, "timeout_at", timeout_at, minimum=0)
        if problems:
            raise InvalidTaskArgumentError("TorchXTrigger", problems)
        self.app_handle = app_handle
        self.poll_interval = float(poll_interval)
        self.unknown_state_timeout = float(unknown_state_timeout)
        self.cancel_on_kill = cancel_on_kill
        self.timeout_at = float(timeout_at) if timeout_at is not None else None
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
            },
        )

    def _new_runner(self) -> Runner:
        return (self._runner_factory or default_runner_factory)()

    def _event(self, kind: str, status: AppStatus | None, message: str = "") -> TriggerEvent:
        payload = {
            "event": kind,
            "app_handle": self.app_handle,
            "status": status_payload(self.app_handle, status) if kind != "error" else None,
            "message": message,
        }
        return TriggerEvent(payload)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Polls until the app ends; yields one event, then returns."""
        try:
            runner = await asyncio.to_thread(self._new_runner)
        except Exception as e:  # noqa: BLE001 - reported to the task as an error event
            yield self._event("error", None, f"cannot create a TorchX Runner: {e!r}")
            return
        try:
            yield await self._wait(runner)
        finally:
            # Local resources only: the app keeps running (a triggerer restart re-runs us).
            close = getattr(runner, "close", None)
            if callable(close):
                await asyncio.to_thread(close)

    async def _wait(self, runner: Runner) -> TriggerEvent:
        clock = UnknownStateClock(self.unknown_state_timeout)
        last: AppStatus | None = None
        while True:
            if self.timeout_at is not None and time.time() >= self.timeout_at:
                if self.cancel_on_kill:
                    try:
                        await asyncio.wait_for(
                            asyncio.to_thread(runner.cancel, self.app_handle), ON_KILL_TIMEOUT_S
                        )
                    except Exception as e:  # noqa: BLE001 - the timeout event still fires
                        self.log.warning("cancelling %s failed: %r", self.app_handle, e)
                return self._event(
                    "timeout",
                    last,
                    f"TorchX app {self.app_handle} passed the task's execution_timeout"
                    + (" and was cancelled" if self.cancel_on_kill else ""),
                )
            try:
                status = await asyncio.to_thread(runner.status, self.app_handle)
                outcome = outcome_for(status.state if status is not None else None)
                last = status if status is not None else last
            except Exception as e:  # noqa: BLE001 - transient errors count as UNKNOWN
                self.log.warning("reading the status of %s failed: %s", self.app_handle, e)
                status, outcome = last, Outcome.UNKNOWN
            expired = clock.observe(outcome)
            if expired and outcome is Outcome.VANISHED:
                return self._event(
                    "vanished",
                    None,
                    f"TorchX app {self.app_handle} is gone: its scheduler has not known it for"
                    f" more than {self.unknown_state_timeout:g} s",
                )
            if expired:
                return self._event(
                    "unknown_timeout",
                    last,
                    f"TorchX app {self.app_handle} stayed UNKNOWN (or unreachable) for more than"
                    f" {self.unknown_state_timeout:g} s",
                )
            if not outcome.keeps_waiting:
                state = status.state.name if status is not None else "?"
                return self._event("terminal", status, f"TorchX app {self.app_handle} {state}")
            await asyncio.sleep(self._sleep_time())

    def _sleep_time(self) -> float:
        if self.timeout_at is None:
            return self.poll_interval
        return max(0.0, min(self.poll_interval, self.timeout_at - time.time()))

    async def cleanup(self) -> None:
        """Runs on every trigger exit (including triggerer restarts): never cancels the app."""

    async def on_kill(self) -> None:
        """A user killed the deferred task: cancel the app (``cancel_on_kill``), bounded in time."""
        if not self.cancel_on_kill:
            return
        self.log.info("Deferred task killed: cancelling TorchX app %s", self.app_handle)

        def _cancel() -> None:
            runner = self._new_runner()
            try:
                runner.cancel(self.app_handle)
            finally:
                close = getattr(runner, "close", None)
                if callable(close):
                    close()

        try:
            await asyncio.wait_for(asyncio.to_thread(_cancel), timeout=ON_KILL_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.log.warning(
                "cancelling %s did not finish within %.0f s", self.app_handle, ON_KILL_TIMEOUT_S
            )
