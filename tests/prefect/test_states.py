"""The AppState -> Prefect outcome table, checked over every AppState member."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchx_core.specs import AppState, is_terminal
from torchx_prefect.states import APP_STATE_OUTCOMES, Outcome, outcome_for

EXPECTED = {
    AppState.UNSUBMITTED: Outcome.WAIT,
    AppState.SUBMITTED: Outcome.WAIT,
    AppState.PENDING: Outcome.WAIT,
    AppState.RUNNING: Outcome.WAIT,
    AppState.SUCCEEDED: Outcome.COMPLETE,
    AppState.FAILED: Outcome.FAIL,
    AppState.CANCELLED: Outcome.CANCEL,
    AppState.UNKNOWN: Outcome.UNKNOWN,
}


def test_table_covers_every_app_state() -> None:
    assert set(APP_STATE_OUTCOMES) == set(AppState)


@pytest.mark.parametrize("state", list(AppState))
def test_outcome_of_each_state(state: AppState) -> None:
    assert outcome_for(state) is EXPECTED[state]


@pytest.mark.parametrize("state", list(AppState))
def test_terminal_states_never_wait_and_live_states_never_end(state: AppState) -> None:
    ends = outcome_for(state) in (Outcome.COMPLETE, Outcome.FAIL, Outcome.CANCEL)
    assert ends == is_terminal(state)


def test_vanished_app_is_treated_as_unknown() -> None:
    assert outcome_for(None) is Outcome.UNKNOWN


def test_outcome_accepts_the_int_value_of_a_state() -> None:
    assert outcome_for(AppState.FAILED.value) is Outcome.FAIL  # type: ignore[arg-type]


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        APP_STATE_OUTCOMES[AppState.RUNNING] = Outcome.FAIL  # type: ignore[index]


def test_states_and_errors_import_without_prefect() -> None:
    code = (
        "import sys, torchx_prefect, torchx_prefect.states, torchx_prefect.errors;"
        "bad = [m for m in sys.modules if m.split('.')[0] in"
        " ('prefect','airflow','kfp','kubernetes','boto3','docker','ray')];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
