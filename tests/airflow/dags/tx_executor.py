"""DAGs of the TorchXExecutor deployment tests (``test_airflow_executor_deployment.py``).

``txe_local`` runs its TorchX tasks on the executor's default scheduler (``local_cwd``),
``txe_slurm`` the same tasks as Slurm jobs (``executor_config``); one task of each runs on the
deployment's default LocalExecutor. Ten tasks: a fan-out/fan-in with XComs, a task that fails its
first try (retried), a task that waits for ``<run_id>.release`` under ``$TORCHX_AF_WORK`` (logs are
read while it runs), and ``txe_hold``'s tasks that wait for that file (adoption, cancel).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, get_current_context, task

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")
EXECUTOR = "TorchXExecutor"


def _where() -> dict[str, Any]:
    return {"pid": os.getpid(), "slurm_job": os.environ.get("SLURM_JOB_ID")}


def _wait_release(name: str) -> None:
    ctx = get_current_context()
    run_id, ti = ctx["run_id"], ctx["ti"]
    Path(WORK, f"{run_id}.{name}.try{ti.try_number}.started").write_text(str(os.getpid()))
    print(f"{name}-marker-before-release", flush=True)
    release = Path(WORK, f"{run_id}.release")
    deadline = time.monotonic() + 600
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    Path(WORK, f"{run_id}.{name}.try{ti.try_number}.finished").write_text("done")
    print(f"{name}-marker-after-release", flush=True)


def build(dag_id: str, config: dict[str, Any] | None) -> DAG:
    opts: dict[str, Any] = {"executor": EXECUTOR, "executor_config": config or {}}
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
             default_args={"retries": 0}) as dag:  # fmt: skip

        @task(**opts)
        def start() -> dict[str, Any]:
            return {"value": 1, **_where()}

        @task(**opts)
        def add(i: int, first: dict[str, Any]) -> int:
            return first["value"] + i

        @task(**opts)
        def total(parts: list[int]) -> int:
            return sum(parts)

        @task  # the deployment's default executor (LocalExecutor)
        def local_check(value: int) -> str:
            assert value == 10, value
            return f"local saw {value}"

        @task(**opts, retries=1, retry_delay=timedelta(seconds=1))
        def flaky() -> int:
            ti = get_current_context()["ti"]
            print(f"flaky try {ti.try_number}", flush=True)
            if ti.try_number == 1:
                raise RuntimeError("flaky fails its first try on purpose")
            return ti.try_number

        @task(**opts)
        def watched() -> dict[str, Any]:
            _wait_release("watched")
            return _where()

        @task(**opts)
        def final(value: int, tries: int, where: dict[str, Any], checked: str) -> dict[str, Any]:
            return {
                "value": value,
                "tries": tries,
                "watched": where,
                "checked": checked,
                **_where(),
            }

        first = start()
        parts = [add.override(task_id=f"add_{i}")(i, first) for i in range(4)]
        value = total(parts)
        final(value, flaky(), watched(), local_check(value))
    return dag


def build_hold(dag_id: str, config: dict[str, Any] | None, n: int) -> DAG:
    """``n`` parallel tasks that wait for the run's release file, then one that sums them."""
    opts: dict[str, Any] = {"executor": EXECUTOR, "executor_config": config or {}}
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
             default_args={"retries": 0}) as dag:  # fmt: skip

        @task(**opts)
        def hold(i: int) -> dict[str, Any]:
            _wait_release(f"hold_{i}")
            return {"i": i, **_where()}

        @task(**opts)
        def gather(results: list[dict[str, Any]]) -> int:
            return len(results)

        gather([hold.override(task_id=f"hold_{i}")(i) for i in range(n)])
    return dag


SLURM = {"torchx": {"scheduler": "slurm", "cfg": {"job_dir": f"{WORK}/slurm-jobs", "time": "10"},
                    "memMB": 512}}  # fmt: skip

txe_local = build("txe_local", None)
txe_slurm = build("txe_slurm", SLURM)
txe_hold_local = build_hold("txe_hold_local", None, 5)
txe_hold_slurm = build_hold("txe_hold_slurm", SLURM, 5)


def build_latency() -> DAG:
    """Three independent tasks that return when their code started (benchmarks/
    bench_airflow_executor.py --latency): LocalExecutor, TorchXExecutor on local_cwd and on
    Slurm."""
    with DAG("txe_latency", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:

        @task
        def on_local_executor() -> float:
            return time.time()

        @task(executor=EXECUTOR)
        def on_torchx_local_cwd() -> float:
            return time.time()

        @task(executor=EXECUTOR, executor_config=SLURM)
        def on_torchx_slurm() -> float:
            return time.time()

        on_local_executor()
        on_torchx_local_cwd()
        on_torchx_slurm()
    return dag


txe_latency = build_latency()


def build_reasons() -> DAG:
    """Tasks that fail where only the executor knows why (the reason must reach the task's log)
    and tasks whose app must end as their task did (``test_airflow_executor_deployment.py``)."""
    with DAG("txe_reasons", schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
             default_args={"retries": 0}) as dag:  # fmt: skip

        @task(executor=EXECUTOR, executor_config={"torchx": {"cpus": 2}})
        def bad_config() -> None:
            raise AssertionError("never runs: its executor_config is wrong")

        @task(executor=EXECUTOR, executor_config={"torchx": {"scheduler": "no_such_scheduler"}})
        def unknown_scheduler() -> None:
            raise AssertionError("never runs: its scheduler does not exist")

        @task(executor=EXECUTOR)
        def killed() -> None:  # its app is cancelled from outside (torchx cancel)
            _wait_release("killed")

        @task(executor=EXECUTOR, execution_timeout=timedelta(seconds=5))
        def timed_out() -> None:
            time.sleep(120)

        @task(executor=EXECUTOR)
        def fails() -> None:
            raise RuntimeError("fails on purpose")

        bad_config()
        unknown_scheduler()
        killed()
        timed_out()
        fails()
    return dag


txe_reasons = build_reasons()


def build_start_cost(dag_id: str, executor: str | None, n: int = 50) -> DAG:
    """``n`` short independent tasks (benchmarks/bench_airflow_executor_start.py): the same DAG
    on LocalExecutor and on TorchXExecutor/local_cwd."""
    opts: dict[str, Any] = {"executor": executor} if executor else {}
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
             max_active_tasks=n) as dag:  # fmt: skip

        @task(**opts)
        def short(i: int) -> int:
            time.sleep(3)  # long enough to be seen running
            return i

        for i in range(n):
            short.override(task_id=f"short_{i}")(i)
    return dag


txe_start_local = build_start_cost("txe_start_local", None)
txe_start_torchx = build_start_cost("txe_start_torchx", EXECUTOR)
