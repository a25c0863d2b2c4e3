"""The AppState -> Airflow outcome table, checked over every AppState member."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
)

from torchx_airflow.states import (
    APP_STATE_OUTCOMES,
    VANISHED_STATUS,
    Outcome,
    UnknownStateClock,
    exception_for,
    outcome_for,
)
from torchx_core.specs import AppState

EXPECTED = {
    AppState.UNSUBMITTED: Outcome.WAIT,
    AppState.SUBMITTED: Outcome.WAIT,
    AppState.PENDING: Outcome.WAIT,
    AppState.RUNNING: Outcome.WAIT,
    AppState.SUCCEEDED: Outcome.SUCCESS,
    AppState.FAILED: Outcome.FAIL,
    AppState.CANCELLED: Outcome.CANCELLED,
    AppState.UNKNOWN: Outcome.UNKNOWN,
}


def test_table_covers_every_app_state() -> None:
    assert set(APP_STATE_OUTCOMES) == set(AppState)


@pytest.mark.parametrize("state", list(AppState), ids=lambda s: s.name)
def test_outcome_per_state(state: AppState) -> None:
    assert outcome_for(state) is EXPECTED[state]
    assert outcome_for(state.name) is EXPECTED[state]


def test_vanished_app_is_its_own_outcome() -> None:
    assert outcome_for(None) is Outcome.VANISHED
    assert outcome_for(VANISHED_STATUS) is Outcome.VANISHED


def test_unknown_state_name_is_a_value_error_listing_valid_names() -> None:
    with pytest.raises(ValueError, match="RUNNING.*VANISHED"):
        outcome_for("RUNING")


@pytest.mark.parametrize("state", list(AppState), ids=lambda s: s.name)
@pytest.mark.parametrize("fail_fast", [False, True])
@pytest.mark.parametrize("skip_on_cancel", [False, True])
def test_exception_per_state(state: AppState, fail_fast: bool, skip_on_cancel: bool) -> None:
    exc = exception_for(
        outcome_for(state), "msg", fail_fast=fail_fast, skip_on_cancel=skip_on_cancel
    )
    if state in (AppState.SUCCEEDED, AppState.UNSUBMITTED, AppState.SUBMITTED) or state in (
        AppState.PENDING,
        AppState.RUNNING,
    ):
        assert exc is None
    elif state == AppState.FAILED:
        assert type(exc) is (AirflowFailException if fail_fast else AirflowException)
    elif state == AppState.CANCELLED:
        assert type(exc) is (AirflowSkipException if skip_on_cancel else AirflowFailException)
    else:  # UNKNOWN past the grace period: retryable
        assert state == AppState.UNKNOWN
        assert type(exc) is AirflowException
    if exc is not None:
        assert "msg" in str(exc)


def test_vanished_is_retryable_failure() -> None:
    exc = exception_for(Outcome.VANISHED, "gone", fail_fast=True, skip_on_cancel=True)
    assert type(exc) is AirflowException


def test_keeps_waiting_in_grace_and_reattachable() -> None:
    assert {o for o in Outcome if o.keeps_waiting} == {
        Outcome.WAIT,
        Outcome.UNKNOWN,
        Outcome.VANISHED,
    }
    assert {o for o in Outcome if o.in_grace} == {Outcome.UNKNOWN, Outcome.VANISHED}
    assert {o for o in Outcome if o.reattachable} == {Outcome.WAIT, Outcome.UNKNOWN}


def test_unknown_clock_counts_vanished_like_unknown() -> None:
    now = [0.0]
    clock = UnknownStateClock(10, clock=lambda: now[0])
    assert clock.observe(Outcome.VANISHED) is False
    now[0] = 6
    assert clock.observe(Outcome.UNKNOWN) is False  # one streak
    now[0] = 11
    assert clock.observe(Outcome.VANISHED) is True


def test_unknown_clock_counts_only_uninterrupted_streaks() -> None:
    now = [100.0]
    clock = UnknownStateClock(10, clock=lambda: now[0])
    assert clock.observe(Outcome.UNKNOWN) is False
    now[0] = 105
    assert clock.observe(Outcome.UNKNOWN) is False
    assert clock.observe(Outcome.WAIT) is False  # a known state resets the streak
    now[0] = 112
    assert clock.observe(Outcome.UNKNOWN) is False
    now[0] = 122
    assert clock.observe(Outcome.UNKNOWN) is True


def test_unknown_clock_zero_grace_fails_at_first_unknown() -> None:
    assert UnknownStateClock(0).observe(Outcome.UNKNOWN) is True
