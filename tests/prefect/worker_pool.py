"""A ``torchx`` work pool on a real Prefect server, with a real ``prefect worker start`` process.

Shared by the worker's integration modules: :func:`make_pool` creates the pool with Prefect's CLI
and starts a worker (stopped by PID at the end); :class:`Pool` deploys ``worker_flows.py`` flows
and starts flow runs; the ``wait_*`` helpers are bounded and fail early when the worker died.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect_fixtures import PrefectAPI, ServedProcess

from torchx_core.runner import app_name, get_runner

HERE = Path(__file__).resolve().parent
PREFECT = Path(sys.executable).parent / "prefect"
WAIT = 300.0


@dataclass
class Pool:
    name: str
    root: Path
    env: dict[str, str]
    worker: ServedProcess
    work: Path

    def deploy(self, flow_name: str, **job_variables: Any) -> Any:
        """A deployment of ``worker_flows.py:<flow_name>`` in this pool; returns its id."""
        from prefect import get_client

        with get_client(sync_client=True) as client:
            flow_id = client.create_flow_from_name(flow_name)
            return client.create_deployment(
                flow_id=flow_id,
                name=f"{flow_name}-{uuid.uuid4().hex[:6]}",
                work_pool_name=self.name,
                entrypoint=f"worker_flows.py:{flow_name}",
                job_variables=job_variables,
                pull_steps=[
                    {"prefect.deployments.steps.set_working_directory": {"directory": str(HERE)}}
                ],
            )

    def run(self, deployment_id: Any, **parameters: Any) -> Any:
        from prefect import get_client

        with get_client(sync_client=True) as client:
            return client.create_flow_run_from_deployment(deployment_id, parameters=parameters).id

    def start_worker(self) -> None:
        self.worker = ServedProcess(
            PREFECT,
            self.env,
            self.work / f"worker-{time.time_ns()}.log",
            args=[
                "worker",
                "start",
                "--pool",
                self.name,
                "--type",
                "torchx",
                "--prefetch-seconds",
                "5",
            ],
        ).start()


def flow_run(run_id: Any) -> Any:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(run_id)


def wait_state(pool: Pool, run_id: Any, *names: str, timeout: float = WAIT) -> Any:
    """Waits (bounded) until the flow run's state is one of ``names``; fails early if the
    worker died or the run reached another final state."""
    deadline = time.monotonic() + timeout
    while True:
        run = flow_run(run_id)
        state = run.state
        if state is not None and state.name in names:
            return run
        if state is not None and state.is_final() and state.name not in names:
            raise AssertionError(
                f"flow run ended {state.name}: {state.message}\n{pool.worker.output()}"
            )
        if not pool.worker.alive():
            raise AssertionError(f"the worker exited:\n{pool.worker.output()}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"flow run still {state and state.name} after {timeout}s:\n{pool.worker.output()}"
            )
        time.sleep(0.5)


def wait_handle(pool: Pool, run_id: Any, timeout: float = WAIT) -> str:
    """The flow run's app handle: Prefect records it (the infrastructure id) with an API call of
    its own after the worker reported it, so the app may be running a moment before that."""
    deadline = time.monotonic() + timeout
    while "://" not in (handle := flow_run(run_id).infrastructure_pid or ""):
        if time.monotonic() > deadline or not pool.worker.alive():
            raise AssertionError(f"no app handle after {timeout}s:\n{pool.worker.output()}")
        time.sleep(0.2)
    return handle


def wait_file(path: Path, pool: Pool, timeout: float = WAIT) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not written after {timeout}s:\n{pool.worker.output()}")
        time.sleep(0.2)
    return path.read_text()


def apps_named(scheduler: str, name: str) -> list[Any]:
    with get_runner(component_defaults={}) as runner:
        return [a for a in runner.list(scheduler) if a.name == name]


def app_of(run: Any) -> str:
    """The app name the worker gives a flow run (one scheme: the lifecycle's app_name)."""
    return app_name(f"prefect-{run.name}", ("prefect-flow-run", str(run.id)))


@contextlib.contextmanager
def make_pool(prefect_server: PrefectAPI, work: Path) -> Iterator[Pool]:
    """A new ``torchx`` work pool with one worker (polling each second, heartbeat each 5 s),
    apps on ``local_cwd`` under ``work/torchx-local``; the worker is stopped at the end."""
    root = work / "torchx-local"
    root.mkdir()
    env = {
        **os.environ,
        **prefect_server.env,
        "TORCHX_LOCAL_ROOT": str(root),
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_HEARTBEAT_SECONDS": "5",
        "PYTHONFAULTHANDLER": "1",  # a worker that hangs can be made to print its threads
    }
    name = f"torchx-{uuid.uuid4().hex[:6]}"
    created = subprocess.run(
        [sys.executable, str(PREFECT), "work-pool", "create", name, "--type", "torchx"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    p = Pool(name, root, env, ServedProcess(PREFECT, env, work / "unused.log"), work)
    p.start_worker()
    os.environ["TORCHX_LOCAL_ROOT"] = str(root)
    try:
        yield p
    finally:
        p.worker.stop()
        os.environ.pop("TORCHX_LOCAL_ROOT", None)
