"""The one table that maps the lifecycle's neutral :class:`Phase` to what the Prefect task does.

This module imports nothing from Prefect, so the mapping can be read and tested on its own.

==================  ==================  ============================================================
Phase               :class:`Outcome`    Prefect task
==================  ==================  ============================================================
WAITING             ``WAIT``            keep polling (task RUNNING), stream logs
SUCCEEDED           ``COMPLETE``        return an ``AppResult`` -> Completed
FAILED              ``FAIL``            raise ``AppFailedError`` -> Failed (task retries apply)
CANCELLED           ``CANCEL``          return ``Cancelled(...)`` -> Cancelled (never retried)
UNKNOWN             ``WAIT``            keep polling; past ``unknown_state_timeout``: ``FAIL``
                                        (``AppVanishedError``; the app is cancelled if still owned)
VANISHED            ``WAIT``            same grace, then ``FAIL`` (``AppVanishedError``)
==================  ==================  ============================================================
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from torchx_core.runner.lifecycle import Observation, Phase

__all__ = ["PHASE_OUTCOMES", "Outcome", "outcome_for"]


class Outcome(str, enum.Enum):
    """What the launcher task does after one observation of its app."""

    WAIT = "wait"
    """The app is on its way, running, or unknown within the grace period: poll again."""
    COMPLETE = "complete"
    """The app succeeded: the task completes with an ``AppResult``."""
    FAIL = "fail"
    """The app failed or stayed unknown too long: the task raises (retries apply)."""
    CANCEL = "cancel"
    """The app was cancelled by someone else: the task ends Cancelled (no retry)."""


PHASE_OUTCOMES: Mapping[Phase, Outcome] = MappingProxyType(
    {
        Phase.WAITING: Outcome.WAIT,
        Phase.SUCCEEDED: Outcome.COMPLETE,
        Phase.FAILED: Outcome.FAIL,
        Phase.CANCELLED: Outcome.CANCEL,
        Phase.UNKNOWN: Outcome.WAIT,
        Phase.VANISHED: Outcome.WAIT,
    }
)
"""Phase -> :class:`Outcome` within the grace period; covers every Phase (checked by a test)."""


def outcome_for(obs: Observation) -> Outcome:
    """The task outcome for one observation: the table, except ``FAIL`` once the grace ran out.

    >>> from torchx_core.runner.lifecycle import Observation, Phase
    >>> outcome_for(Observation(Phase.VANISHED, None, expired=False)).value
    'wait'
    >>> outcome_for(Observation(Phase.VANISHED, None, expired=True)).value
    'fail'
    """
    if obs.expired:
        return Outcome.FAIL
    return PHASE_OUTCOMES[Phase(obs.phase)]
