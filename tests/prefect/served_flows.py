"""Flows served by a real Prefect runner (``prefect.serve``) for the deployment tests.

Run as a script by the ``served_flows`` fixture, in the background, against the test server::

    PREFECT_API_URL=... python tests/prefect/served_flows.py

Each flow run then executes in its own process started by the runner (the "flow-run process"),
which writes its PID to ``pid_file`` so a test can SIGKILL exactly that process. The apps run on
the local scheduler under ``TORCHX_LOCAL_ROOT`` (inherited from the fixture).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from prefect import flow, serve

from torchx_core.specs import AppDef, Role
from torchx_prefect import run_app, run_app_sync

DEPLOYMENT = "served"
"""The deployment name of every flow here (``<flow name>/served``)."""


def _write_pid(pid_file: str) -> None:
    Path(pid_file).write_text(f"{os.getpid()}\n")


def sleeper_app(name: str, seconds: int = 600) -> AppDef:
    """One replica that starts a child process (whole process groups must be stopped) and sleeps."""
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({seconds})'])\n"
        "print('sleeping', flush=True)\n"
        f"time.sleep({seconds})\n"
    )
    role = Role(
        name="worker", image=os.getcwd(), entrypoint=sys.executable, args=["-u", "-c", code]
    )
    return AppDef(name=name, roles=[role])


def waiter_app(name: str, release: str) -> AppDef:
    """Prints five numbered lines and ``before``, waits (bounded) for the file ``release``,
    prints ``after``, exits 0."""
    code = (
        "import os, time\n"
        "for i in range(1, 6): print(f'early line {i} of 5', flush=True)\n"
        "print('before release', flush=True)\n"
        "deadline = time.monotonic() + 900\n"
        f"while not os.path.exists({release!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "print('after release', flush=True)\n"
    )
    role = Role(
        name="worker", image=os.getcwd(), entrypoint=sys.executable, args=["-u", "-c", code]
    )
    return AppDef(name=name, roles=[role])


@flow(name="torchx-sleeper")
def sleeper_flow(name: str, pid_file: str, timeout_seconds: float | None = None) -> dict[str, Any]:
    """One long app; ``timeout_seconds`` sets the task's timeout."""
    _write_pid(pid_file)
    task = (
        run_app_sync
        if timeout_seconds is None
        else run_app_sync.with_options(timeout_seconds=timeout_seconds)
    )
    return task(sleeper_app(name), poll_interval=0.3).to_dict()


@flow(name="torchx-sleeper-async")
async def sleeper_flow_async(name: str, pid_file: str) -> dict[str, Any]:
    """One long app, launched by the async task."""
    _write_pid(pid_file)
    return (await run_app(sleeper_app(name), poll_interval=0.3)).to_dict()


@flow(name="torchx-twin-waiters")
def twin_waiters_flow(name: str, release: str, pid_file: str) -> list[dict[str, Any]]:
    """Two concurrent calls of the task with the SAME AppDef: they must be two apps, and a
    re-run of this flow run must reattach to those two (no third app)."""
    _write_pid(pid_file)
    app = waiter_app(name, release)
    futures = [run_app_sync.submit(app, poll_interval=0.3) for _ in range(2)]
    return [f.result().to_dict() for f in futures]


@flow(name="torchx-twin-waiters-async")
async def twin_waiters_flow_async(name: str, release: str, pid_file: str) -> list[dict[str, Any]]:
    """The async twin of :func:`twin_waiters_flow` (two concurrent ``run_app`` calls)."""
    _write_pid(pid_file)
    app = waiter_app(name, release)
    results = await asyncio.gather(*(run_app(app, poll_interval=0.3) for _ in range(2)))
    return [r.to_dict() for r in results]


FLOWS = [sleeper_flow, sleeper_flow_async, twin_waiters_flow, twin_waiters_flow_async]


if __name__ == "__main__":
    serve(*(f.to_deployment(name=DEPLOYMENT) for f in FLOWS), print_starting_message=True)
