"""Fixtures for the KFP adapter's real runs: a private local-scheduler root and kfp.local."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kfp_helpers import AWS_TEST_ENV, processes_of

# the shared fake scheduler (a real Runner over it) of the unit tests, and the session fixtures
# of the real dockerd and moto server (started by our scripts, stopped at session end if started)
from support.aws_fixtures import create_batch_queue, moto_server  # noqa: F401
from support.docker_fixtures import docker_engine  # noqa: F401

LOCAL_ROOT_ENV = "TORCHX_LOCAL_ROOT"


def _live_apps() -> list[str]:
    from torchx_core.runner import get_runner
    from torchx_core.specs import is_terminal

    with get_runner() as runner:
        return [a.app_handle for a in runner.list("local_cwd") if not is_terminal(a.state)]


def _cancel_all(handles: list[str]) -> None:
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        for handle in handles:
            runner.cancel(handle)


def _leftover_processes(root: Path, marker: str, timeout: float = 10.0) -> list[int]:
    """Processes of this root still alive after ``timeout`` seconds (a finished app's
    supervisor may take a moment to exit)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = processes_of(root, marker)
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.05)


@pytest.fixture
def local_apps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Points the local scheduler (and kfp.local's subprocesses) at a fresh root for this test.

    After the test, every app in the root must be finished and no process may be left: no
    replica, no supervisor, no kfp.local step. Anything still running is cancelled (apps) or
    killed by pid (processes), and the test fails.
    """
    root = tmp_path / "local-root"
    root.mkdir()
    marker = f"{LOCAL_ROOT_ENV}={root}"
    monkeypatch.setenv(LOCAL_ROOT_ENV, str(root))
    yield root
    problems = []
    leftover_apps = _live_apps()
    if leftover_apps:
        _cancel_all(leftover_apps)
        problems.append(f"apps left running after the test (cancelled now): {leftover_apps}")
    leftover = _leftover_processes(root, marker)
    for pid in leftover:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if leftover:
        problems.append(f"processes left behind by the test (killed now): {leftover}")
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture
def kfp_local(local_apps: Path, tmp_path: Path) -> Iterator[Path]:
    """kfp.local with the SubprocessRunner on the current interpreter (no venv, no pip)."""
    import kfp.local

    pipeline_root = tmp_path / "pipeline-root"
    kfp.local.init(
        runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root)
    )
    yield pipeline_root


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def moto_batch_queue(
    moto_server: str,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, Any]]:
    """A fresh Batch job queue on the moto server (the session's), and the AWS environment the
    launcher step (a kfp.local subprocess) reads."""
    import boto3

    for key, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(key, value)
    clients = {n: boto3.client(n) for n in ("batch", "iam", "ec2")}
    unique = f"kfp-{uuid.uuid4().hex[:8]}"
    batch = clients["batch"]
    create_batch_queue(
        clients["iam"], clients["ec2"], batch, unique,
        role=unique, profile=unique, env=unique, max_vcpus=4,
    )  # fmt: skip
    yield unique, batch
    for job in batch.list_jobs(jobQueue=unique, jobStatus="RUNNING")["jobSummaryList"]:
        batch.terminate_job(jobId=job["jobId"], reason="test cleanup")
