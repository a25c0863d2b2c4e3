"""The Phase -> Prefect outcome table, checked over every Phase against a literal table."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchx_core.runner.lifecycle import Observation, Phase
from torchx_prefect.states import PHASE_OUTCOMES, Outcome, outcome_for

EXPECTED = {
    Phase.WAITING: "wait",
    Phase.SUCCEEDED: "complete",
    Phase.FAILED: "fail",
    Phase.CANCELLED: "cancel",
    Phase.UNKNOWN: "wait",
    Phase.VANISHED: "wait",
}


def test_table_covers_every_phase() -> None:
    assert set(PHASE_OUTCOMES) == set(Phase)


@pytest.mark.parametrize("phase", list(Phase))
def test_outcome_of_each_phase_within_the_grace(phase: Phase) -> None:
    assert outcome_for(Observation(phase, None, expired=False)).value == EXPECTED[phase]


@pytest.mark.parametrize("phase", [Phase.UNKNOWN, Phase.VANISHED])
def test_an_expired_grace_fails(phase: Phase) -> None:
    assert outcome_for(Observation(phase, None, expired=True)) is Outcome.FAIL


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        PHASE_OUTCOMES[Phase.WAITING] = Outcome.FAIL  # type: ignore[index]


def test_states_and_errors_import_without_prefect() -> None:
    code = (
        "import sys, torchx_prefect, torchx_prefect.states, torchx_prefect.errors;"
        "bad = [m for m in sys.modules if m.split('.')[0] in"
        " ('prefect','airflow','kfp','kubernetes','boto3','docker','ray')];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_adapters_error_names_are_the_lifecycles() -> None:
    from torchx_core.runner import lifecycle
    from torchx_prefect import errors

    assert errors.AppFailedError is lifecycle.AppFailedError
    assert errors.AppVanishedError is errors.AppUnknownStateError is lifecycle.AppVanishedError
    assert errors.AppCancelledError is lifecycle.AppCancelledError
    assert errors.InvalidTaskArgumentError is lifecycle.InvalidTaskArgumentError
    assert errors.AppRunError is lifecycle.AppFailedError
