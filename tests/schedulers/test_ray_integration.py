"""The ``ray`` scheduler end to end on a real Ray head on loopback (scripts/services/ray)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.service_helpers import wait_for_app

from torchx_core.schedulers.ray.scheduler import RayScheduler, _parse_app_id
from torchx_core.specs import AppDef, AppState, Role, is_terminal, macros, resource

pytestmark = [pytest.mark.integration, pytest.mark.ray]


class Jobs:
    def __init__(self, sched: RayScheduler, address: str) -> None:
        self.sched = sched
        self.cfg = {"dashboard_address": address}
        self.ids: list[str] = []

    def submit(self, app: AppDef, **cfg: Any) -> str:
        app_id = self.sched.submit(app, {**self.cfg, **cfg})
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, until: Any = is_terminal, timeout: float = 180) -> Any:
        return wait_for_app(self.sched, app_id, until, timeout, interval=0.5)


@pytest.fixture
def jobs(ray_head: str) -> Iterator[Jobs]:
    j = Jobs(RayScheduler("it", poll_interval=0.5), ray_head)
    yield j
    for app_id in j.ids:
        j.sched.delete(app_id)  # stops what still runs, then removes the job
    assert all(j.sched.describe(a) is None for a in j.ids)


def sh(name: str, script: str, replicas: int = 1, cpu: int = 1, **kwargs: Any) -> Role:
    return Role(
        name=name,
        image="",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=resource(cpu=cpu, memMB=64),
        **kwargs,
    )


def _procs_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_multi_role_success_per_replica_logs_and_list(jobs: Jobs) -> None:
    app = AppDef(
        "hello",
        roles=[
            sh("worker", f'echo "worker {macros.replica_id} rank0=$TORCHX_RANK0_HOST"', replicas=2),
            sh("ps", "echo ps up; echo ps err >&2"),
        ],
    )
    app_id = jobs.submit(app)
    desc = jobs.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("worker", 2), ("ps", 1)]
    assert list(jobs.sched.log_iter(app_id, "worker", 1)) == ["worker 1 rank0=127.0.0.1\n"]
    assert list(jobs.sched.log_iter(app_id, "ps", 0)) == ["ps up\n", "ps err\n"]
    assert list(jobs.sched.log_iter(app_id, "ps", 0, regex="err")) == ["ps err\n"]
    listed = {a.app_id: a.state for a in jobs.sched.list(jobs.cfg)}
    assert listed[app_id] == AppState.SUCCEEDED


def test_failure_exit_code(jobs: Jobs) -> None:
    app_id = jobs.submit(AppDef("fail", roles=[sh("w", "echo about to fail; exit 3")]))
    desc = jobs.wait(app_id)
    assert desc.state == AppState.FAILED
    assert "exit code 3" in desc.msg
    assert list(jobs.sched.log_iter(app_id, "w", 0)) == ["about to fail\n"]


def test_cancel_stops_the_job_and_its_processes(jobs: Jobs) -> None:
    marker = "6011"  # unique sleep argument to find the replica processes
    app_id = jobs.submit(
        AppDef("sleeper", roles=[sh("w", f"echo started; sleep {marker}", replicas=2)])
    )
    jobs.wait(app_id, until=lambda s: s == AppState.RUNNING)
    deadline = time.monotonic() + 120
    while len(_procs_with(f"sleep\0{marker}")) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(_procs_with(f"sleep\0{marker}")) == 2
    jobs.sched.cancel(app_id)
    assert jobs.wait(app_id).state == AppState.CANCELLED
    deadline = time.monotonic() + 30
    while _procs_with(f"sleep\0{marker}") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _procs_with(f"sleep\0{marker}") == []


def test_working_dir_is_uploaded(jobs: Jobs, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import sys\nprint('from job.py', sys.argv[1])\n")
    role = Role(
        name="py",
        image="",
        entrypoint="python",
        args=["job.py", macros.replica_id],
        resource=resource(cpu=1, memMB=64),
    )
    app_id = jobs.submit(AppDef("wd", roles=[role]), working_dir=str(tmp_path))
    assert jobs.wait(app_id).state == AppState.SUCCEEDED
    assert list(jobs.sched.log_iter(app_id, "py", 0)) == ["from job.py 0\n"]


def test_unplaceable_replicas_fail_after_placement_timeout(jobs: Jobs) -> None:
    app_id = jobs.submit(AppDef("huge", roles=[sh("w", "echo never", cpu=64)]), placement_timeout=3)
    desc = jobs.wait(app_id)
    assert desc.state == AppState.FAILED
    assert "exit code 2" in desc.msg


def test_describe_many_one_list_jobs_call(jobs: Jobs) -> None:
    ok = jobs.submit(AppDef("many-ok", roles=[sh("w", "echo ok")]))
    bad = jobs.submit(AppDef("many-bad", roles=[sh("w", "exit 4")]))
    jobs.wait(ok)
    jobs.wait(bad)
    address = _parse_app_id(ok)[0]
    client = jobs.sched._client(address)
    calls: list[str] = []
    real = client.list_jobs

    def list_jobs(*args: Any, **kwargs: Any) -> Any:
        calls.append("list_jobs")
        return real(*args, **kwargs)

    client.list_jobs = list_jobs
    try:
        unknown = f"{address}-nosuchjob"
        many = jobs.sched.describe_many([ok, bad, unknown])
    finally:
        client.list_jobs = real
    assert calls == ["list_jobs"]
    assert many[unknown] is None
    assert many[ok].state == AppState.SUCCEEDED and many[bad].state == AppState.FAILED
    assert many[ok] == jobs.sched.describe(ok) and many[bad] == jobs.sched.describe(bad)
