"""Fixtures for the Airflow provider tests.

Unit tests use the fakes in ``airflow_fakes.py`` (a stateful Runner, a fake task context): no
database, no Airflow run.

Integration tests (``integration`` + ``airflow``) run DAG files with ``dag.test()``, one
subprocess per run (``dag_runner.py``), against a real Airflow 3 with SQLite in a temporary
``AIRFLOW_HOME`` (migrated once per session) and real apps on the local scheduler under a
temporary ``TORCHX_LOCAL_ROOT``. Every integration test ends by checking that no app it started
is still running (leftovers are cancelled, then the test fails).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from airflow_fakes import FakeRunner

from torchx_core.specs import AppDef, Role

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REPORT_MARK = "@@DAGTEST-REPORT@@"


@pytest.fixture
def fake_runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
def app() -> AppDef:
    return AppDef(name="train", roles=[Role("r", "img", entrypoint="/bin/echo", args=["hi"])])


# -- real Airflow ------------------------------------------------------------------------------


@dataclass
class DagRunResult:
    """What one ``dag.test()`` subprocess reported."""

    returncode: int
    output: str
    report: dict[str, Any] = field(default_factory=dict)

    def ti(self, task_id: str) -> dict[str, Any]:
        """The task instance report (``state``, ``try_number``, ``xcom``)."""
        try:
            return self.report["tis"][task_id]
        except KeyError:
            raise AssertionError(f"no report for {task_id!r}; output:\n{self.output}") from None


class AirflowEnv:
    """A migrated Airflow home plus a DAGs folder; runs DAG files in fresh interpreters."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "airflow"
        self.dags = root / "dags"
        self.local_root = root / "torchx-local"
        self.work = root / "work"
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
            }
        )
        env.pop("AIRFLOW_CONFIG", None)
        self.env = env

    def migrate(self) -> None:
        airflow = Path(sys.executable).with_name("airflow")
        proc = subprocess.run(
            [str(airflow), "db", "migrate"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{proc.stdout}\n{proc.stderr}")

    def write_dag(self, name: str, source: str) -> Path:
        path = self.dags / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        return path

    def start_dag(self, dag_file: Path, dag_id: str, *extra: str) -> subprocess.Popen[str]:
        """Starts ``dag.test()`` of ``dag_id`` in a new interpreter (its own process group)."""
        cmd = [sys.executable, str(HERE / "dag_runner.py"), str(dag_file), dag_id, *extra]
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
    def collect(proc: subprocess.Popen[str], timeout: float = 300) -> DagRunResult:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"dag.test() did not finish in {timeout} s:\n{out}") from None
        report: dict[str, Any] = {}
        for line in out.splitlines():
            if line.startswith(REPORT_MARK):
                report = json.loads(line[len(REPORT_MARK) :])
        return DagRunResult(proc.returncode, out, report)

    def run_dag(
        self, dag_file: Path, dag_id: str, *extra: str, timeout: float = 300
    ) -> DagRunResult:
        """Runs ``dag.test()`` of ``dag_id`` in a new interpreter and returns its report."""
        result = self.collect(self.start_dag(dag_file, dag_id, *extra), timeout)
        if not result.report:
            raise AssertionError(f"dag.test() of {dag_id} produced no report:\n{result.output}")
        return result

    # -- apps on the local scheduler --------------------------------------------------------

    def runner(self) -> Any:
        """A Runner for this env's local-scheduler root (the env var is set for the test)."""
        from torchx_core.runner import get_runner

        return get_runner()

    def apps(self) -> list[Any]:
        """Every app the local scheduler knows under this env's root."""
        with self.runner() as r:
            return r.list("local_cwd")


@pytest.fixture(scope="session")
def airflow_env() -> Iterator[AirflowEnv]:
    """A migrated Airflow (SQLite) in a temporary home; removed at session end."""
    root = Path(tempfile.mkdtemp(prefix="torchx-airflow-"))
    env = AirflowEnv(root)
    env.migrate()
    try:
        yield env
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def af(airflow_env: AirflowEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[AirflowEnv]:
    """The session's Airflow env; this test's process sees its local root; no app may survive."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(airflow_env.local_root))
    before = {a.app_handle for a in airflow_env.apps()}
    yield airflow_env
    from torchx_core.specs import is_terminal

    leftovers = [
        a for a in airflow_env.apps() if a.app_handle not in before and not is_terminal(a.state)
    ]
    if leftovers:
        with airflow_env.runner() as r:
            for a in leftovers:
                r.cancel(a.app_handle)
        pytest.fail(f"apps still running after the test: {[a.app_handle for a in leftovers]}")
