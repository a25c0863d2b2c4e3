"""State mapping between TorchX apps and Kubeflow Pipelines steps and runs.

Two tables live here, and nowhere else in the adapter:

* :data:`STEP_OUTCOMES` maps every neutral phase of the shared lifecycle
  (:class:`torchx_core.runner.Phase`) of an app launched by the launcher step to what the step
  does next (keep polling, succeed, fail, or keep polling for a grace period and then fail).
* :data:`KFP_RUN_STATES` maps the states KFP reports for runs and tasks (the KFP API's
  ``V2beta1RuntimeState``, ``kfp.local``'s ``SUCCESS``/``FAILURE`` and
  ``dsl.PipelineTaskFinalStatus.state``) to an ``AppState``, for reading runs back.

A KFP step has no "cancelled" outcome of its own, so an app that ends CANCELLED fails the step.
``SKIPPED`` (a task that KFP did not run because of a condition) reads back as ``SUCCEEDED``:
nothing failed.

This module imports nothing from kfp.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from torchx_core.runner.lifecycle import Phase
from torchx_core.specs import AppState
from torchx_kfp.errors import UnknownKfpStateError

__all__ = [
    "KFP_RUN_STATES",
    "STEP_OUTCOMES",
    "StepOutcome",
    "app_state_from_kfp",
    "step_outcome",
]


class StepOutcome(str, enum.Enum):
    """What the launcher step does when its app is in a given phase."""

    POLL = "poll"
    """The app is not finished: keep polling (and streaming logs)."""
    SUCCEED = "succeed"
    """The app succeeded: the step returns its outputs and succeeds."""
    FAIL = "fail"
    """The app failed or was cancelled: the step raises and fails (KFP has no task-level
    "cancelled")."""
    POLL_THEN_FAIL = "poll_then_fail"
    """Unknown or vanished: keep polling, fail once ``unknown_state_timeout`` has passed."""

    def __str__(self) -> str:
        return self.value


STEP_OUTCOMES: Mapping[Phase, StepOutcome] = MappingProxyType(
    {
        Phase.WAITING: StepOutcome.POLL,
        Phase.SUCCEEDED: StepOutcome.SUCCEED,
        Phase.FAILED: StepOutcome.FAIL,
        Phase.CANCELLED: StepOutcome.FAIL,
        Phase.UNKNOWN: StepOutcome.POLL_THEN_FAIL,
        Phase.VANISHED: StepOutcome.POLL_THEN_FAIL,
    }
)
"""The app's neutral phase (``torchx_core.runner.Phase``) -> launcher step outcome."""


KFP_RUN_STATES: Mapping[str, AppState] = MappingProxyType(
    {
        # kfp_server_api V2beta1RuntimeState (runs and tasks on a KFP backend)
        "RUNTIME_STATE_UNSPECIFIED": AppState.UNKNOWN,
        "PENDING": AppState.PENDING,
        "PAUSED": AppState.PENDING,
        "RUNNING": AppState.RUNNING,
        "CANCELING": AppState.RUNNING,
        "SUCCEEDED": AppState.SUCCEEDED,
        "SKIPPED": AppState.SUCCEEDED,
        "FAILED": AppState.FAILED,
        "CANCELED": AppState.CANCELLED,
        # dsl.PipelineTaskFinalStatus.state (exit handlers) spells it with two Ls
        "CANCELLED": AppState.CANCELLED,
        # kfp.local task and pipeline statuses
        "SUCCESS": AppState.SUCCEEDED,
        "FAILURE": AppState.FAILED,
    }
)
"""KFP run/task state name -> AppState."""


def step_outcome(phase: Phase | str) -> StepOutcome:
    """Returns what the launcher step does for an app in ``phase``.

    >>> step_outcome(Phase.VANISHED)
    <StepOutcome.POLL_THEN_FAIL: 'poll_then_fail'>

    Raises:
        UnknownKfpStateError: ``phase`` is not a :class:`~torchx_core.runner.Phase`
    """
    try:
        return STEP_OUTCOMES[Phase(phase)]
    except (ValueError, KeyError) as e:
        raise UnknownKfpStateError(
            f"{phase!r} is not a lifecycle phase; valid: {', '.join(p.value for p in Phase)}"
        ) from e


def app_state_from_kfp(state: object) -> AppState:
    """Maps a KFP run or task state to an AppState.

    Accepts the state name (``"SUCCEEDED"``, case-insensitive) or any enum whose ``name`` or
    ``value`` is such a name (``kfp.local``'s ``Status``, the KFP API's runtime state).

    Args:
        state: the KFP state

    Raises:
        UnknownKfpStateError: the state is not a known KFP state

    >>> app_state_from_kfp("CANCELED")
    CANCELLED (6)
    >>> app_state_from_kfp("success")
    SUCCEEDED (4)
    """
    candidates: list[str] = []
    if isinstance(state, enum.Enum):
        candidates += [str(state.value), state.name]
    else:
        candidates.append(str(state))
    for name in candidates:
        found = KFP_RUN_STATES.get(name.strip().upper())
        if found is not None:
            return found
    raise UnknownKfpStateError(
        f"Unknown KFP state {state!r}. Known states: {', '.join(KFP_RUN_STATES)}."
    )
