"""Worker time held by a TorchXOperator task while its app runs, deferrable vs not.

Runs one DAG on a real Airflow (SQLite in a temporary ``AIRFLOW_HOME``, ``dag.test()``) with two
tasks that each run a local app sleeping ``--seconds`` (default 30): one waits on the worker, one
defers to the triggerer. The worker-side time of each task is the time spent inside the
operator's worker methods (``execute`` and, after deferral, ``execute_complete``); the trigger's
wait is not worker time.

Usage: ``python benchmarks/bench_airflow_worker_time.py [--seconds 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DAG_SOURCE = '''
import json
import os
import time
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

OUT = os.environ["BENCH_OUT"]
SECONDS = os.environ["BENCH_SECONDS"]


class TimedTorchXOperator(TorchXOperator):
    """Adds the wall time spent in worker-side methods to ``$BENCH_OUT``."""

    def _timed(self, method, *args, **kwargs):
        start = time.monotonic()
        try:
            return method(*args, **kwargs)
        finally:
            data = json.load(open(OUT)) if os.path.exists(OUT) else {}
            data[self.task_id] = data.get(self.task_id, 0.0) + time.monotonic() - start
            json.dump(data, open(OUT, "w"))

    def execute(self, context):
        return self._timed(super().execute, context)

    def execute_complete(self, context, event):
        return self._timed(super().execute_complete, context, event)


def app(name):
    role = Role(name="r", image="/tmp", entrypoint="sleep", args=[SECONDS])
    return AppDef(name=name, roles=[role])


with DAG("bench_worker_time", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TimedTorchXOperator(
        task_id="on_worker", app=app("on-worker"), deferrable=False, poll_interval=1
    )
    TimedTorchXOperator(task_id="deferred", app=app("deferred"), deferrable=True, poll_interval=1)

if __name__ == "__main__":
    dag.test()
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30, help="how long each app runs")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-airflow-"))
    try:
        dags = root / "dags"
        dags.mkdir()
        (dags / "bench_worker_time.py").write_text(textwrap.dedent(DAG_SOURCE))
        out = root / "worker_time.json"
        env = dict(os.environ)
        env.update(
            {
                "AIRFLOW_HOME": str(root / "home"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "TORCHX_LOCAL_ROOT": str(root / "torchx-local"),
                "PYTHONPATH": str(REPO),
                "BENCH_OUT": str(out),
                "BENCH_SECONDS": str(args.seconds),
            }
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        airflow = str(Path(sys.executable).with_name("airflow"))
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
        try:
            run = subprocess.run(
                [sys.executable, str(dags / "bench_worker_time.py")],
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=4 * args.seconds + 600,
            )
        finally:
            _cancel_leftovers(root / "torchx-local")
        if run.returncode != 0 or not out.exists():
            sys.stderr.write(run.stdout[-5000:] + run.stderr[-5000:])
            return 1
        held = json.loads(out.read_text())
        print(f"app duration: {args.seconds} s (local_cwd, Airflow {_airflow_version()})")
        print(f"{'mode':<16}{'worker time held (s)':>22}")
        print(f"{'non-deferrable':<16}{held['on_worker']:>22.2f}")
        print(f"{'deferrable':<16}{held['deferred']:>22.2f}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cancel_leftovers(local_root: Path) -> None:
    """Cancels the apps a failed or interrupted run left running (none after a normal run)."""
    os.environ["TORCHX_LOCAL_ROOT"] = str(local_root)
    from torchx_core.runner import get_runner
    from torchx_core.specs import is_terminal

    with get_runner() as runner:
        for app in runner.list("local_cwd"):
            if not is_terminal(app.state):
                runner.cancel(app.app_handle)


def _airflow_version() -> str:
    from importlib.metadata import version

    return version("apache-airflow")


if __name__ == "__main__":
    sys.exit(main())
