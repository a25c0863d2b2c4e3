"""execution_timeout kills the task: the app is cancelled on a worker (on_kill) and deferred
(the trigger's deadline). Each app writes its shell PID to ``$TORCHX_AF_WORK/<name>.pid``; the
task waits (bounded) for that file before waiting for the app, so the timeout always hits a
started app."""

import os
import time
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")
#: the task's execution_timeout; the app gets most of it to start
TIMEOUT_S = 30


def sleeper(name: str) -> AppDef:
    # "$$$$" reaches the shell as "$$": TorchX substitutes macros (${...}) in args, "$$" escapes
    script = f"echo $$$$ > {WORK}/{name}.pid; sleep 300 & wait"
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


class StartedOperator(TorchXOperator):
    """Waits until its app's shell wrote its PID before waiting for the app."""

    def poll_until_complete(self, external_id, context):
        pid_file = Path(WORK, f"{self.app.name}.pid")
        deadline = time.monotonic() + TIMEOUT_S - 5
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        return super().poll_until_complete(external_id, context)


with DAG("tx_kill", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    StartedOperator(
        task_id="timeout_worker",
        app=sleeper("kworker"),
        poll_interval=0.2,
        execution_timeout=timedelta(seconds=TIMEOUT_S),
    )
    StartedOperator(
        task_id="timeout_deferred",
        app=sleeper("kdeferred"),
        deferrable=True,
        defer_after=0,
        poll_interval=0.2,
        execution_timeout=timedelta(seconds=TIMEOUT_S),
    )
