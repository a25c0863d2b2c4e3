"""Status of 100 Slurm apps: one batched call vs one call per app, on the real test cluster.

Starts the one-machine cluster with ``scripts/services/slurm/start.sh`` (reusing a running one;
it is stopped again at the end only if this script started it), submits N tiny apps through the
``slurm`` scheduler, waits until they finished, then times

* ``SlurmScheduler.describe_many(ids)``  - one ``squeue --json`` call for all apps, and
* ``[describe(id) for id in ids]``       - one ``squeue`` call per app (what a naive loop does),

and prints both (best and median of R rounds) with the number of Slurm commands each one ran.

usage: .venv/bin/python benchmarks/bench_slurm_status.py [N=100] [R=3]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torchx_core import specs
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, run_command
from torchx_core.specs import is_terminal

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts" / "services" / "slurm"


def _pid_alive(pidfile: Path) -> bool:
    try:
        pid = int(pidfile.read_text().strip())
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def start_cluster() -> bool:
    """Starts (or reuses) the cluster; returns whether this call started it."""
    run_dir = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci")) / "slurm"
    was_running = _pid_alive(run_dir / "slurmctld.pid")  # a stale PID file is not a cluster
    out = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh")], capture_output=True, text=True, check=True
    ).stdout
    conf = next(x.split("=", 1)[1] for x in out.splitlines() if x.startswith("SLURM_CONF="))
    os.environ["SLURM_CONF"] = conf
    return not was_running


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    started = start_cluster()
    calls: list[list[str]] = []

    def counting(args: list[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        return run_command(args, input)

    sched = SlurmScheduler("bench", run_cmd=counting)
    app = specs.AppDef(
        "bench",
        roles=[
            specs.Role(
                "r", image="", entrypoint="true", resource=specs.Resource(cpu=1, gpu=0, memMB=10)
            )
        ],
    )
    try:
        with tempfile.TemporaryDirectory() as job_dir:
            ids = [sched.submit(app, {"job_dir": job_dir, "time": "1"}) for _ in range(n)]
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                states = sched.describe_many(ids)
                if all(d is not None and is_terminal(d.state) for d in states.values()):
                    break
                time.sleep(1)
            results = {}
            for label, fn in (
                ("batched (describe_many)", lambda: sched.describe_many(ids)),
                ("per app (describe each)", lambda: [sched.describe(a) for a in ids]),
            ):
                times = []
                for _ in range(rounds):
                    calls.clear()
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
                results[label] = (min(times), statistics.median(times), len(calls))
        print(
            f"status of {n} finished Slurm apps (Slurm {sched._probe.version()}), {rounds} rounds:"
        )
        for label, (best, med, ncalls) in results.items():
            print(
                f"  {label:<26} best {best * 1000:8.1f} ms  median {med * 1000:8.1f} ms"
                f"  ({ncalls} slurm commands)"
            )
        (b, _, _), (p, _, _) = results.values()
        print(f"  speed-up: {p / b:.1f}x")
    finally:
        if started:
            subprocess.run(["bash", str(SCRIPTS / "stop.sh")], capture_output=True, check=False)


if __name__ == "__main__":
    main()
