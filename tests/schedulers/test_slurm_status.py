"""Unit tests of the Slurm status helpers: exit codes, state lists, names, per-replica states."""

from __future__ import annotations

import logging

import pytest

from torchx_core.schedulers.slurm._status import (
    SlurmJobRecord,
    _exit,
    _number,
    _replica_state,
    _sacct_exit,
    _state_of,
    appstate_from_slurm_state,
    describe_from_records,
    role_and_replica,
)
from torchx_core.specs import AppState


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        ("5", 5),
        ({"set": True, "number": 5}, 5),
        ({"set": False, "number": 5}, None),
        ({"set": True, "infinite": True, "number": 5}, None),
        (None, None),
        (True, None),
        ("x", None),
    ],
)
def test_number_reads_every_spelling(value: object, expected: int | None) -> None:
    assert _number(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, (0, None)),
        (3 << 8, (3, None)),  # exited 3
        (9, (0, 9)),  # killed by SIGKILL
        (0x80 | 11, (0, 11)),  # SIGSEGV with the core-dump bit
        (None, (None, None)),
        ({"status": ["EXITED"], "return_code": {"set": True, "number": 3}}, (3, None)),
        ({"status": ["SIGNALED"], "return_code": 0, "signal": {"id": 15, "name": "TERM"}}, (0, 15)),
        ({"return_code": 0, "signal": {"signal_id": 9}}, (0, 9)),
        ({"return_code": 2, "signal": "weird"}, (2, None)),
    ],
)
def test_exit_from_wait_status_or_exit_code_object(value: object, expected: tuple) -> None:
    assert _exit(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:0", (0, None)),
        ("3:0", (3, None)),
        ("0:15", (0, 15)),
        ("2:9", (2, 9)),
        ("", (None, None)),
        ("x:1", (None, None)),
    ],
)
def test_sacct_exit_code_signal_pairs(text: str, expected: tuple) -> None:
    assert _sacct_exit(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("running", "RUNNING"),
        (["COMPLETED"], "COMPLETED"),
        (["REQUEUED", "PENDING"], "REQUEUED"),
        (["RECONFIG_FAIL_FLAG_X", "failed"], "FAILED"),  # flags first, then the base state
        (["NOT_A_STATE"], "NOT_A_STATE"),
        ([], "UNKNOWN"),
        (None, "UNKNOWN"),
    ],
)
def test_state_of_finds_the_base_state_among_flags(value: object, expected: str) -> None:
    assert _state_of(value) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("trainer-1", ("trainer", 1)),
        ("my-role-12", ("my-role", 12)),
        ("trainer", ("trainer", 0)),
        ("trainer-x", ("trainer-x", 0)),
        ("-3", ("", 3)),
    ],
)
def test_role_and_replica(name: str, expected: tuple[str, int]) -> None:
    assert role_and_replica(name) == expected


def test_unknown_state_is_logged_with_the_value(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert appstate_from_slurm_state("SHINY") == AppState.UNKNOWN
    assert caplog.messages == ["unknown Slurm job state 'SHINY'; reporting UNKNOWN"]


def _rec(state: str, derived: int | None = 0, name: str = "w-0", offset: int = 0) -> SlurmJobRecord:
    return SlurmJobRecord(
        job_id=str(10 + offset),
        app_id="10",
        offset=offset,
        name=name,
        state=state,
        derived_exit_code=derived,
    )


@pytest.mark.parametrize(
    ("app", "state", "derived", "steps_failed", "expected"),
    [
        # a cancelled app: components not yet ended count as cancelled
        (AppState.CANCELLED, "RUNNING", 0, False, AppState.CANCELLED),
        (AppState.CANCELLED, "PENDING", 0, False, AppState.CANCELLED),
        (AppState.CANCELLED, "COMPLETED", 0, False, AppState.SUCCEEDED),
        # a running component stays running whatever its steps did so far
        (AppState.RUNNING, "RUNNING", 1, True, AppState.RUNNING),
        (AppState.FAILED, "CANCELLED", 1, True, AppState.CANCELLED),
        # ended: the steps' exit codes tell the replicas apart
        (AppState.FAILED, "FAILED", 3, True, AppState.FAILED),
        (AppState.FAILED, "FAILED", 0, True, AppState.SUCCEEDED),
        (AppState.FAILED, "FAILED", 0, False, AppState.FAILED),
        (AppState.FAILED, "FAILED", None, True, AppState.FAILED),
        (AppState.SUCCEEDED, "COMPLETED", 2, True, AppState.FAILED),
        (AppState.SUCCEEDED, "COMPLETED", 0, True, AppState.SUCCEEDED),
    ],
)
def test_replica_state(
    app: AppState, state: str, derived: int | None, steps_failed: bool, expected: AppState
) -> None:
    assert _replica_state(app, _rec(state, derived), steps_failed) == expected


def test_describe_names_roles_and_replicas_from_component_names() -> None:
    d = describe_from_records(
        "10",
        [
            _rec("RUNNING", name="trainer-0"),
            _rec("RUNNING", name="trainer-1", offset=1),
            _rec("PENDING", name="ps-0", offset=2),
        ],
    )
    assert [(r.role, [(x.id, x.role, x.state) for x in r.replicas]) for r in d.roles_statuses] == [
        ("trainer", [(0, "trainer", AppState.RUNNING), (1, "trainer", AppState.RUNNING)]),
        ("ps", [(0, "ps", AppState.PENDING)]),
    ]


def test_squeue_errors_with_exit_0_are_an_error_not_no_jobs() -> None:
    import json

    from torchx_core.schedulers.api import SchedulerError
    from torchx_core.schedulers.slurm._status import parse_squeue_json

    out = {
        "jobs": [],
        "errors": [
            {
                "description": "Unable to contact slurm controller (connect failure)",
                "error": "Unable to contact slurm controller (connect failure)",
                "error_number": 1007,
                "source": "slurm_load_jobs",
            }
        ],
        "warnings": [],
    }
    with pytest.raises(
        SchedulerError,
        match=r"reported errors: Unable to contact slurm controller \(connect failure\)"
        r" \(error 1007\)",
    ):
        parse_squeue_json(json.dumps(out))
    assert parse_squeue_json(json.dumps({"jobs": [], "errors": [], "warnings": ["w"]})) == []
