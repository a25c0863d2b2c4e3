"""Tracker results in Airflow: apps record through AppRun; the tasks show them (XCom + log).

Run on its own (not in the shared batch) with the launcher's tracker configured in the
environment of ``dag.test()`` (TORCHX_TRACKERS / TORCHX_TRACKER_FSSPEC_CONFIG).
"""

import os
import sys
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")

RECORD = (
    "from torchx_core.tracker import app_run_from_env\n"
    "run = app_run_from_env()\n"
    "run.add_metadata(accuracy=0.9, epochs=2, model='mlp')\n"
    "run.add_artifact('model', '/ckpt/model.pt', {'step': 7})\n"
)


def app(name: str) -> AppDef:
    return AppDef(
        name=name,
        roles=[Role(name="trainer", image=WORK, entrypoint=sys.executable, args=["-c", RECORD])],
    )


with DAG("tx_tracker", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(task_id="on_worker", app=app("tracked"), poll_interval=0.2)
    TorchXOperator(
        task_id="deferred", app=app("tracked_deferred"), poll_interval=0.2, deferrable=True
    )
