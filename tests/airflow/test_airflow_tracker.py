"""Tracker results in Airflow (real Airflow 3, ``dag.test()``): what an app recorded through
``AppRun`` is the task's ``tracker_metadata`` XCom and a line of its log, on the worker and in
deferrable mode. The launcher's fsspec tracker is configured in the DAG run's environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from airflow_harness import HERE, AirflowEnv, parse_runs

pytestmark = [pytest.mark.integration, pytest.mark.airflow]


def test_tasks_show_the_apps_tracker_results(af: AirflowEnv, tmp_path: Path) -> None:
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {tmp_path / 'tracker-root'}\n")
    env = {k: v for k, v in af.env.items() if not k.startswith("TORCHX_TRACKER")}
    env.update(TORCHX_TRACKERS="fsspec", TORCHX_TRACKER_FSSPEC_CONFIG=str(conf))
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(HERE / "dag_runner.py"), f"{af.dag_file('tx_tracker')}::tx_tracker"],
        env=env,
        cwd=str(af.work),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run = parse_runs(af.collect(proc))["tx_tracker"]
    for task in ("on_worker", "deferred"):
        ti = run.ti(task)
        assert ti["state"] == "success", run.output
        handle = ti["xcom"]["app_handle"]
        md = ti["xcom"]["tracker_metadata"]
        assert md["app_handle"] == handle and md["tracker"] == "fsspec"
        assert md["metadata"] == {"accuracy": 0.9, "epochs": 2, "model": "mlp"}
        assert md["artifacts"] == {"model": {"path": "/ckpt/model.pt", "metadata": {"step": 7}}}
        assert f"tracker results of {handle} (fsspec):" in run.output
