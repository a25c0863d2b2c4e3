"""Runs DAG files with ``dag.test()`` on a real Airflow (SQLite) in subprocesses (test harness).

:class:`AirflowEnv` holds a temporary ``AIRFLOW_HOME`` (migrated), a DAGs folder with the DAG
files of ``tests/airflow/dags`` and the example DAG, a local-scheduler root and a work folder;
``dag_runner.py`` runs the DAGs and prints one JSON report per DAG.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REPORT_MARK = "@@DAGTEST-REPORT@@"
BEGIN_MARK = "@@DAGTEST-BEGIN@@"
DAG_SOURCES = HERE / "dags"
EXAMPLE_DAG = REPO / "examples" / "airflow" / "torchx_dag.py"


@dataclass
class DagRunResult:
    """What ``dag.test()`` of one DAG reported, with the log output of that run."""

    dag_id: str
    output: str
    report: dict[str, Any] = field(default_factory=dict)

    def ti(self, task_id: str) -> dict[str, Any]:
        """The task instance report (``state``, ``try_number``, ``xcom``)."""
        try:
            return self.report["tis"][task_id]
        except KeyError:
            raise AssertionError(f"no report for {task_id!r}; output:\n{self.output}") from None


def parse_runs(output: str) -> dict[str, DagRunResult]:
    """Splits a ``dag_runner.py`` output into one result per DAG."""
    runs: dict[str, DagRunResult] = {}
    current: DagRunResult | None = None
    for line in output.splitlines():
        if line.startswith(BEGIN_MARK):
            dag_id = line[len(BEGIN_MARK) :].strip()
            current = runs[dag_id] = DagRunResult(dag_id, "")
        elif line.startswith(REPORT_MARK) and current is not None:
            current.report = json.loads(line[len(REPORT_MARK) :])
        elif current is not None:
            current.output += line + "\n"
    return runs


class AirflowEnv:
    """A migrated Airflow home plus a DAGs folder; runs DAG files in fresh interpreters."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "airflow"
        self.dags = root / "dags"
        self.local_root = root / "torchx-local"
        self.work = root / "work"
        self.batch: dict[str, DagRunResult] | None = None
        self.batch_output = ""
        for d in (self.home, self.dags, self.local_root, self.work):
            d.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                "TORCHX_LOCAL_ROOT": str(self.local_root),
                "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)]),
                "PYTHONUNBUFFERED": "1",
                "TORCHX_AF_WORK": str(self.work),
            }
        )
        env.pop("AIRFLOW_CONFIG", None)
        # Airflow imports thousands of modules; let the subprocesses cache their bytecode.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env = env
        for src in [*sorted(DAG_SOURCES.glob("tx_*.py")), EXAMPLE_DAG]:
            shutil.copy(src, self.dags / src.name)

    def dag_file(self, dag_id: str) -> Path:
        """The DAG file (in the DAGs folder) defining ``dag_id`` (file name = dag id)."""
        name = "torchx_dag" if dag_id == "torchx_example" else dag_id
        return self.dags / f"{name}.py"

    def migrate(self) -> None:
        airflow = Path(sys.executable).with_name("airflow")
        proc = subprocess.run(
            [str(airflow), "db", "migrate"],
            check=False,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{proc.stdout}\n{proc.stderr}")

    def start_dags(self, *dag_ids: str, extra: tuple[str, ...] = ()) -> subprocess.Popen[str]:
        """Starts ``dag.test()`` of each DAG, in order, in a new interpreter (own session)."""
        specs = [f"{self.dag_file(d)}::{d}" for d in dag_ids]
        return self.start([str(HERE / "dag_runner.py"), *specs, *extra], python=True)

    def start(self, args: list[str], *, python: bool = False) -> subprocess.Popen[str]:
        """Starts ``airflow <args>`` (``python <args>`` if ``python``) in this env, in its own
        session (so a test can kill its whole process group); output on ``stdout``."""
        exe = sys.executable if python else str(Path(sys.executable).with_name("airflow"))
        cmd = [exe, *args]
        return subprocess.Popen(
            cmd,
            env=self.env,
            cwd=str(self.work),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    @staticmethod
    def collect(proc: subprocess.Popen[str], timeout: float = 600) -> str:
        """Waits for a ``start_dags`` process; returns its whole output."""
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"dag.test() did not finish in {timeout} s:\n{out}") from None
        except BaseException:  # interrupted: never leave the DAG process behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return out

    def run_dags(self, *dag_ids: str, timeout: float = 900) -> dict[str, DagRunResult]:
        """Runs ``dag.test()`` of each DAG in one new interpreter; returns a result per DAG."""
        out = self.collect(self.start_dags(*dag_ids), timeout)
        runs = parse_runs(out)
        missing = [d for d in dag_ids if d not in runs or not runs[d].report]
        if missing:
            raise AssertionError(f"dag.test() produced no report for {missing}:\n{out}")
        return runs

    # -- apps on the local scheduler --------------------------------------------------------

    def runner(self) -> Any:
        """A Runner for this env's local-scheduler root (the env var is set for the test)."""
        from torchx_core.runner import get_runner

        return get_runner()

    def cancel_all(self) -> list[str]:
        """Cancels every app still running under this env's root; returns their handles."""
        from torchx_core.specs import is_terminal

        saved = os.environ.get("TORCHX_LOCAL_ROOT")
        os.environ["TORCHX_LOCAL_ROOT"] = str(self.local_root)
        try:
            with self.runner() as r:
                live = [a.app_handle for a in r.list("local_cwd") if not is_terminal(a.state)]
                for handle in live:
                    r.cancel(handle)
        finally:
            if saved is None:
                os.environ.pop("TORCHX_LOCAL_ROOT", None)
            else:
                os.environ["TORCHX_LOCAL_ROOT"] = saved
        return live

    def apps(self) -> list[Any]:
        """Every app the local scheduler knows under this env's root."""
        with self.runner() as r:
            return r.list("local_cwd")
