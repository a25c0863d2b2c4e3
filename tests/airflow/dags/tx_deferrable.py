"""Deferrable mode: the triggerer waits (inline under dag.test()); success and failure.

The ``ok`` app runs until its task defers (the operator below creates the app's release file
right before deferring), so that task always waits in the triggerer, however loaded the machine.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")


def app(name: str, script: str) -> AppDef:
    return AppDef(
        name=name, roles=[Role(name="r", image=WORK, entrypoint="sh", args=["-c", script])]
    )


class ReleasingOperator(TorchXOperator):
    """Lets its app finish once the task defers."""

    def defer(self, **kwargs):
        Path(WORK, f"release_{self.task_id}").touch()
        super().defer(**kwargs)


with DAG("tx_deferrable", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    ReleasingOperator(
        task_id="ok",
        app=app(
            "dok",
            "for i in 1 2 3 4 5; do echo deferred-line-$i; done;"
            f" while [ ! -e {WORK}/release_ok ]; do sleep 0.1; done",
        ),
        deferrable=True,
        defer_after=0,
        poll_interval=0.5,
    )
    TorchXOperator(
        task_id="bad",
        app=app("dbad", "echo about-to-fail; echo deferred-boom >&2; exit 4"),
        deferrable=True,
        defer_after=0,
        poll_interval=0.5,
    )
