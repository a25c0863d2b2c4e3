"""The one table mapping an app's lifecycle :py:class:`~torchx_core.runner.lifecycle.Phase` to
an Airflow outcome (operator, trigger and sensor all read it here; :data:`PHASE_OUTCOMES` is
the table in code, :func:`exception_for` the exception it means):

==============================  ==========================================================
Phase                           Airflow effect
==============================  ==========================================================
``WAITING``                     keep waiting (task running, deferred or up_for_reschedule)
``SUCCEEDED``                   the task succeeds and returns the status dict
``FAILED``                      ``AirflowException`` (retryable), or
                                ``AirflowFailException`` with ``fail_fast``
``CANCELLED``                   ``AirflowFailException``, or ``AirflowSkipException`` with
                                ``skip_on_cancel``
``UNKNOWN`` / unreadable        keep waiting; ``AirflowException`` once the grace period
                                (``unknown_state_timeout``) is over
``VANISHED`` (status None)      keep waiting; ``AirflowException`` once the grace period is
                                over (a retry submits the app anew)
==============================  ==========================================================

The grace clock, the reattach policy and the failure report are the shared lifecycle's
(:py:mod:`torchx_core.runner.lifecycle`). The Airflow exception classes are imported only when an
exception is built, so importing this module stays cheap.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from torchx_core.runner.lifecycle import Phase, phase_of
from torchx_core.specs import AppState, AppStatus

__all__ = [
    "ACTIVE_PHASES",
    "PHASE_OUTCOMES",
    "VANISHED_STATUS",
    "Outcome",
    "exception_for",
    "outcome_for",
    "phase_for",
]

#: The status string of an app the scheduler no longer knows (``Runner.status`` -> None).
VANISHED_STATUS = "VANISHED"

#: Phases in which a task keeps waiting for (and a retry reattaches to) its app.
ACTIVE_PHASES = frozenset({Phase.WAITING, Phase.UNKNOWN})


class Outcome(str, enum.Enum):
    """What an Airflow task does once its app's phase is final."""

    CONTINUE = "continue"
    """No failure: keep waiting (WAITING) or succeed (SUCCEEDED)."""
    RETRY = "retry"
    """``AirflowException``: the task fails and Airflow's retries apply."""
    FAIL = "fail"
    """``AirflowFailException``: the task fails without retries."""
    SKIP = "skip"
    """``AirflowSkipException``: the task is skipped."""


PHASE_OUTCOMES: Mapping[Phase, Outcome] = MappingProxyType(
    {
        Phase.WAITING: Outcome.CONTINUE,
        Phase.SUCCEEDED: Outcome.CONTINUE,
        Phase.FAILED: Outcome.RETRY,  # FAIL with fail_fast
        Phase.CANCELLED: Outcome.FAIL,  # SKIP with skip_on_cancel
        Phase.UNKNOWN: Outcome.RETRY,  # past the grace period
        Phase.VANISHED: Outcome.RETRY,  # past the grace period
    }
)
"""Phase -> :class:`Outcome` by default; covers every Phase (checked by a test)."""


def phase_for(state: AppState | str | None) -> Phase:
    """The phase of an app state given as an :py:class:`AppState`, its name, or ``None`` /
    ``"VANISHED"`` for an app the scheduler does not know any more.

    Raises:
        ValueError: ``state`` is a string that names no AppState
    """
    if state is None or state == VANISHED_STATUS:
        return Phase.VANISHED
    if isinstance(state, str) and not isinstance(state, AppState):
        try:
            state = AppState[state]
        except KeyError:
            valid = ", ".join([s.name for s in AppState] + [VANISHED_STATUS])
            raise ValueError(f"unknown app state {state!r}; valid: {valid}") from None
    return phase_of(AppStatus(AppState(state)))


def outcome_for(phase: Phase, *, fail_fast: bool = False, skip_on_cancel: bool = False) -> Outcome:
    """The table's outcome for a final ``phase``, with the task's two switches applied.

    >>> outcome_for(Phase.CANCELLED, skip_on_cancel=True).value
    'skip'
    """
    if phase is Phase.FAILED and fail_fast:
        return Outcome.FAIL
    if phase is Phase.CANCELLED and skip_on_cancel:
        return Outcome.SKIP
    return PHASE_OUTCOMES[phase]


def exception_for(
    phase: Phase, message: str, *, fail_fast: bool = False, skip_on_cancel: bool = False
) -> BaseException | None:
    """The Airflow exception a task raises when its app ended in ``phase`` (None: no failure).

    ``UNKNOWN``/``VANISHED`` mean "for longer than the grace period": callers ask only once the
    lifecycle's grace clock expired.

    Args:
        phase: the app's final phase
        message: the exception message (what happened, with the app handle)
        fail_fast: a FAILED app fails the task without Airflow retries
        skip_on_cancel: a CANCELLED app skips the task instead of failing it
    """
    from torchx_airflow._airflow import (
        AirflowException,
        AirflowFailException,
        AirflowSkipException,
    )

    outcome = outcome_for(phase, fail_fast=fail_fast, skip_on_cancel=skip_on_cancel)
    exceptions: dict[Outcome, type[BaseException]] = {
        Outcome.RETRY: AirflowException,
        Outcome.FAIL: AirflowFailException,
        Outcome.SKIP: AirflowSkipException,
    }
    return None if outcome is Outcome.CONTINUE else exceptions[outcome](message)
