"""DAGs of the real-deployment tests (``test_airflow_deployment.py``): scheduler, dag-processor,
triggerer and api-server of ``scripts/services/airflow`` run them.

Every app is a shell on the local scheduler that records, under ``$TORCHX_AF_WORK``, its start
(``<run_id>.<name>.starts``) and its shell PID (``<run_id>.<name>.pid``), then waits until the
test creates ``<run_id>.release`` (apps named ``*-forever`` never end by themselves). Each task
try writes its own PID to ``<run_id>.<task_id>.try<N>.pid`` before running the operator.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG
from live_triggers import AdoptionAwaitingTrigger

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")
RUN = "{{ run_id }}"


def waiting_app(name: str, *, forever: bool = False) -> AppDef:
    """An app that starts, prints a few lines and waits for the run's release file."""
    prefix = f"{WORK}/{RUN}.{name}"
    wait = (
        "sleep 600 & wait"
        if forever
        else (f"while [ ! -e {WORK}/{RUN}.release ]; do sleep 0.2; done")
    )
    # "$$$$" reaches the shell as "$$" (TorchX macro escaping)
    script = (
        f"echo start >> {prefix}.starts; echo $$$$ > {prefix}.pid;"
        f" for i in 1 2 3 4 5; do echo {name}-line-$i; done; {wait}; echo {name}-done"
    )
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


class RecordingOperator(TorchXOperator):
    """Writes the PID of each task try's process before running the operator."""

    def execute(self, context: Any) -> Any:
        ti = context["ti"]
        Path(WORK, f"{ti.run_id}.{ti.task_id}.try{ti.try_number}.pid").write_text(str(os.getpid()))
        return super().execute(context)


class AdoptionAwaitingOperator(RecordingOperator):
    """Defers to :class:`AdoptionAwaitingTrigger` (the fault-1 order: adopt, then on_kill)."""

    trigger_class = AdoptionAwaitingTrigger


def live_dag(dag_id: str) -> DAG:
    return DAG(
        dag_id,
        schedule=None,
        start_date=datetime(2024, 1, 1),
        catchup=False,
        default_args={"retries": 0},
        tags=["torchx-live"],
    )


with live_dag("live_defer_ok"):
    RecordingOperator(
        task_id="train",
        app=waiting_app("deferok"),
        deferrable=True,
        poll_interval=1,
        log_tail_lines=3,
    )

with live_dag("live_mark_failed"):
    RecordingOperator(
        task_id="train",
        app=waiting_app("markfailed-forever", forever=True),
        deferrable=True,
        poll_interval=1,
    )

with live_dag("live_clear"):
    AdoptionAwaitingOperator(
        task_id="train",
        app=waiting_app("cleared"),
        deferrable=True,
        poll_interval=1,
    )

with live_dag("live_sigkill"):
    RecordingOperator(
        task_id="train",
        app=waiting_app("sigkilled"),
        deferrable=False,
        poll_interval=1,
        retries=1,
        retry_delay=timedelta(seconds=1),
    )

with live_dag("live_timeout"):
    RecordingOperator(
        task_id="on_worker",
        app=waiting_app("timeout-worker-forever", forever=True),
        deferrable=False,
        poll_interval=1,
        execution_timeout=timedelta(seconds=30),
    )
    RecordingOperator(
        task_id="deferred",
        app=waiting_app("timeout-deferred-forever", forever=True),
        deferrable=True,
        poll_interval=1,
        execution_timeout=timedelta(seconds=30),
    )
