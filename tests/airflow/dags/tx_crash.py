"""Crash safety: the worker running ``train`` is SIGKILLed mid-wait; the next try reattaches.

The app appends one line to ``$TORCHX_AF_WORK/crash_starts`` each time it starts (so the test can
count submissions) and runs until the test creates ``$TORCHX_AF_WORK/crash_release``.
"""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from torchx_airflow import TorchXOperator
from torchx_core.specs import AppDef, Role

WORK = os.environ.get("TORCHX_AF_WORK", "/tmp")
# the app runs until the test creates the release file
WAIT_FOR_RELEASE = f"while [ ! -e {WORK}/crash_release ]; do sleep 0.2; done"

with DAG("tx_crash", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TorchXOperator(
        task_id="train",
        app=AppDef(
            name="crashy",
            roles=[
                Role(
                    name="trainer",
                    image=WORK,
                    entrypoint="sh",
                    args=[
                        "-c",
                        f"echo started >> {WORK}/crash_starts; {WAIT_FOR_RELEASE}; echo done",
                    ],
                )
            ],
        ),
        poll_interval=0.5,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )
