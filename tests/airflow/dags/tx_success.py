"""Success paths: a templated multi-replica AppDef, a templated component, mapped tasks."""

import os
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")

with DAG("tx_success", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(
        task_id="train",
        app=AppDef(
            name="train",
            roles=[
                Role(
                    name="trainer",
                    image=WORK,
                    entrypoint="sh",
                    args=["-c", "echo run={{ run_id }} dag={{ dag.dag_id }}; echo bye"],
                    num_replicas=2,
                )
            ],
        ),
        poll_interval=0.2,
    )
    TorchXOperator(
        task_id="echo_component",
        component="utils.echo",
        component_args=["--msg", "hello from {{ dag.dag_id }}/{{ task.task_id }}"],
        poll_interval=0.2,
    )
    # dynamic task mapping: one app per map index, each with its own deterministic name
    TorchXOperator.partial(task_id="mapped", component="utils.echo", poll_interval=0.2).expand(
        component_args=[["--msg", "first"], ["--msg", "second"]]
    )
