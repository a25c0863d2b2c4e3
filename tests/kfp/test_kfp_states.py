"""The KFP adapter's state tables, checked over every member."""

from __future__ import annotations

import enum

import pytest

from torchx_core.runner import Phase
from torchx_core.specs import AppState
from torchx_core.specs.errors import extra_install_hint
from torchx_kfp.errors import UnknownKfpStateError
from torchx_kfp.states import (
    KFP_RUN_STATES,
    STEP_OUTCOMES,
    app_state_from_kfp,
    step_outcome,
)

pytestmark = pytest.mark.kfp

# literal, written independently of the table: what a launcher step does per lifecycle phase
EXPECTED_OUTCOMES = {
    "waiting": "poll",
    "succeeded": "succeed",
    "failed": "fail",
    "cancelled": "fail",
    "unknown": "poll_then_fail",
    "vanished": "poll_then_fail",
}

# kfp_server_api.V2beta1RuntimeState members, kfp.local Status members,
# dsl.PipelineTaskFinalStatus states
EXPECTED_RUN_STATES = {
    "RUNTIME_STATE_UNSPECIFIED": AppState.UNKNOWN,
    "PENDING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "SKIPPED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
    "CANCELING": AppState.RUNNING,
    "CANCELED": AppState.CANCELLED,
    "PAUSED": AppState.PENDING,
    "SUCCESS": AppState.SUCCEEDED,
    "FAILURE": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
}


@pytest.mark.parametrize("phase", list(Phase))
def test_every_phase_has_its_step_outcome(phase: Phase) -> None:
    assert step_outcome(phase).value == EXPECTED_OUTCOMES[phase.value]
    assert step_outcome(phase.value) is STEP_OUTCOMES[phase]  # the str form too


def test_step_outcome_table_is_exactly_the_expected_one() -> None:
    assert {p.value: o.value for p, o in STEP_OUTCOMES.items()} == EXPECTED_OUTCOMES


def test_step_outcome_rejects_non_phases() -> None:
    for bad in ("RUNNING", 3, AppState.RUNNING):
        with pytest.raises(UnknownKfpStateError, match="not a lifecycle phase; valid: waiting"):
            step_outcome(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(EXPECTED_RUN_STATES))
def test_every_kfp_state_maps(name: str) -> None:
    assert app_state_from_kfp(name) is EXPECTED_RUN_STATES[name]
    assert app_state_from_kfp(name.lower()) is EXPECTED_RUN_STATES[name]


def test_kfp_table_is_exactly_the_expected_one() -> None:
    assert dict(KFP_RUN_STATES) == EXPECTED_RUN_STATES


def test_kfp_local_status_enum_maps() -> None:
    from kfp.local import status

    assert {s.name for s in status.Status} <= set(KFP_RUN_STATES)
    assert app_state_from_kfp(status.Status.SUCCESS) is AppState.SUCCEEDED
    assert app_state_from_kfp(status.Status.FAILURE) is AppState.FAILED


def test_kfp_server_runtime_states_are_all_mapped() -> None:
    from kfp_server_api.models.v2beta1_runtime_state import V2beta1RuntimeState

    names = {v for k, v in vars(V2beta1RuntimeState).items() if k.isupper() and isinstance(v, str)}
    assert names, "V2beta1RuntimeState lists no states"
    assert names <= set(KFP_RUN_STATES)


def test_enum_by_value_is_accepted() -> None:
    class Weird(enum.Enum):
        X = "canceled"

    assert app_state_from_kfp(Weird.X) is AppState.CANCELLED


def test_unknown_kfp_state_raises_typed_error_listing_valid_states() -> None:
    with pytest.raises(UnknownKfpStateError, match=r"Known states: .*SUCCEEDED") as info:
        app_state_from_kfp("EXPLODED")
    assert isinstance(info.value, ValueError)


def test_states_module_does_not_import_kfp() -> None:
    import subprocess
    import sys

    code = "import sys, torchx_kfp.states; print('kfp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("installed", [False, True])
def test_missing_kfp_names_the_extra(installed: bool) -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['kfp'] = None\n"  # the module does not import
        + (
            ""
            if installed
            # ... and no kfp distribution is installed either
            else "from torchx_core.specs import _dependencies as d\n"
            "d.installed_version = lambda dist: None\n"
        )
        + "import torchx_kfp\n"
        "try:\n"
        "    torchx_kfp.launch\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingDependencyError")
    if installed:  # never "not installed" for an installed kfp
        assert "kfp 2." in out.stdout and "not installed" not in out.stdout
        assert "pip install --force-reinstall 'kfp>=" in out.stdout
    else:
        assert "is not installed" in out.stdout
        assert extra_install_hint("kfp") in out.stdout
