"""The ``torchx`` Prefect worker on a real Prefect server: flow runs as TorchX apps.

A work pool of type ``torchx`` created with Prefect's CLI (the worker type is found through our
``prefect.collections`` entry point), deployments of ``worker_flows.py``, and a real
``prefect worker start --type torchx`` process (stopped by PID). Flow runs are created through
the API and run as apps on ``local_cwd`` and on the real Slurm cluster of the test services.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect_fixtures import PrefectAPI
from prefect_helpers import flow_run_logs, wait_no_app_processes, wait_terminal
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)
from worker_pool import (
    WAIT,
    Pool,
    app_of,
    apps_named,
    flow_run,
    make_pool,
    wait_file,
    wait_handle,
    wait_state,
)

from torchx_core.specs import AppState

pytestmark = [pytest.mark.integration, pytest.mark.prefect]


@pytest.fixture(scope="module")
def pool(
    prefect_server: PrefectAPI,
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pool]:
    with make_pool(prefect_server, tmp_path_factory.mktemp("torchx-worker")) as p:
        yield p


def test_pool_type_is_torchx_with_our_job_template(pool: Pool) -> None:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        wp = client.read_work_pool(pool.name)
    assert wp.type == "torchx"
    props = wp.base_job_template["variables"]["properties"]
    assert {
        "scheduler",
        "cfg",
        "image",
        "h",
        "cpu",
        "gpu",
        "memMB",
        "replicas",
        "env",
        "max_retries",
        "command",
    } <= set(props)
    assert props["scheduler"]["default"] == "local_cwd"


def test_flow_run_runs_as_a_local_app_and_logs_reach_the_server(pool: Pool) -> None:
    run_id = pool.run(pool.deploy("hello"))
    run = wait_state(pool, run_id, "Completed")
    # the app handle is the flow run's infrastructure id, and the app succeeded
    handle = run.infrastructure_pid
    assert handle and handle.startswith("local_cwd://")
    # (the flow run is Completed a moment before its process exits)
    assert wait_terminal(handle, WAIT) == AppState.SUCCEEDED
    assert [a.app_handle for a in apps_named("local_cwd", app_of(run))] == [handle]
    app_id = handle.rsplit("/", 1)[1]
    logs = flow_run_logs(run_id, f"hello from app {app_id}")
    assert any(f"hello from app {app_id} on no slurm" in m for m in logs)
    # the API key/URL reach the app through its environment, not its printed output
    assert "PREFECT_API_URL" not in pool.worker.output(20000)


def test_replica_output_reaches_the_worker_log_and_the_flow_run_logs(pool: Pool) -> None:
    """What the app prints (plain print, no Prefect logger) is in the worker's own log and in
    the server's logs of the flow run, at Prefect's default logging level."""
    run_id = pool.run(pool.deploy("printer"), lines=30)
    run = wait_state(pool, run_id, "Completed")
    assert wait_terminal(run.infrastructure_pid, WAIT) == AppState.SUCCEEDED
    wanted = [f"printed line {i} of 30" for i in range(1, 31)]
    logs = flow_run_logs(run_id, *wanted)
    missing = [w for w in wanted if not any(m.endswith(w) for m in logs)]
    assert missing == [], f"not in the flow run's logs: {missing}"
    deadline = time.monotonic() + WAIT
    while [w for w in wanted if w not in pool.worker.output(400000)]:
        assert time.monotonic() < deadline, f"not in the worker's log:\n{pool.worker.output()}"
        time.sleep(0.5)


def test_cancelling_the_flow_run_cancels_the_app(pool: Pool, tmp_path: Path) -> None:
    from prefect import get_client
    from prefect.states import Cancelling

    started = tmp_path / "started"
    run_id = pool.run(pool.deploy("sleeper"), started=str(started))
    wait_file(started, pool)
    handle = wait_handle(pool, run_id)
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Cancelling(), force=True)
    wait_state(pool, run_id, "Cancelled")
    assert wait_no_app_processes(pool.root) == []
    assert wait_terminal(handle, WAIT) == AppState.CANCELLED


def test_a_failing_flow_fails_with_its_own_error(pool: Pool) -> None:
    run_id = pool.run(pool.deploy("failing"))
    run = wait_state(pool, run_id, "Failed")
    assert "boom from inside the flow" in (run.state.message or "") or any(
        "boom from inside the flow" in m for m in flow_run_logs(run_id, "boom")
    )
    assert run.state.name == "Failed"  # not turned into Crashed by the worker


def test_an_app_killed_from_outside_crashes_the_flow_run(pool: Pool, tmp_path: Path) -> None:
    started = tmp_path / "started"
    run_id = pool.run(pool.deploy("sleeper"), started=str(started))
    wait_file(started, pool)
    handle = wait_handle(pool, run_id)
    cancelled = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "cancel", handle],
        env=pool.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cancelled.returncode == 0, cancelled.stderr
    run = wait_state(pool, run_id, "Crashed", "Cancelled")
    assert handle in (run.state.message or "")
    assert wait_no_app_processes(pool.root) == []


@pytest.mark.parametrize(
    ("job_variables", "words"),
    [
        ({"cfg": {"grace_period": "soon"}}, "InvalidRunConfigException"),
        ({"scheduler": "no_such_scheduler"}, "UnknownSchedulerException"),
        ({"cfg": {"grace_periodd": 1.0}}, "Did you mean: 'grace_period'?"),
        ({"poll_interval": 0}, "poll_interval must be a finite number of seconds > 0, got 0"),
        ({"poll_interval": -1}, "poll_interval must be a finite number of seconds > 0, got -1"),
    ],
    ids=[
        "run_option_type",
        "unknown_scheduler",
        "run_option_misspelt",
        "poll_interval_zero",
        "poll_interval_negative",
    ],
)
def test_a_configuration_error_fails_the_flow_run_without_an_app(
    pool: Pool, job_variables: dict[str, Any], words: str
) -> None:
    """A permanent error (is_permanent_error) ends the flow run Failed (final) with the error,
    not Crashed like an infrastructure blip; no app is submitted."""
    run_id = pool.run(pool.deploy("hello", **job_variables))
    run = wait_state(pool, run_id, "Failed")
    assert words in (run.state.message or "") and "configuration error" in run.state.message
    assert apps_named("local_cwd", app_of(run)) == []


def test_worker_killed_and_restarted_submits_no_second_app(pool: Pool, tmp_path: Path) -> None:
    started = tmp_path / "started"
    run_id = pool.run(pool.deploy("sleeper"), started=str(started), seconds=3)
    wait_file(started, pool)
    run = flow_run(run_id)
    os.killpg(pool.worker.pid, signal.SIGKILL)  # the worker dies while the app runs
    pool.worker.proc.wait(30)  # type: ignore[union-attr]
    pool.start_worker()
    run = wait_state(pool, run_id, "Completed")
    assert wait_terminal(run.infrastructure_pid, WAIT) == AppState.SUCCEEDED
    apps = apps_named("local_cwd", app_of(run))
    assert len(apps) == 1 and apps[0].state == AppState.SUCCEEDED


def test_flow_run_runs_inside_a_slurm_job(pool: Pool, tmp_path: Path) -> None:
    job_dir = tmp_path / "jobs"
    job_dir.mkdir()
    deployment = pool.deploy(
        "hello", scheduler="slurm", memMB=200, cfg={"job_dir": str(job_dir), "time": "10"}
    )
    run_id = pool.run(deployment)
    run = wait_state(pool, run_id, "Completed")
    handle = run.infrastructure_pid
    assert handle and handle.startswith("slurm://")
    assert wait_terminal(handle, WAIT) == AppState.SUCCEEDED
    job_id = handle.rsplit("/", 1)[1]
    # the flow-run process ran inside that Slurm job and reached the API on loopback
    logs = flow_run_logs(run_id, "hello from app")
    assert any(f"on {job_id}" in m for m in logs), logs


def test_cancelling_a_flow_run_on_slurm_scancels_its_job(pool: Pool, tmp_path: Path) -> None:
    from prefect import get_client
    from prefect.states import Cancelling

    job_dir = tmp_path / "jobs"
    job_dir.mkdir()
    started = tmp_path / "started"
    deployment = pool.deploy(
        "sleeper", scheduler="slurm", memMB=200, cfg={"job_dir": str(job_dir), "time": "10"}
    )
    run_id = pool.run(deployment, started=str(started))
    wait_file(started, pool)
    handle = wait_handle(pool, run_id)
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Cancelling(), force=True)
    wait_state(pool, run_id, "Cancelled")
    job_id = handle.rsplit("/", 1)[1]
    deadline = time.monotonic() + WAIT
    while True:  # scancel seen: Slurm itself reports the job CANCELLED
        out = subprocess.run(
            ["sacct", "-j", job_id, "-X", "-n", "-o", "State"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if "CANCELLED" in out or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "CANCELLED" in out, out
    # slurmd stops the job's processes after sacct says CANCELLED: wait for that, bounded
    pid = int(started.read_text())
    deadline = time.monotonic() + WAIT
    while process_alive(pid):
        assert time.monotonic() < deadline, f"the flow-run process {pid} outlived scancel"
        time.sleep(0.2)


def process_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
