"""A Prefect flow that runs a two-step TorchX pipeline on the local scheduler.

Run it end to end (Prefect starts a temporary local API server when PREFECT_API_URL is unset)::

    python examples/prefect/pipeline.py --message hi --train-seconds 2
    python examples/prefect/pipeline.py --async     # the same flow with the async task

Each step is a TorchX app launched by ``torchx_prefect.run_app_sync``: its replica logs go to the
Prefect run logs, a markdown status table (and a link to the app directory) is published as an
artifact, and a failed app fails the task with the app's error and a log tail. Cancelling or
crashing the flow cancels every app it started (the ``cancel_flow_apps`` hooks), and so does a
task timeout (the task's own cleanup).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from prefect import flow

from torchx_core.specs import AppDef, Role
from torchx_prefect import cancel_flow_apps, run_app, run_app_sync

PREPARE = """
import os
print("preparing data for", os.environ["EXAMPLE_MESSAGE"], flush=True)
"""

TRAIN = """
import os, time
rank = os.environ["TORCHX_REPLICA_IDX"]
steps = max(1, int(float(os.environ["EXAMPLE_TRAIN_SECONDS"]) / 0.2))
for step in range(steps):
    print(f"replica {rank} step {step}/{steps}", flush=True)
    time.sleep(0.2)
print(f"replica {rank} done: {os.environ['EXAMPLE_MESSAGE']}", flush=True)
"""


def python_app(name: str, code: str, env: dict[str, str], num_replicas: int = 1) -> AppDef:
    """An AppDef whose replicas run ``code`` with this interpreter (in the current directory)."""
    role = Role(
        name=name,
        image=os.getcwd(),
        entrypoint=sys.executable,
        args=["-u", "-c", code],
        env=env,
        num_replicas=num_replicas,
    )
    return AppDef(name=name, roles=[role])


@flow(
    name="torchx-pipeline",
    on_cancellation=[cancel_flow_apps],
    on_crashed=[cancel_flow_apps],
)
def torchx_pipeline(
    message: str = "hello",
    train_seconds: float = 1.0,
    scheduler: str = "local_cwd",
    poll_interval: float = 0.5,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Prepares, then trains with two replicas; returns both app handles and the final state.

    Args:
        message: printed by both steps
        train_seconds: how long each training replica runs
        scheduler: the TorchX scheduler to run on
        poll_interval: seconds between status reads
        extra_env: more environment variables for the replicas
    """
    env = {"EXAMPLE_MESSAGE": message, "EXAMPLE_TRAIN_SECONDS": str(train_seconds)}
    env.update(extra_env or {})
    prepare = run_app_sync(
        python_app("prepare", PREPARE, env), scheduler=scheduler, poll_interval=poll_interval
    )
    train = run_app_sync(
        python_app("train", TRAIN, env, num_replicas=2),
        scheduler=scheduler,
        poll_interval=poll_interval,
    )
    return {
        "prepare": prepare.app_handle,
        "train": train.app_handle,
        "state": train.state.name,
    }


@flow(
    name="torchx-pipeline-async",
    on_cancellation=[cancel_flow_apps],
    on_crashed=[cancel_flow_apps],
)
async def torchx_pipeline_async(
    message: str = "hello",
    train_seconds: float = 1.0,
    scheduler: str = "local_cwd",
    poll_interval: float = 0.5,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The same pipeline with the async task ``torchx_prefect.run_app`` (same arguments)."""
    env = {"EXAMPLE_MESSAGE": message, "EXAMPLE_TRAIN_SECONDS": str(train_seconds)}
    env.update(extra_env or {})
    prepare = await run_app(
        python_app("prepare", PREPARE, env), scheduler=scheduler, poll_interval=poll_interval
    )
    train = await run_app(
        python_app("train", TRAIN, env, num_replicas=2),
        scheduler=scheduler,
        poll_interval=poll_interval,
    )
    return {
        "prepare": prepare.app_handle,
        "train": train.app_handle,
        "state": train.state.name,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the flow with command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--message", default="hello")
    parser.add_argument("--train-seconds", type=float, default=1.0)
    parser.add_argument("--scheduler", default="local_cwd")
    parser.add_argument(
        "--async", dest="use_async", action="store_true", help="run the async flavour of the flow"
    )
    args = parser.parse_args(argv)
    if args.use_async:
        import asyncio

        return asyncio.run(
            torchx_pipeline_async(
                message=args.message, train_seconds=args.train_seconds, scheduler=args.scheduler
            )
        )
    return torchx_pipeline(
        message=args.message, train_seconds=args.train_seconds, scheduler=args.scheduler
    )


if __name__ == "__main__":
    print(main())
