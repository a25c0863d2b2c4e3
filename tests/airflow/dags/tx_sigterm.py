"""SIGTERM to the worker while it waits: the operator's on_kill cancels the app."""

import os
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")

with DAG("tx_sigterm", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(
        task_id="train",
        app=AppDef(
            name="sigterm",
            roles=[
                Role(
                    name="r",
                    image=WORK,
                    entrypoint="sh",
                    args=[
                        "-c",
                        f"echo $$$$ > {WORK}/sigterm.${{replica_id}}.pid; sleep 300 & wait",
                    ],
                    num_replicas=2,
                )
            ],
        ),
        poll_interval=0.2,
    )
