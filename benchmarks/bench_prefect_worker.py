"""Latency from "flow run scheduled" to "flow code starts": the torchx worker vs Prefect's own.

Starts (or reuses) the Prefect server of ``scripts/services/prefect/start.sh`` (port
``PREFECT_PORT``, default 14200) and the Slurm test cluster, creates three work pools and starts
one worker per pool (all polling every second):

* ``process``: Prefect's process worker (the flow run is a subprocess of the worker);
* ``torchx`` on ``local_cwd``: the flow run is a TorchX app on the local scheduler;
* ``torchx`` on ``slurm``: the flow run is a TorchX app in a Slurm job.

For each, R flow runs of a flow that writes the time its code starts; prints the median and best
latency from the flow run's creation (scheduled for now) to that time. Workers and the server
(if started here) are stopped by PID at the end.

usage: .venv/bin/python benchmarks/bench_prefect_worker.py [R=5]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SERVICES = REPO / "scripts" / "services"
PREFECT = Path(sys.executable).parent / "prefect"

FLOW = """
import time
from pathlib import Path
from prefect import flow

@flow
def started(marker: str) -> None:
    Path(marker).write_text(repr(time.time()))
"""


def _start(script: Path, env: dict[str, str]) -> str:
    out = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, check=True, timeout=600
    ).stdout
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    work = Path(tempfile.mkdtemp(prefix="bench-prefect-worker-"))
    port = os.environ.get("PREFECT_PORT", "14200")
    run_dir = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci"))
    server_pid = run_dir / f"prefect-{port}.pid"
    was_up = server_pid.exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_PORT=port, PREFECT_HOME=str(work / "home"))
    url = next(
        x.split("=", 1)[1]
        for x in _start(SERVICES / "prefect" / "start.sh", env).splitlines()
        if x.startswith("PREFECT_API_URL=")
    )
    slurm = _start(SERVICES / "slurm" / "start.sh", dict(os.environ))
    conf = next(x.split("=", 1)[1] for x in slurm.splitlines() if x.startswith("SLURM_CONF="))
    flows = work / "flows"
    flows.mkdir()
    (flows / "bench_flow.py").write_text(FLOW)
    env.update(
        PREFECT_API_URL=url,
        PREFECT_WORKER_QUERY_SECONDS="1",
        SLURM_CONF=conf,
        TORCHX_LOCAL_ROOT=str(work / "torchx"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    os.environ.update(
        {k: env[k] for k in ("PREFECT_API_URL", "PREFECT_HOME", "SLURM_CONF", "TORCHX_LOCAL_ROOT")}
    )
    from prefect import get_client

    workers: list[subprocess.Popen[bytes]] = []
    cases = [
        ("process worker (Prefect)", "process", {}),
        ("torchx worker, local_cwd", "torchx", {"scheduler": "local_cwd"}),
        (
            "torchx worker, slurm",
            "torchx",
            {"scheduler": "slurm", "memMB": 200, "cfg": {"job_dir": str(work), "time": "5"}},
        ),
    ]
    try:
        results: dict[str, list[float]] = {}
        with get_client(sync_client=True) as client:
            flow_id = client.create_flow_from_name("started")
            for label, kind, variables in cases:
                pool = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
                subprocess.run(
                    [sys.executable, str(PREFECT), "work-pool", "create", pool, "--type", kind],
                    env=env,
                    check=True,
                    capture_output=True,
                )
                log = open(work / f"{pool}.log", "wb")  # noqa: SIM115 - closed with the worker
                workers.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            str(PREFECT),
                            "worker",
                            "start",
                            "--pool",
                            pool,
                            "--type",
                            kind,
                        ],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                deployment = client.create_deployment(
                    flow_id=flow_id,
                    name=pool,
                    work_pool_name=pool,
                    entrypoint="bench_flow.py:started",
                    job_variables=variables,
                    pull_steps=[
                        {
                            "prefect.deployments.steps.set_working_directory": {
                                "directory": str(flows)
                            }
                        }
                    ],
                )
                lat = []
                for i in range(rounds + 1):  # the first run warms the worker up: not counted
                    marker = work / f"{pool}-{i}.txt"
                    t0 = time.time()
                    run = client.create_flow_run_from_deployment(
                        deployment, parameters={"marker": str(marker)}
                    )
                    deadline = time.monotonic() + 300
                    while not marker.exists() or not marker.read_text():
                        if time.monotonic() > deadline:
                            raise SystemExit(f"{label}: flow run {run.id} did not start in 300 s")
                        time.sleep(0.05)
                    if i:
                        lat.append(float(marker.read_text()) - t0)
                    _wait_final(client, run.id)
                results[label] = lat
        print(
            f"latency from flow run created (scheduled now) to flow code start, {rounds} runs;"
            " every worker polls each 1 s"
        )
        print("| worker | median | best |")
        print("| --- | --- | --- |")
        for label, lat in results.items():
            print(f"| {label} | {statistics.median(lat):.2f} s | {min(lat):.2f} s |")
    finally:
        for w in workers:
            os.killpg(w.pid, signal.SIGTERM)
            w.wait(60)
        if not was_up:
            subprocess.run(
                ["bash", str(SERVICES / "prefect" / "stop.sh")],
                env=env,
                check=False,
                capture_output=True,
            )


def _wait_final(client: Any, run_id: Any) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = client.read_flow_run(run_id).state
        if state is not None and state.is_final():
            return
        time.sleep(0.2)


if __name__ == "__main__":
    main()
