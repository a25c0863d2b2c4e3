"""Failure paths: a failing app retried by Airflow, and one with fail_fast (no retries)."""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")


def failing(name: str) -> AppDef:
    script = f"echo start >> {WORK}/{name}_starts; echo boom >&2; exit 3"
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


with DAG("tx_failure", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(
        task_id="flaky",
        app=failing("flaky"),
        poll_interval=0.2,
        retries=2,
        retry_delay=timedelta(seconds=0),
    )
    TorchXOperator(
        task_id="fatal",
        app=failing("fatal"),
        poll_interval=0.2,
        retries=2,
        retry_delay=timedelta(seconds=0),
        fail_fast=True,
    )
