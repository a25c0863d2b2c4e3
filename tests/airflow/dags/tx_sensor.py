"""Sensors in poke, reschedule and deferrable mode, each on an app submitted with ``wait=False``.

Each app runs until its sensor has seen it running once (the sensor below creates the app's
release file after a not-done poke), so every sensor really has to wait.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator, TorchXSensor
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")


class ReleasingSensor(TorchXSensor):
    """Lets its app finish only after a poke saw it not done."""

    def poke(self, context):
        done = super().poke(context)
        if not done:
            Path(WORK, f"release_{self.task_id}").touch()
        return done


with DAG("tx_sensor", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    for mode in ("poke", "reschedule", "deferrable"):
        watcher = f"watch_{mode}"
        wait = f"while [ ! -e {WORK}/release_{watcher} ]; do sleep 0.1; done"
        submit = TorchXOperator(
            task_id=f"submit_{mode}",
            app=AppDef(
                name=f"bg-{mode}",
                roles=[Role(name="worker", image=WORK, entrypoint="sh", args=["-c", wait])],
            ),
            wait=False,
        )
        watch = ReleasingSensor(
            task_id=watcher,
            app_handle="{{ ti.xcom_pull(task_ids='submit_" + mode + "', key='app_handle') }}",
            mode="reschedule" if mode == "reschedule" else "poke",
            deferrable=mode == "deferrable",
            poke_interval=1,
            timeout=300,
        )
        submit >> watch
