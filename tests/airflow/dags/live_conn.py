"""DAGs of the connection tests (``test_airflow_connection_live.py``): TorchX tasks that name a
``torchx`` connection and give no scheduler or cfg, deferred and on a worker.

``torchx_envjson`` comes from an ``AIRFLOW_CONN_TORCHX_ENVJSON`` variable (JSON form) of the
deployment, ``torchx_cli`` from ``airflow connections add`` (both made by the tests).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")


def app(name: str, wait: bool) -> AppDef:
    """Echoes a line; with ``wait``, then waits for ``<run_id>.release`` (made by the test once it
    saw the deferred task's trigger)."""
    script = f"echo {name}-ran-with-{{{{ run_id }}}}"
    if wait:
        script += f"; while [ ! -e {WORK}/{{{{ run_id }}}}.release ]; do sleep 0.2; done"
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


for conn_id in ("torchx_envjson", "torchx_cli"):
    with DAG(
        f"live_conn_{conn_id}",
        schedule=None,
        start_date=datetime(2024, 1, 1),
        catchup=False,
        default_args={"retries": 0},
        tags=["torchx-live"],
    ):
        for mode, deferrable in (("deferred", True), ("worker", False)):
            TorchXOperator(
                task_id=mode,
                app=app(f"conn-{mode}", wait=deferrable),
                torchx_conn_id=conn_id,
                deferrable=deferrable,
                defer_after=0,
                poll_interval=1,
            )
