"""The Airflow adapter's state helpers: default exception choice and the unknown-state message."""

from __future__ import annotations

import pytest

from torchx_airflow.states import Phase, exception_for, phase_for


def test_exception_defaults_let_airflow_retry_and_fail_on_cancel() -> None:
    from torchx_airflow._airflow import AirflowException, AirflowFailException

    failed = exception_for(Phase.FAILED, "m")
    assert type(failed) is AirflowException  # retried by Airflow unless fail_fast
    cancelled = exception_for(Phase.CANCELLED, "m")
    assert type(cancelled) is AirflowFailException  # failed, not skipped, unless skip_on_cancel


def test_unknown_state_name_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError) as e:
        phase_for("NOPE")
    assert str(e.value) == (
        "unknown app state 'NOPE'; valid: UNSUBMITTED, SUBMITTED, PENDING, RUNNING, SUCCEEDED,"
        " FAILED, CANCELLED, UNKNOWN, VANISHED"
    )
