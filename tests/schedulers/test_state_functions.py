"""Per-backend state functions beyond their tables: cancel markers and missing fields."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from torchx_core.schedulers.aws.batch import CANCEL_REASON, _job_state
from torchx_core.schedulers.docker.scheduler import CANCELLED_SUFFIX, _replica_state
from torchx_core.specs import AppState as S


def container(status: str, cancelled: bool = False, state: dict[str, Any] | None = None) -> Any:
    name = "app-w-0" + (CANCELLED_SUFFIX if cancelled else "")
    attrs = {} if state is None else {"State": state}
    return SimpleNamespace(name=name, status=status, attrs=attrs)


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        (container("exited", state={"ExitCode": 0}), S.SUCCEEDED),
        (container("exited", state={"ExitCode": 2}), S.FAILED),
        (container("exited", state={}), S.FAILED),  # no exit code known: not a success
        (container("exited"), S.FAILED),
        (container("exited", cancelled=True, state={"ExitCode": 0}), S.CANCELLED),
        (container("dead", cancelled=True), S.CANCELLED),
        (container("created", cancelled=True), S.CANCELLED),
        (container("running", cancelled=True), S.RUNNING),  # still being stopped
        (container("dead"), S.FAILED),
        (container("created"), S.PENDING),
        (container("weird"), S.UNKNOWN),
    ],
)
def test_docker_replica_state(c: Any, expected: S) -> None:
    assert _replica_state(c) == expected


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"status": "FAILED", "statusReason": f"{CANCEL_REASON} (by me)"}, S.CANCELLED),
        ({"status": "FAILED", "statusReason": "Essential container exited"}, S.FAILED),
        ({"status": "FAILED"}, S.FAILED),
        ({"status": "SUCCEEDED", "statusReason": CANCEL_REASON}, S.SUCCEEDED),
        ({}, S.UNKNOWN),
        ({"status": "NEW"}, S.UNKNOWN),
    ],
)
def test_aws_batch_job_state(job: dict[str, Any], expected: S) -> None:
    assert _job_state(job) == expected
