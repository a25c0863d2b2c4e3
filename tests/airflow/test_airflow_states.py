"""The Phase -> Airflow outcome table, checked against a literal table written independently."""

from __future__ import annotations

import pytest

from torchx_airflow._airflow import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
)
from torchx_airflow.states import (
    ACTIVE_PHASES,
    PHASE_OUTCOMES,
    VANISHED_STATUS,
    Outcome,
    exception_for,
    outcome_for,
    phase_for,
)
from torchx_core.runner.lifecycle import Phase
from torchx_core.specs import AppState

#: AppState (by name) -> phase, written out by hand
PHASES = {
    "UNSUBMITTED": Phase.WAITING,
    "SUBMITTED": Phase.WAITING,
    "PENDING": Phase.WAITING,
    "RUNNING": Phase.WAITING,
    "SUCCEEDED": Phase.SUCCEEDED,
    "FAILED": Phase.FAILED,
    "CANCELLED": Phase.CANCELLED,
    "UNKNOWN": Phase.UNKNOWN,
    "VANISHED": Phase.VANISHED,
}

#: (phase, fail_fast, skip_on_cancel) -> the exception class raised (None: no failure)
EXCEPTIONS = {
    (Phase.WAITING, False, False): None,
    (Phase.SUCCEEDED, False, False): None,
    (Phase.FAILED, False, False): AirflowException,
    (Phase.FAILED, True, False): AirflowFailException,
    (Phase.FAILED, False, True): AirflowException,
    (Phase.CANCELLED, False, False): AirflowFailException,
    (Phase.CANCELLED, True, False): AirflowFailException,
    (Phase.CANCELLED, False, True): AirflowSkipException,
    (Phase.UNKNOWN, False, False): AirflowException,
    (Phase.UNKNOWN, True, True): AirflowException,
    (Phase.VANISHED, False, False): AirflowException,
    (Phase.VANISHED, True, True): AirflowException,
}


def test_every_app_state_has_a_phase() -> None:
    assert set(PHASES) == {s.name for s in AppState} | {VANISHED_STATUS}


@pytest.mark.parametrize(("name", "phase"), list(PHASES.items()))
def test_phase_per_state(name: str, phase: Phase) -> None:
    assert phase_for(name) is phase
    if name != VANISHED_STATUS:
        assert phase_for(AppState[name]) is phase
    else:
        assert phase_for(None) is phase


def test_unknown_state_name_is_a_value_error_listing_valid_names() -> None:
    with pytest.raises(ValueError, match=r"RUNNING.*VANISHED"):
        phase_for("RUNING")


@pytest.mark.parametrize(("key", "raised"), list(EXCEPTIONS.items()))
def test_exception_per_phase(key: tuple[Phase, bool, bool], raised: type | None) -> None:
    phase, fail_fast, skip_on_cancel = key
    exc = exception_for(phase, "msg", fail_fast=fail_fast, skip_on_cancel=skip_on_cancel)
    if raised is None:
        assert exc is None
    else:
        assert type(exc) is raised and str(exc) == "msg"


def test_active_phases_are_the_reattachable_ones() -> None:
    assert {Phase.WAITING, Phase.UNKNOWN} == ACTIVE_PHASES


def test_the_outcome_table_covers_every_phase() -> None:
    assert set(PHASE_OUTCOMES) == set(Phase)


@pytest.mark.parametrize(("key", "raised"), list(EXCEPTIONS.items()))
def test_outcome_for_names_the_exception_raised(
    key: tuple[Phase, bool, bool], raised: type[BaseException] | None
) -> None:
    phase, fail_fast, skip_on_cancel = key
    outcome = outcome_for(phase, fail_fast=fail_fast, skip_on_cancel=skip_on_cancel)
    by_outcome = {
        Outcome.CONTINUE: None,
        Outcome.RETRY: AirflowException,
        Outcome.FAIL: AirflowFailException,
        Outcome.SKIP: AirflowSkipException,
    }
    assert by_outcome[outcome] is raised
