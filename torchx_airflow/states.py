"""The one table mapping an app's lifecycle :py:class:`~torchx_core.runner.lifecycle.Phase` to
an Airflow outcome (operator, trigger and sensor all read it here):

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

from torchx_core.runner.lifecycle import Phase, phase_of
from torchx_core.specs import AppState, AppStatus

__all__ = ["ACTIVE_PHASES", "VANISHED_STATUS", "exception_for", "phase_for"]

#: The status string of an app the scheduler no longer knows (``Runner.status`` -> None).
VANISHED_STATUS = "VANISHED"

#: Phases in which a task keeps waiting for (and a retry reattaches to) its app.
ACTIVE_PHASES = frozenset({Phase.WAITING, Phase.UNKNOWN})


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

    if phase in (Phase.WAITING, Phase.SUCCEEDED):
        return None
    if phase is Phase.FAILED:
        return AirflowFailException(message) if fail_fast else AirflowException(message)
    if phase is Phase.CANCELLED:
        return AirflowSkipException(message) if skip_on_cancel else AirflowFailException(message)
    return AirflowException(message)
