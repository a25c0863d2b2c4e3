"""The one table that maps a TorchX :class:`AppState` to what the Prefect task does next.

This module imports nothing from Prefect, so the mapping can be read and tested on its own.

========================  ==========================  =========================================
AppState                  :class:`Outcome`            Prefect task
========================  ==========================  =========================================
UNSUBMITTED               ``WAIT``                    keep polling (task RUNNING)
SUBMITTED                 ``WAIT``                    keep polling
PENDING                   ``WAIT``                    keep polling
RUNNING                   ``WAIT``                    keep polling, stream logs
SUCCEEDED                 ``COMPLETE``                return an ``AppResult`` -> Completed
FAILED                    ``FAIL``                    raise ``AppFailedError`` -> Failed
                                                      (task retries apply)
CANCELLED                 ``CANCEL``                  return ``Cancelled(...)`` -> Cancelled
                                                      (never retried)
UNKNOWN                   ``UNKNOWN``                 keep polling; after
                                                      ``unknown_state_timeout`` raise
                                                      ``AppUnknownStateError`` -> Failed
``None`` (app vanished)   ``UNKNOWN``                 same grace, then ``AppVanishedError``
========================  ==========================  =========================================
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from torchx_core.specs import AppState

__all__ = ["APP_STATE_OUTCOMES", "Outcome", "outcome_for"]


class Outcome(str, enum.Enum):
    """What the launcher task does after reading one app status."""

    WAIT = "wait"
    """The app is on its way or running: poll again."""
    COMPLETE = "complete"
    """The app succeeded: the task completes with an ``AppResult``."""
    FAIL = "fail"
    """The app failed: the task raises ``AppFailedError`` (retries apply)."""
    CANCEL = "cancel"
    """The app was cancelled: the task ends Cancelled (no retry)."""
    UNKNOWN = "unknown"
    """The state cannot be read right now: poll, fail after the grace period."""


APP_STATE_OUTCOMES: Mapping[AppState, Outcome] = MappingProxyType(
    {
        AppState.UNSUBMITTED: Outcome.WAIT,
        AppState.SUBMITTED: Outcome.WAIT,
        AppState.PENDING: Outcome.WAIT,
        AppState.RUNNING: Outcome.WAIT,
        AppState.SUCCEEDED: Outcome.COMPLETE,
        AppState.FAILED: Outcome.FAIL,
        AppState.CANCELLED: Outcome.CANCEL,
        AppState.UNKNOWN: Outcome.UNKNOWN,
    }
)
"""AppState -> :class:`Outcome`; covers every AppState member (checked by a test)."""


def outcome_for(state: AppState | None) -> Outcome:
    """Returns the task outcome for an app state.

    Args:
        state: the app's state, or ``None`` when the scheduler no longer knows the app

    Returns:
        The outcome; a vanished app (``None``) is treated like ``UNKNOWN`` (poll, then fail).

    >>> outcome_for(AppState.RUNNING)
    <Outcome.WAIT: 'wait'>
    >>> outcome_for(None)
    <Outcome.UNKNOWN: 'unknown'>
    """
    if state is None:
        return Outcome.UNKNOWN
    return APP_STATE_OUTCOMES[AppState(state)]
