"""Many watchers in one process: scheduler calls and CPU per poll cycle, shared vs per app.

N apps are watched from ONE asyncio event loop, the way Airflow's triggerer drives deferred
tasks, for a few poll cycles, two ways side by side:

* ``triggers``: N ``TorchXTrigger`` objects of our Airflow provider, their ``run()`` coroutines
  driven by one event loop (as the triggerer does). They read through the app lifecycle's shared,
  batched status (``torchx_core.runner.status_watch``).
* ``per-app``: N coroutines each calling ``Runner.status(handle)`` in a worker thread every poll
  (what TorchX's trigger and a naive watcher do: one scheduler call per app and poll).

Printed per mode: scheduler calls per poll cycle (``squeue`` runs for slurm, ``DescribeJobs``
requests for aws_batch, status reads for local), and the CPU time the watching process (plus the
commands it ran) used per cycle, as % of one core at the poll interval.

Backends (each started by the repository's own scripts, reused when running):

* ``slurm``: N apps on the real test cluster (``scripts/services/slurm/start.sh``), submitted
  held (``SBATCH_HOLD``): they stay PENDING in the queue, which changes nothing for ``squeue``,
  and leave the nodes to others.
* ``aws_batch``: N jobs on the moto server (``scripts/services/moto/start.sh``).
* ``local``: N apps on the local scheduler (one supervisor + one ``sleep`` per app).

usage: .venv/bin/python benchmarks/bench_watchers.py slurm|aws_batch|local [N=200] [CYCLES=4]
       [POLL_S=5]
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from torchx_core import specs
from torchx_core.runner import get_runner, status_watch

REPO = Path(__file__).resolve().parent.parent
logging.getLogger("botocore").setLevel(logging.WARNING)

SERVICES = REPO / "scripts" / "services"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# -- backends: submit N long apps, count scheduler calls ---------------------------------------


class Backend:
    scheduler = ""
    cfg: ClassVar[dict[str, Any]] = {}
    unit = "calls"

    def start(self) -> None: ...

    def calls(self) -> int:
        raise NotImplementedError

    def app(self) -> specs.AppDef:
        return specs.AppDef(
            "watch",
            roles=[
                specs.Role(
                    "r",
                    image="/tmp",
                    entrypoint="sleep",
                    args=["3600"],
                    resource=specs.Resource(cpu=1, gpu=0, memMB=10),
                )
            ],
        )


class Slurm(Backend):
    scheduler, unit = "slurm", "squeue runs"

    def start(self) -> None:
        out = subprocess.run(
            ["bash", str(SERVICES / "slurm" / "start.sh")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        os.environ["SLURM_CONF"] = next(
            x.split("=", 1)[1] for x in out.splitlines() if x.startswith("SLURM_CONF=")
        )
        # count squeue runs with a shim first on PATH (the watchers run it as a subprocess)
        self.shim = Path(tempfile.mkdtemp(prefix="bench-squeue-"))
        self.log = self.shim / "calls"
        real = subprocess.run(
            ["bash", "-c", "command -v squeue"], capture_output=True, text=True, check=True
        ).stdout.strip()
        (self.shim / "squeue").write_text(f'#!/bin/sh\necho x >> {self.log}\nexec {real} "$@"\n')
        (self.shim / "squeue").chmod(0o755)
        os.environ["PATH"] = f"{self.shim}{os.pathsep}{os.environ['PATH']}"
        # held jobs (SBATCH_HOLD): PENDING in squeue like a busy cluster's queue, using no node
        os.environ["SBATCH_HOLD"] = "1"
        self.job_dir = tempfile.mkdtemp(prefix="bench-slurm-")
        self.cfg = {"job_dir": self.job_dir, "time": "10"}

    def calls(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


class AwsBatch(Backend):
    scheduler, unit = "aws_batch", "DescribeJobs requests"

    def start(self) -> None:
        subprocess.run(
            ["bash", str(SERVICES / "moto" / "start.sh")], check=True, capture_output=True
        )
        port = os.environ.get("MOTO_PORT", "5055")
        for k, v in {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            os.environ[k] = v
        import boto3
        import botocore.client

        self.queue = _moto_queue(boto3)
        self.cfg = {"queue": self.queue}
        self.count = 0
        real = botocore.client.BaseClient._make_api_call

        def counting(client: Any, name: str, params: Any) -> Any:
            if name == "DescribeJobs":
                self.count += 1
            return real(client, name, params)

        botocore.client.BaseClient._make_api_call = counting  # type: ignore[method-assign]

    def calls(self) -> int:
        return self.count

    def app(self) -> specs.AppDef:
        app = super().app()
        app.roles[0].image = "busybox:latest"
        return app


def _moto_queue(boto3: Any) -> str:
    """A Batch queue on moto whose jobs do not run containers (status only: we measure calls)."""
    batch = boto3.client("batch")
    iam = boto3.client("iam")
    ec2 = boto3.client("ec2")
    role = iam.create_role(RoleName=f"bench-{time.time_ns()}", AssumeRolePolicyDocument="{}")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName=f"bench-{time.time_ns()}", Description="b", VpcId=vpc)[
        "GroupId"
    ]
    name = f"bench-{time.time_ns()}"
    env = batch.create_compute_environment(
        computeEnvironmentName=name,
        type="UNMANAGED",
        state="DISABLED",
        serviceRole=role["Role"]["Arn"],
    )
    batch.create_job_queue(
        jobQueueName=name,
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env["computeEnvironmentArn"]}],
    )
    del subnet, sg
    return name


class Local(Backend):
    scheduler, unit = "local_cwd", "status reads"

    def start(self) -> None:
        os.environ["TORCHX_LOCAL_ROOT"] = tempfile.mkdtemp(prefix="bench-local-")
        from torchx_core.schedulers.local import scheduler as local_scheduler

        self.count = 0
        cls = local_scheduler.LocalScheduler
        real = cls.describe

        def counting(sched: Any, app_id: str) -> Any:
            self.count += 1
            return real(sched, app_id)

        cls.describe = counting  # type: ignore[method-assign]

    def calls(self) -> int:
        return self.count


BACKENDS: dict[str, Callable[[], Backend]] = {"slurm": Slurm, "aws_batch": AwsBatch, "local": Local}


# -- the two ways of watching ------------------------------------------------------------------


async def watch_with_triggers(
    handles: list[str], poll: float, until: Callable[[int], bool]
) -> None:
    from torchx_airflow.trigger import TorchXTrigger

    triggers = [TorchXTrigger(app_handle=h, poll_interval=poll) for h in handles]
    tasks = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    await _drive(until, poll)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def watch_per_app(handles: list[str], poll: float, until: Callable[[int], bool]) -> None:
    async def one(h: str) -> None:
        runner = get_runner(component_defaults={})
        while True:
            await asyncio.to_thread(runner.status, h)
            await asyncio.sleep(poll)

    tasks = [asyncio.ensure_future(one(h)) for h in handles]
    await _drive(until, poll)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _drive(until: Callable[[int], bool], poll: float) -> None:
    """Lets the watchers run, calling ``until(cycle)`` at the end of every poll cycle."""
    cycle = 0
    while not until(cycle):
        await asyncio.sleep(poll)
        cycle += 1


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "slurm"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    poll = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    backend = BACKENDS[kind]()
    backend.start()
    runner = get_runner(component_defaults={})
    print(f"{kind}: submitting {n} apps ...", flush=True)
    handles = [
        runner.run(backend.app(), scheduler=backend.scheduler, cfg=backend.cfg) for _ in range(n)
    ]
    try:
        print(f"{n} apps watched from one event loop, poll {poll:g} s, {cycles} cycles each way")
        print(
            f"| way | {backend.unit}, first cycle | {backend.unit} per later cycle |"
            " CPU per later cycle | % of one core |"
        )
        print("| --- | --- | --- | --- | --- |")
        for label, way in (
            ("TorchXTrigger x N (shared, batched)", watch_with_triggers),
            ("per app (Runner.status each)", watch_per_app),
        ):
            status_watch.reset()
            marks: list[tuple[int, float]] = []

            def until(cycle: int, marks: list[tuple[int, float]] = marks) -> bool:
                marks.append((backend.calls(), _cpu()))
                return cycle > cycles

            asyncio.run(way(handles, poll, until))
            first = marks[1][0] - marks[0][0]
            calls = (marks[-1][0] - marks[1][0]) / cycles
            cpu = (marks[-1][1] - marks[1][1]) / cycles
            print(
                f"| {label} | {first} | {calls:.1f} | {cpu:.3f} s | {100 * cpu / poll:.1f}% |",
                flush=True,
            )
    finally:
        for h in handles:
            try:
                runner.cancel(h)
            except Exception as e:  # noqa: BLE001 - best effort clean-up, reported
                print(f"cancel {h} failed: {e}", file=sys.stderr)
        runner.close()


if __name__ == "__main__":
    main()
