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

from torchx_airflow import TorchXOperator, TorchXSensor
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


def gated_app(name: str) -> AppDef:
    """An app that starts, then prints three lines only once the test creates ``<run_id>.go``,
    and ends once it creates ``<run_id>.release``."""
    prefix = f"{WORK}/{RUN}.{name}"
    script = (
        f"echo start >> {prefix}.starts; echo $$$$ > {prefix}.pid;"
        f" while [ ! -e {WORK}/{RUN}.go ]; do sleep 0.2; done;"
        f" for i in 1 2 3; do echo {name}-live-$i; done;"
        f" while [ ! -e {WORK}/{RUN}.release ]; do sleep 0.2; done; echo {name}-done"
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
        defer_after=0,
        poll_interval=1,
        log_tail_lines=3,
    )

with live_dag("live_defer_stream"):
    # issue 35 item 7: the app prints only after the task deferred
    RecordingOperator(
        task_id="train", app=gated_app("streamed"), deferrable=True, defer_after=0, poll_interval=1
    )

with live_dag("live_mark_failed"):
    RecordingOperator(
        task_id="train",
        app=waiting_app("markfailed-forever", forever=True),
        deferrable=True,
        defer_after=0,
        poll_interval=1,
    )

with live_dag("live_clear"):
    AdoptionAwaitingOperator(
        task_id="train",
        app=waiting_app("cleared"),
        deferrable=True,
        defer_after=0,
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
        defer_after=0,
        poll_interval=1,
        execution_timeout=timedelta(seconds=30),
    )


def numbered_app(name: str, *, release_after: int | None = None) -> AppDef:
    """Prints 100 numbered lines ``<name>-000`` ... ``<name>-099`` and exits; with
    ``release_after``, waits for the run's release file after that many lines."""
    if release_after is None:
        script = f"seq -f '{name}-%03g' 0 99"
    else:
        script = (
            f"seq -f '{name}-%03g' 0 {release_after - 1};"
            f" while [ ! -e {WORK}/{RUN}.release ]; do sleep 0.2; done;"
            f" seq -f '{name}-%03g' {release_after} 99"
        )
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


with live_dag("live_hundred"):
    # issue 22 item 1: every line once, deferrable or not, however short the app
    TorchXOperator(
        task_id="on_worker", app=numbered_app("hundred-worker"), deferrable=False, poll_interval=1
    )
    TorchXOperator(
        task_id="deferrable", app=numbered_app("hundred-defer"), deferrable=True, poll_interval=1
    )
    # deferred half-way: the lines before are streamed on the worker, the rest after resuming
    TorchXOperator(
        task_id="split",
        app=numbered_app("hundred-split", release_after=50),
        deferrable=True,
        defer_after=0,
        poll_interval=1,
    )

with live_dag("live_short_deferrable"):
    # issue 22 item 4: a 2 s app under a deferrable task ends before defer_after: no deferral
    TorchXOperator(
        task_id="train",
        app=AppDef(
            name="short2s",
            roles=[
                Role(
                    name="r", image=WORK, entrypoint="sh", args=["-c", "sleep 2; echo short2s-done"]
                )
            ],
        ),
        deferrable=True,
        poll_interval=1,
    )

with live_dag("live_sensor_reschedule"):
    # issue 35 item 8: a reschedule-mode sensor asking for 5 s between pokes (Airflow 3.3's
    # stale-event race failed it 3 times in 3 when it was rescheduled that soon)
    submitted = TorchXOperator(task_id="submit", app=waiting_app("rescheduled"), wait=False)
    watched = TorchXSensor(
        task_id="watch",
        app_handle="{{ ti.xcom_pull(task_ids='submit', key='app_handle') }}",
        mode="reschedule",
        poke_interval=5,
        timeout=900,
    )
    submitted >> watched

with DAG(
    "live_bad_config",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
    tags=["torchx-live"],
):
    # issue 22 item 3: configuration errors fail the first try, without the retry
    TorchXOperator(
        task_id="bad_option",
        app=waiting_app("badoption"),
        scheduler="local_cwd",
        cfg={"grace_periodd": 1},
    )
    TorchXOperator(
        task_id="bad_conn_option", app=waiting_app("badconn"), torchx_conn_id="torchx_badcfg"
    )
    TorchXOperator(
        task_id="missing_conn", app=waiting_app("noconn"), torchx_conn_id="torchx_absent"
    )
