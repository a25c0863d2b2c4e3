"""The DAG of the dashboard's Airflow link test (``test_dashboard_airflow_link.py``).

One TorchX task on the ``torchx_dashboard`` connection, whose ``dashboard_url`` the test sets."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")

with DAG(
    "live_dashboard_link",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 0},
    tags=["torchx-live"],
):
    TorchXOperator(
        task_id="train",
        app=AppDef(
            name="dash-af",
            roles=[
                Role(
                    name="r", image=WORK, entrypoint="sh", args=["-c", "echo trained-for-dashboard"]
                )
            ],
        ),
        torchx_conn_id="torchx_dashboard",
        poll_interval=1,
    )
