"""Test helpers for the ``ray`` scheduler: a stateful fake ``JobSubmissionClient`` and the real
Ray head fixture.

``FakeJobClient`` keeps a job table (submit/get_job_info/list_jobs/get_job_logs/stop_job/
delete_job) and records the working directory's files at submit time, the way Ray uploads them.

``ray_head`` (session) starts a Ray head on loopback with ``scripts/services/ray/start.sh`` and
stops it at session end (by PID) if this session started it. Every Ray client in the session runs
with ``RAY_AUTH_MODE=disabled``, like the head.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pytest

from support.service_helpers import run_service_script, start_service

RAY_DASHBOARD = "127.0.0.1:8265"


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """The dashboard address (host:port) of a real Ray head started by our script."""
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    started = start_service("ray", "ray.pid")
    yield RAY_DASHBOARD
    if started:
        run_service_script("ray", "stop.sh")
    if previous is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = previous


class FakeStatus(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


@dataclass
class FakeJob:
    submission_id: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    files: dict[str, str]
    status: FakeStatus = FakeStatus.PENDING
    message: str = ""
    logs: str = ""


@dataclass
class FakeJobClient:
    """A small stateful stand-in for ``ray.job_submission.JobSubmissionClient``."""

    jobs: dict[str, FakeJob] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    fail_submit: str = ""

    def submit_job(
        self,
        *,
        entrypoint: str,
        submission_id: str,
        runtime_env: dict[str, Any],
        metadata: dict[str, str],
    ) -> str:
        if self.fail_submit:
            raise RuntimeError(self.fail_submit)
        wd = runtime_env.get("working_dir")
        files: dict[str, str] = {}
        if wd:
            for root, _, names in os.walk(wd):
                for n in names:
                    path = os.path.join(root, n)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(path, wd)] = f.read()
        self.jobs[submission_id] = FakeJob(
            submission_id, entrypoint, dict(runtime_env), dict(metadata), files
        )
        return submission_id

    def get_job_info(self, job_id: str) -> FakeJob:
        if job_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {job_id} does not exist.")
        return self.jobs[job_id]

    def list_jobs(self) -> list[FakeJob]:
        return list(self.jobs.values())

    def get_job_logs(self, job_id: str) -> str:
        return self.get_job_info(job_id).logs

    def stop_job(self, job_id: str) -> bool:
        self.stopped.append(job_id)
        self.jobs[job_id].status = FakeStatus.STOPPED
        return True

    def delete_job(self, job_id: str) -> bool:
        self.deleted.append(job_id)
        del self.jobs[job_id]
        return True
