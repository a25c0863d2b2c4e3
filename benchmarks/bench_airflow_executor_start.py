"""Start cost of TorchXExecutor against LocalExecutor: 50 short local_cwd tasks, side by side.

On a running TorchXExecutor deployment (the one that
``tests/airflow/test_airflow_executor_deployment.py`` starts:
``LocalExecutor,torchx_airflow.executors.TorchXExecutor``), the same 50-task DAG runs on
LocalExecutor (``txe_start_local``) and then on TorchXExecutor/local_cwd (``txe_start_torchx``),
one after the other in one run. For each: the run's wall time, "queued" -> "running" per task
(median and max, from the task instances' ``queued_when`` and ``start_date``), and the memory of
a running task: the processes of the task tries (Airflow's supervisor and task runner, plus the
local scheduler's supervisor for an app; LocalExecutor's idle workers not counted), sampled every
0.5 s, at the sample with the most tasks running: RSS and PSS (shared pages split between the
processes sharing them) per task. The warm fork server's PSS is printed apart (idle, as
LocalExecutor's idle workers, which are not counted).

Measured on a 2-core machine under other sessions' load (docs/engines/airflow.md): before the
warm start 133 s against 40 s (3.3x), 162 MiB against 49 MiB PSS per running task; with it
(2026-11-28, four runs) 25-30 s against 17-25 s (1.03x, 1.27x, 1.60x, 1.36x), queued -> running
median 1.3-1.6 s against 2.5-4.2 s, 96 and 112 MiB against 43 and 49 MiB PSS per running task
(runs 3 and 4; in the first two the forked tasks' titles were lost, a bug fixed since, and the
sampler did not find them), server 105 MiB idle. Not analysed further: TorchX tasks start
sooner (queued -> running) and run shorter (``running_end_median_s``), yet the span from the
first queued to the last end is longer; with both executors the Airflow supervisor exits one
heartbeat (``[workers] min_heartbeat_interval``, 20 s on that deployment) after its task ended.

Analysed since (``machine_cpu_s``: the machine's busy CPU seconds during the phase, other
sessions included): TorchXExecutor held an ended try's slot until its app ended, so the second
wave waited on the first one's lingering supervisors (the scheduler log: "0 open slots" for 18 s);
with the slot freed when the try is over, 1.63x and 1.69x, 43 s against 19 s of machine CPU,
most of it in the task runners forked through the warm server (no ``gc.freeze`` before forking).
With both fixed (2026-11-28, eight runs, load average 7-16): 21.1, 24.3, 21.2, 22.2, 23.4,
23.6, 21.3, 23.0 s against 19.4, 20.7, 15.9, 19.6, 16.9, 14.7, 13.5, 14.6 s (1.09x, 1.17x, 1.33x,
1.13x, 1.38x, 1.60x, 1.58x, 1.58x: not reliably <= 1.5x), machine CPU 34-42 s against 18-36 s,
queued -> running median 1.6-2.1 s against 0.5-3.1 s, 70-84 MiB against 49-80 MiB PSS per
running task. The rest was CPU, found with ``perf record -a``: the forked task runner imported
what parsing its DAG file needs (0.2 s per task) and the forked supervisor built the Execution
API client's SSL context (50 ms); the warm server now does both once. Nine runs after that: six
quiet (0.85x, 1.19x, 1.04x, 1.24x, 1.33x, 1.15x), three beside two CPU-bound processes (0.90x,
1.08x, 0.95x); 18-20 s against 15 s of machine CPU when quiet, 54-71 MiB PSS per running task.
Every submit in a thread pool instead (three runs, before that): 0.93x, 1.31x, 1.48x, 42-50 s of
machine CPU (the local scheduler then spawns each supervisor).

usage: .venv/bin/python benchmarks/bench_airflow_executor_start.py
       [--home /var/lib/torchx-ci/<deployment>-txexec]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

#: the task runner (both executors), LocalExecutor's busy worker (the task's supervisor) and the
#: supervisor in a TorchXExecutor app, as their process titles (setproctitle) name them
_RUNNER = b"airflow worker -- "
_LOCAL_WORKER = b"airflow worker -- LocalExecutor"
_APP_SUPERVISOR = b"airflow supervisor:"
#: TorchXExecutor's warm fork server (idle, like LocalExecutor's idle workers: reported apart)
_FORK_SERVER = b"torchx_airflow._fork_server"


def _kib(path: str, field: bytes) -> int:
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _task_processes() -> tuple[int, int, int, int]:
    """(running tasks, RSS KiB, PSS KiB, warm server PSS KiB) of every task try's processes now:
    task runners, their supervisors (LocalExecutor's busy workers; idle ones are not counted;
    an app's, forked by the warm server or not) and, for an app, every process of it (its
    client, the local scheduler's supervisor)."""
    tasks = rss = pss = server = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().rstrip(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if _FORK_SERVER in cmd:
            server += _kib(f"/proc/{pid}/smaps_rollup", b"Pss:")
            continue
        local_worker = cmd.startswith(_LOCAL_WORKER)
        runner = cmd.startswith(_RUNNER) and not local_worker
        busy = local_worker and not cmd.endswith(b"<idle>")
        app = b"TORCHX_APP_ID=" in env or cmd.startswith(_APP_SUPERVISOR)
        if not (runner or busy or app):
            continue
        tasks += runner
        rss += _kib(f"/proc/{pid}/status", b"VmRSS:")
        pss += _kib(f"/proc/{pid}/smaps_rollup", b"Pss:")
    return tasks, rss, pss, server


class Sampler(threading.Thread):
    """Keeps the sample with the most running tasks."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.best = (0, 0, 0, 0)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            sample = _task_processes()
            if sample[0] > self.best[0]:
                self.best = sample


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (user, nice, system, irq) since boot."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _when(text: str | None) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0


def phase(dep: Any, dag_id: str) -> dict[str, float]:
    from support.airflow_deployment import wait_until

    sampler = Sampler()
    sampler.start()
    began, cpu = time.monotonic(), _busy_cpu_s()
    run = dep.trigger(dag_id)
    wait_until(lambda: dep.api("GET", f"/dags/{dag_id}/dagRuns/{run}")["state"]
               in ("success", "failed"), 1800, f"the run of {dag_id}", interval=1)  # fmt: skip
    wall, cpu = time.monotonic() - began, _busy_cpu_s() - cpu
    sampler.stop.set()
    sampler.join()
    got = dep.api("GET", f"/dags/{dag_id}/dagRuns/{run}/taskInstances?limit=100")
    tis = got["task_instances"]
    waits = [_when(t["start_date"]) - _when(t["queued_when"]) for t in tis if t["queued_when"]]
    runs = [_when(t["end_date"]) - _when(t["start_date"]) for t in tis if t["end_date"]]
    first = min((_when(t["queued_when"]) for t in tis if t["queued_when"]), default=0.0)
    last = max((_when(t["end_date"]) for t in tis if t["end_date"]), default=0.0)
    tasks, rss, pss, server = sampler.best
    return {
        "tasks": len(tis),
        "failed": sum(t["state"] != "success" for t in tis),
        "wall_s": wall,
        "machine_cpu_s": cpu,
        "queued_running_median_s": statistics.median(waits) if waits else float("nan"),
        "queued_running_max_s": max(waits) if waits else float("nan"),
        "running_end_median_s": statistics.median(runs) if runs else float("nan"),
        "first_queued_last_end_s": last - first if first and last else float("nan"),
        "peak_running": tasks,
        "rss_mib_per_task": rss / 1024 / tasks if tasks else float("nan"),
        "pss_mib_per_task": pss / 1024 / tasks if tasks else float("nan"),
        "warm_server_pss_mib": server / 1024,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    state = Path(os.environ.get("CI_STATE_DIR", "/var/lib/torchx-ci"))
    default = state / f"{os.environ.get('AIRFLOW_DEPLOYMENT', 'airflow')}-txexec"
    p.add_argument("--home", type=Path, default=default)
    a = p.parse_args()
    from support.airflow_deployment import AirflowDeployment

    dep = AirflowDeployment(a.home)
    dags = (("LocalExecutor", "txe_start_local"), ("TorchXExecutor", "txe_start_torchx"))
    rows = {name: phase(dep, dag) for name, dag in dags}
    keys = list(next(iter(rows.values())))
    print(f"{'':26}" + "".join(f"{n:>16}" for n in rows))
    for k in keys:
        print(f"{k:26}" + "".join(f"{r[k]:>16.2f}" for r in rows.values()))
    local, torchx = rows["LocalExecutor"], rows["TorchXExecutor"]
    print(f"wall ratio TorchX/Local: {torchx['wall_s'] / local['wall_s']:.2f}x (goal <= 1.5x);"
          f" PSS per running task {torchx['pss_mib_per_task']:.0f} MiB (goal <= 120)")  # fmt: skip


if __name__ == "__main__":
    main()
