"""Example DAG: TorchX apps as Airflow tasks on the local scheduler.

* ``greet`` runs the builtin ``utils.echo`` component with templated arguments;
* ``train`` runs a 2-replica AppDef, deferred to the triggerer (no worker slot held while it
  runs), and returns its final status (XCom ``return_value``; ``app_handle`` and ``ui_url`` are
  pushed before waiting);
* ``report`` waits on ``train``'s app handle with a sensor in reschedule mode.

Put this file in your DAGs folder, or run it once locally (SQLite is enough; every Airflow 3
release, 3.0 included, the exit status says whether the run succeeded)::

    export AIRFLOW_HOME=$(mktemp -d) AIRFLOW__CORE__LOAD_EXAMPLES=False
    export AIRFLOW__CORE__DAGS_FOLDER=$PWD/examples/airflow
    airflow db migrate
    python examples/airflow/torchx_dag.py
"""

from __future__ import annotations

import sys
from datetime import datetime

from airflow.sdk import DAG

if not hasattr(DAG, "test"):  # Airflow 3.0: `DAG.test()` is on the core DAG class only
    from airflow.models.dag import DAG  # type: ignore[assignment,no-redef]

from torchx_airflow import TorchXOperator, TorchXSensor
from torchx_core.specs import AppDef, Role

TRAIN_SCRIPT = """
import os
rank = int(os.environ.get("TORCHX_REPLICA_IDX", "0"))
total = sum(i * i for i in range(1000 * (rank + 1)))
print(f"replica {rank} of run {os.environ['RUN_ID']}: sum of squares = {total}")
"""

with DAG(
    "torchx_example",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 0},  # launcher tasks: retries multiply with the app's own retries
) as dag:
    greet = TorchXOperator(
        task_id="greet",
        component="utils.echo",
        component_args={"msg": "hello from {{ dag.dag_id }} in {{ run_id }}"},  # no `ds` on 3.0
        scheduler="local_cwd",
        poll_interval=1,
    )
    train = TorchXOperator(
        task_id="train",
        app=AppDef(
            name="example-train",
            roles=[
                Role(
                    name="trainer",
                    image=".",
                    entrypoint=sys.executable,
                    args=["-c", TRAIN_SCRIPT],
                    env={"RUN_ID": "{{ run_id }}"},
                    num_replicas=2,
                )
            ],
        ),
        scheduler="local_cwd",
        deferrable=True,
        poll_interval=1,
        log_tail_lines=20,
    )
    report = TorchXSensor(
        task_id="report",
        app_handle="{{ ti.xcom_pull(task_ids='train', key='app_handle') }}",
        mode="reschedule",
        poke_interval=1,
        timeout=600,
    )
    greet >> train >> report

if __name__ == "__main__":
    run = dag.test()
    print(f"dag run {run.run_id}: {run.state}")
    sys.exit(0 if str(run.state).endswith("success") else 1)
