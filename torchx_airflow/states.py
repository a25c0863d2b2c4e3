"""The one table mapping a TorchX :py:class:`AppState` to an Airflow outcome.

Every piece of ``torchx_airflow`` (operator, trigger, sensor) reads app states through this
module, so the mapping lives in exactly one place:

==========================================  ===========  ==========================================
AppState                                    Outcome      Airflow effect
==========================================  ===========  ==========================================
UNSUBMITTED, SUBMITTED, PENDING, RUNNING    ``WAIT``     keep waiting (running/deferred/rescheduled)
SUCCEEDED                                   ``SUCCESS``  task succeeds, returns the status dict
FAILED                                      ``FAIL``     ``AirflowException`` (retryable), or
                                                         ``AirflowFailException`` with ``fail_fast``
CANCELLED                                   ``CANCELLED`` ``AirflowFailException``, or
                                                         ``AirflowSkipException`` with
                                                         ``skip_on_cancel``
UNKNOWN                                     ``UNKNOWN``  keep waiting; ``AirflowException`` once the
                                                         grace period (``unknown_state_timeout``)
                                                         is over
``None`` (the app vanished)                 ``VANISHED`` keep waiting; ``AirflowException`` once the
                                                         grace period is over (a retry resubmits)
==========================================  ===========  ==========================================

UNKNOWN and VANISHED share one grace period (:py:class:`UnknownStateClock`): a scheduler may
briefly not report an app it runs. A retry reattaches to an UNKNOWN app, never to a vanished one.

The Airflow exception classes are imported only when an exception is built, so importing this
module stays cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from enum import Enum
from types import MappingProxyType

from torchx_core.specs import AppState

__all__ = [
    "APP_STATE_OUTCOMES",
    "Outcome",
    "UnknownStateClock",
    "exception_for",
    "outcome_for",
]


class Outcome(str, Enum):
    """What an Airflow task does when it sees an app state."""

    WAIT = "wait"
    SUCCESS = "success"
    FAIL = "fail"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    VANISHED = "vanished"

    @property
    def keeps_waiting(self) -> bool:
        """True for outcomes that keep the task waiting: ``WAIT``, and (within the grace period)
        ``UNKNOWN`` and ``VANISHED``."""
        return self in (Outcome.WAIT, Outcome.UNKNOWN, Outcome.VANISHED)

    @property
    def in_grace(self) -> bool:
        """True for ``UNKNOWN`` and ``VANISHED``: waited for only up to the grace period."""
        return self in (Outcome.UNKNOWN, Outcome.VANISHED)

    @property
    def reattachable(self) -> bool:
        """True when a retry should wait for the app again instead of resubmitting it."""
        return self in (Outcome.WAIT, Outcome.UNKNOWN)


APP_STATE_OUTCOMES: Mapping[AppState, Outcome] = MappingProxyType(
    {
        AppState.UNSUBMITTED: Outcome.WAIT,
        AppState.SUBMITTED: Outcome.WAIT,
        AppState.PENDING: Outcome.WAIT,
        AppState.RUNNING: Outcome.WAIT,
        AppState.SUCCEEDED: Outcome.SUCCESS,
        AppState.FAILED: Outcome.FAIL,
        AppState.CANCELLED: Outcome.CANCELLED,
        AppState.UNKNOWN: Outcome.UNKNOWN,
    }
)

#: The status string used for an app the scheduler no longer knows (``Runner.status`` -> None).
VANISHED_STATUS = "VANISHED"


def outcome_for(state: AppState | str | None) -> Outcome:
    """Returns the outcome for an app state.

    Args:
        state: an :py:class:`AppState`, its name (``"RUNNING"``), or ``None`` / ``"VANISHED"``
            for an app the scheduler does not know any more

    Raises:
        ValueError: ``state`` is a string that names no AppState
    """
    if state is None or state == VANISHED_STATUS:
        return Outcome.VANISHED
    if isinstance(state, str) and not isinstance(state, AppState):
        try:
            state = AppState[state]
        except KeyError:
            valid = ", ".join([s.name for s in AppState] + [VANISHED_STATUS])
            raise ValueError(f"unknown app state {state!r}; valid: {valid}") from None
    return APP_STATE_OUTCOMES[AppState(state)]


def exception_for(
    outcome: Outcome,
    message: str,
    *,
    fail_fast: bool = False,
    skip_on_cancel: bool = False,
) -> BaseException | None:
    """Returns the Airflow exception to raise for a final outcome (``None`` for success/waiting).

    ``UNKNOWN`` here means "unknown for longer than the grace period": callers only ask once the
    :py:class:`UnknownStateClock` has expired.

    Args:
        outcome: the outcome from :py:func:`outcome_for`
        message: the exception message (what happened, with the app handle)
        fail_fast: a FAILED app fails the task without Airflow retries
        skip_on_cancel: a CANCELLED app skips the task instead of failing it
    """
    from torchx_airflow._airflow import (
        AirflowException,
        AirflowFailException,
        AirflowSkipException,
    )

    if outcome in (Outcome.WAIT, Outcome.SUCCESS):
        return None
    if outcome is Outcome.FAIL:
        return AirflowFailException(message) if fail_fast else AirflowException(message)
    if outcome is Outcome.CANCELLED:
        return AirflowSkipException(message) if skip_on_cancel else AirflowFailException(message)
    # UNKNOWN past the grace period, or VANISHED: retryable failures.
    return AirflowException(message)


class UnknownStateClock:
    """Tracks how long an app has been ``UNKNOWN``, unreachable or vanished without interruption.

    Args:
        timeout: grace period in seconds; ``0`` fails at the first UNKNOWN
        clock: monotonic clock (injectable for tests)
        since: start of the current UNKNOWN streak (to resume a streak across pokes)
    """

    def __init__(
        self,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        since: float | None = None,
    ) -> None:
        self.timeout = timeout
        self._clock = clock
        self.since = since

    def observe(self, outcome: Outcome) -> bool:
        """Records an outcome; returns True when the UNKNOWN/VANISHED streak exceeded the grace
        period."""
        if not outcome.in_grace:
            self.since = None
            return False
        now = self._clock()
        if self.since is None:
            self.since = now
        return now - self.since >= self.timeout
