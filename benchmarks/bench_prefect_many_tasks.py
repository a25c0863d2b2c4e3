"""N concurrent ``run_app`` tasks in one Prefect flow on Slurm: ``squeue`` runs per poll cycle.

Starts (or reuses) a Prefect server (``scripts/services/prefect/start.sh``, port
``PREFECT_PORT``, default 14209) and the Slurm test cluster, then runs one flow whose N async
``run_app`` tasks each launch an app on Slurm, with log streaming on. The apps are submitted held
(``SBATCH_HOLD``: PENDING in the queue, using no node), so the tasks keep watching them: the
watchers' status reads and the log followers' "has it ended?" checks are what is counted, with a
shim ``squeue`` first on PATH. After a warm-up cycle the flow runs for CYCLES poll intervals and is
then cancelled (its tasks cancel their apps).

usage: .venv/bin/python benchmarks/bench_prefect_many_tasks.py [N=100] [CYCLES=3] [POLL_S=5]
       [WARMUP_CYCLES=8]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVICES = REPO / "scripts" / "services"
sys.path.insert(0, str(REPO))


def _start(script: Path, env: dict[str, str]) -> str:
    return subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, check=True, timeout=600
    ).stdout


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    cycles = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    poll = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    work = Path(tempfile.mkdtemp(prefix="bench-prefect-tasks-"))
    port = os.environ.get("PREFECT_PORT", "14209")
    run_dir = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci"))
    was_up = (run_dir / f"prefect-{port}.pid").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_PORT=port, PREFECT_HOME=str(work / "home"))
    url = next(
        x.split("=", 1)[1]
        for x in _start(SERVICES / "prefect" / "start.sh", env).splitlines()
        if x.startswith("PREFECT_API_URL=")
    )
    conf = next(
        x.split("=", 1)[1]
        for x in _start(SERVICES / "slurm" / "start.sh", dict(os.environ)).splitlines()
        if x.startswith("SLURM_CONF=")
    )
    shim = work / "bin"
    shim.mkdir()
    calls = work / "squeue-calls"
    real = subprocess.run(
        ["bash", "-c", "command -v squeue"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (shim / "squeue").write_text(f'#!/bin/sh\necho x >> {calls}\nexec {real} "$@"\n')
    (shim / "squeue").chmod(0o755)
    os.environ.update(
        PREFECT_API_URL=url,
        PREFECT_HOME=str(work / "home"),
        SLURM_CONF=conf,
        SBATCH_HOLD="1",
        PATH=f"{shim}{os.pathsep}{os.environ['PATH']}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    from prefect import flow

    from torchx_core import specs
    from torchx_prefect import run_app

    def count() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    marks: list[int] = []
    startup: list[int] = []

    @flow
    async def many() -> None:
        async def one(i: int) -> None:
            app = specs.AppDef(
                f"many{i}",
                roles=[
                    specs.Role(
                        "r",
                        image=str(work),
                        entrypoint="sleep",
                        args=["3600"],
                        num_replicas=2,
                        resource=specs.Resource(cpu=1, gpu=0, memMB=10),
                    )
                ],
            )
            await run_app(
                app,
                scheduler="slurm",
                cfg={"job_dir": str(work), "time": "10"},
                poll_interval=poll,
                create_artifacts=False,
            )

        tasks = [asyncio.ensure_future(one(i)) for i in range(n)]
        # warm-up: every app submitted (list by name, sbatch, owner), every follower started
        for _ in range(warmup):
            await asyncio.sleep(poll)
            startup.append(count())
        for _ in range(cycles + 1):
            marks.append(count())
            await asyncio.sleep(poll)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    try:
        asyncio.run(many(return_state=True))  # type: ignore[call-overload]
    finally:
        from torchx_core.runner import get_runner
        from torchx_core.specs import is_terminal

        with get_runner(component_defaults={}) as runner:  # nothing held left behind
            for app in runner.list("slurm"):
                if app.name.startswith("many") and not is_terminal(app.state):
                    runner.cancel(app.app_handle)
        if not was_up:
            subprocess.run(
                ["bash", str(SERVICES / "prefect" / "stop.sh")],
                env=env,
                check=False,
                capture_output=True,
            )
    per_cycle = (marks[-1] - marks[0]) / cycles
    print("squeue runs during start-up, cumulative per cycle:", startup)
    print(
        f"{n} run_app tasks (2 replicas each, logs streamed) in one flow on Slurm, poll "
        f"{poll:g} s: {per_cycle:.1f} squeue runs per poll cycle"
    )


if __name__ == "__main__":
    main()
