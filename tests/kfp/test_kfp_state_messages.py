"""The KFP adapter's state helpers say what was given and what is valid."""

from __future__ import annotations

import pytest

from torchx_kfp.errors import UnknownKfpStateError
from torchx_kfp.states import app_state_from_kfp, step_outcome


def test_unknown_kfp_state_lists_the_known_ones() -> None:
    with pytest.raises(UnknownKfpStateError) as e:
        app_state_from_kfp("nope")
    assert str(e.value) == (
        "Unknown KFP state 'nope'. Known states: RUNTIME_STATE_UNSPECIFIED, PENDING, PAUSED,"
        " RUNNING,"
        " CANCELING, SUCCEEDED, SKIPPED, FAILED, CANCELED, CANCELLED, SUCCESS, FAILURE."
    )


def test_unknown_phase_lists_the_lifecycle_phases() -> None:
    with pytest.raises(UnknownKfpStateError) as e:
        step_outcome("nope")  # type: ignore[arg-type]
    assert str(e.value) == (
        "'nope' is not a lifecycle phase; valid: waiting, succeeded, failed, cancelled, unknown,"
        " vanished"
    )
