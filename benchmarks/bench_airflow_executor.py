"""TorchXExecutor: what one ``sync()`` costs with many queued tasks, and how fast a task starts.

1. **200 queued tasks on Slurm** (the real ``slurm`` scheduler over the stateful fake Slurm of
   ``tests/support/slurm_fixtures.py``, so the shared test cluster is not filled with 200
   jobs): Slurm commands per ``sync()`` cycle (one ``squeue`` for all) and the executor's CPU
   per cycle, as a share of one core at the default ``poll_interval``.
2. **The same on the real test cluster** with N jobs (``sleep``; they hold the cluster's slots
   for a few seconds): ``squeue`` runs per cycle and the CPU of the executor plus its ``squeue``
   children.
3. **Task start latency** ("queued" -> the task's code starts), with ``--latency``: on a running
   TorchXExecutor deployment (the one ``tests/airflow/test_airflow_executor_deployment.py``
   starts; its ``airflow.env`` given by ``--home``), the DAG ``txe_latency`` runs one task on
   LocalExecutor, one on TorchXExecutor/local_cwd and one on TorchXExecutor/slurm; next to them,
   ``sbatch`` alone (submit -> the job's first command runs).

usage: .venv/bin/python benchmarks/bench_airflow_executor.py [--tasks 200] [--real 16] [--cycles 20]
       [--latency --home /var/lib/torchx-ci/<deployment>-txexec]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # tests/support: the shared test helpers
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-executor-"))

DEFAULT_POLL_S = 2.0  # ExecutorSettings.poll_interval


def workload(i: int) -> Any:
    from airflow.executors.workloads import BundleInfo, ExecuteTask
    from airflow.executors.workloads.task import TaskInstanceDTO

    ti = TaskInstanceDTO(
        id=uuid.uuid4(), task_id=f"t{i}", dag_id="bench", run_id="r", try_number=1,
        dag_version_id=uuid.uuid4(), map_index=-1, pool_slots=1, priority_weight=1, queue="default",
    )  # fmt: skip
    return ExecuteTask(ti=ti, dag_rel_path=Path("bench.py"), token="t", log_path="l",
                       bundle_info=BundleInfo(name="dags-folder"))  # fmt: skip


def executor(run_cmd: Any, job_dir: str) -> Any:
    """A TorchXExecutor on ``slurm`` whose apps sleep instead of running an Airflow task."""
    from torchx_airflow.executors import TorchXExecutor
    from torchx_airflow.executors.config import ExecutorSettings, TaskSettings
    from torchx_core.runner import Runner
    from torchx_core.schedulers.slurm.scheduler import create_scheduler
    from torchx_core.specs import AppDef, Role

    class SleepingApps(TorchXExecutor):
        def _app(self, wl: Any, task: Any, name: str) -> AppDef:
            role = Role("airflow-task", "/tmp", entrypoint="sleep", args=["20"],
                        resource=task.role_resource())  # fmt: skip
            return AppDef(name=name, roles=[role])

    runner = Runner("bench", {"slurm": lambda name, **kw: create_scheduler(name, run_cmd=run_cmd)})
    ex = SleepingApps(parallelism=1000, runner=runner, ti_reader=lambda keys: {})
    ex._settings = ExecutorSettings(
        task=TaskSettings(scheduler="slurm", cfg={"job_dir": job_dir}, memMB=64), poll_interval=0.0
    )
    return ex


def cycles(ex: Any, calls: list[list[str]], n: int) -> dict[str, float]:
    """Runs ``n`` sync cycles; Slurm commands and CPU (this process + children) per cycle."""
    before = len(calls)
    cpu0 = time.process_time()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    for _ in range(n):
        ex.sync()
    wall = (time.perf_counter() - wall0) / n
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (kids.ru_utime + kids.ru_stime - kids0.ru_utime - kids0.ru_stime) / n
    made = calls[before:]
    return {
        "squeue_per_sync": sum(c[0] == "squeue" for c in made) / n,
        "commands_per_sync": len(made) / n,
        "cpu_ms_per_sync": (time.process_time() - cpu0) / n * 1000,
        "child_cpu_ms_per_sync": child_cpu * 1000,
        "wall_ms_per_sync": wall * 1000,
    }


def bench_fake(tasks: int, n: int) -> None:
    from support.slurm_fixtures import FakeSlurm

    fake = FakeSlurm()
    with tempfile.TemporaryDirectory() as tmp:
        ex = executor(fake, tmp)
        ex.queued_tasks = {wl.ti.key: wl for wl in map(workload, range(tasks))}
        ex.trigger_tasks(tasks)
        assert len(ex.running) == tasks, len(ex.running)
        r = cycles(ex, fake.calls, n)
    share = r["cpu_ms_per_sync"] / 1000 / DEFAULT_POLL_S * 100
    print(f"{tasks} queued tasks, slurm scheduler over the fake Slurm ({n} sync cycles):")
    print(
        f"  squeue per sync          {r['squeue_per_sync']:.0f}   (Slurm commands per sync:"
        f" {r['commands_per_sync']:.0f})"
    )
    print(
        f"  executor CPU per sync    {r['cpu_ms_per_sync']:.1f} ms   = {share:.2f}% of a core"
        f" at poll_interval={DEFAULT_POLL_S:g} s (includes the fake's JSON)"
    )


def bench_real(tasks: int, n: int) -> None:
    from torchx_core.schedulers.slurm.scheduler import run_command

    calls: list[list[str]] = []

    def counting(args: Any, input: str | None = None) -> Any:
        calls.append(list(args))
        return run_command(args, input=input) if input is not None else run_command(args)

    with tempfile.TemporaryDirectory(dir=str(REPO / ".venv")) as tmp:
        ex = executor(counting, tmp)
        t0 = time.perf_counter()
        ex.queued_tasks = {wl.ti.key: wl for wl in map(workload, range(tasks))}
        ex.trigger_tasks(tasks)
        submit = (time.perf_counter() - t0) / tasks
        try:
            r = cycles(ex, calls, n)
        finally:
            ex.terminate()
    cpu = r["cpu_ms_per_sync"] + r["child_cpu_ms_per_sync"]
    print(f"{tasks} tasks on the real test Slurm cluster ({n} sync cycles):")
    print(f"  squeue per sync          {r['squeue_per_sync']:.0f}")
    print(
        f"  CPU per sync             {r['cpu_ms_per_sync']:.1f} ms executor + "
        f"{r['child_cpu_ms_per_sync']:.1f} ms squeue = {cpu / 1000 / DEFAULT_POLL_S * 100:.2f}% of"
        f" a core at poll_interval={DEFAULT_POLL_S:g} s; wall {r['wall_ms_per_sync']:.0f} ms"
    )
    print(f"  submit (sbatch + owner)  {submit * 1000:.0f} ms per task")


def bench_latency(home: Path, runs: int) -> None:
    from support.airflow_deployment import AirflowDeployment, wait_until

    dep = AirflowDeployment(home)
    rows: dict[str, list[float]] = {}
    for _ in range(runs):
        run = dep.trigger("txe_latency")
        wait_until(lambda r=run: dep.api("GET", f"/dags/txe_latency/dagRuns/{r}")["state"]
                   in ("success", "failed"), 600, "the latency run")  # fmt: skip
        got = dep.api("GET", f"/dags/txe_latency/dagRuns/{run}/taskInstances")["task_instances"]
        for ti in got:
            started = dep.xcom("txe_latency", run, ti["task_id"], "return_value")
            queued = _ts(ti["queued_when"])
            rows.setdefault(ti["task_id"], []).append(started - queued)
    sbatch = [_sbatch_latency(home) for _ in range(runs)]
    print(f"task start latency, 'queued' -> task code starts (median of {runs}):")
    for name, label in (("on_local_executor", "LocalExecutor"),
                        ("on_torchx_local_cwd", "TorchXExecutor, local_cwd"),
                        ("on_torchx_slurm", "TorchXExecutor, slurm")):  # fmt: skip
        print(f"  {label:28s} {_median(rows.get(name, [])):6.2f} s")
    print(f"  {'sbatch alone (submit->run)':28s} {_median(sbatch):6.2f} s")


def _ts(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else float("nan")


def _sbatch_latency(home: Path) -> float:
    out = home / "work" / f"sbatch-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", f"--chdir={home / 'work'}",
                    "--wrap", f"date +%s.%N > {out}"], check=True, capture_output=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = float(out.read_text())
    out.unlink()
    return started - t0


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--real", type=int, default=16, help="jobs on the real cluster (0: skip)")
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--latency", action="store_true")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--home", type=Path, default=None)
    a = p.parse_args()
    bench_fake(a.tasks, a.cycles)
    if a.real:
        bench_real(a.real, a.cycles)
    if a.latency:
        state = Path(os.environ.get("CI_STATE_DIR", "/var/lib/torchx-ci"))
        home = a.home or state / f"{os.environ.get('AIRFLOW_DEPLOYMENT', 'airflow')}-txexec"
        bench_latency(home, a.runs)


if __name__ == "__main__":
    main()
