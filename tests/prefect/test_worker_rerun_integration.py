"""The ``torchx`` worker after a worker restart and on a forced re-run, on a real Prefect server.

A real ``prefect worker start --type torchx`` process (stopped by PID) in a pool of its own;
apps on ``local_cwd``. No Slurm: these are about the worker's bookkeeping, not the scheduler.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect_fixtures import PrefectAPI
from prefect_helpers import wait_no_app_processes, wait_terminal
from worker_pool import (
    WAIT,
    Pool,
    app_of,
    apps_named,
    make_pool,
    wait_file,
    wait_handle,
    wait_state,
)

from torchx_core.specs import AppState

pytestmark = [pytest.mark.integration, pytest.mark.prefect]

#: A worker killed without notice is seen offline by the server after 3 missed heartbeats (5 s
#: each here) plus one pass of its foreman service (15 s): this bounds the take-back.
TAKE_BACK_WAIT = 120.0


@pytest.fixture(scope="module")
def pool(prefect_server: PrefectAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    with make_pool(prefect_server, tmp_path_factory.mktemp("torchx-worker-rerun")) as p:
        yield p


def kill_and_restart_worker(pool: Pool) -> None:
    """SIGKILLs the worker (no clean stop, as a crashed or replaced worker) and starts a new one
    under a new name (Prefect's default: a random name per worker process)."""
    os.killpg(pool.worker.pid, signal.SIGKILL)
    pool.worker.proc.wait(30)  # type: ignore[union-attr]
    pool.start_worker()


def cancel_and_expect_the_app_cancelled(pool: Pool, run_id: Any, handle: str) -> None:
    """Cancels the flow run whose worker was replaced: the new worker takes its app back and
    cancels it."""
    from prefect import get_client
    from prefect.states import Cancelling

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Cancelling(), force=True)
    run = wait_state(pool, run_id, "Cancelled", timeout=TAKE_BACK_WAIT)
    assert handle in (run.state.message or "")
    assert wait_terminal(handle, WAIT) == AppState.CANCELLED
    assert wait_no_app_processes(pool.root) == []
    assert f"took back app {handle}" in pool.worker.output(200000)


def test_cancelling_after_a_worker_restart_cancels_the_app(pool: Pool, tmp_path: Path) -> None:
    """Prefect's base worker cancels only flow runs that never started: without taking the app
    back, the run stayed Cancelling and its app ran on."""

    started = tmp_path / "started"
    run_id = pool.run(pool.deploy("sleeper"), started=str(started))
    wait_file(started, pool)
    handle = wait_handle(pool, run_id)
    assert handle and handle.startswith("local_cwd://")
    kill_and_restart_worker(pool)
    cancel_and_expect_the_app_cancelled(pool, run_id, handle)


def test_a_flow_run_scheduled_again_after_its_app_succeeded_runs_again(
    pool: Pool, tmp_path: Path
) -> None:
    """Forced back to Scheduled after it Completed, the flow run runs again as a new app (the
    old code found the SUCCEEDED app, reused it, and the run stayed Pending)."""
    from prefect import get_client
    from prefect.states import Scheduled

    marker = tmp_path / "ran"
    run_id = pool.run(pool.deploy("hello"), marker=str(marker))
    first = wait_state(pool, run_id, "Completed")
    assert wait_terminal(first.infrastructure_pid, WAIT) == AppState.SUCCEEDED
    first_stamp = marker.read_text()
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Scheduled(), force=True)
    again = wait_state(pool, run_id, "Completed", timeout=120)
    assert again.infrastructure_pid != first.infrastructure_pid
    assert wait_terminal(again.infrastructure_pid, WAIT) == AppState.SUCCEEDED
    assert marker.read_text() != first_stamp  # the flow's code ran a second time
    assert [a.app_handle for a in apps_named("local_cwd", app_of(first))] == [
        first.infrastructure_pid
    ]
    assert wait_no_app_processes(pool.root) == []
