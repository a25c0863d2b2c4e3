"""execution_timeout kills the task: the app is cancelled on a worker (on_kill) and deferred
(the trigger's deadline). Each app writes its shell PID to ``$TORCHX_AF_WORK/<name>.pid``."""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")


def sleeper(name: str) -> AppDef:
    # "$$$$" reaches the shell as "$$": TorchX substitutes macros (${...}) in args, "$$" escapes
    script = f"echo $$$$ > {WORK}/{name}.pid; sleep 300 & wait"
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


with DAG("tx_kill", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(
        task_id="timeout_worker",
        app=sleeper("kworker"),
        poll_interval=0.2,
        execution_timeout=timedelta(seconds=5),
    )
    TorchXOperator(
        task_id="timeout_deferred",
        app=sleeper("kdeferred"),
        deferrable=True,
        poll_interval=0.2,
        execution_timeout=timedelta(seconds=5),
    )
