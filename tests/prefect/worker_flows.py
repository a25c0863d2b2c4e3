"""Flows run by the ``torchx`` worker tests (loaded by Prefect's engine inside each app)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from prefect import flow, get_run_logger


@flow
def hello(marker: str = "") -> str:
    """Logs where it runs and returns."""
    get_run_logger().info(
        "hello from app %s on %s",
        os.environ.get("TORCHX_APP_ID"),
        os.environ.get("SLURM_JOB_ID", "no slurm"),
    )
    if marker:
        Path(marker).write_text(f"{time.time()}\n")
    return "ok"


@flow
def sleeper(started: str, seconds: float = 600) -> None:
    """Writes ``started`` once running (its pid), then sleeps."""
    Path(started).write_text(str(os.getpid()))
    time.sleep(seconds)


@flow
def failing() -> None:
    raise ValueError("boom from inside the flow")


@flow
def printer(lines: int = 30) -> None:
    """Prints numbered lines with plain ``print`` (not through a Prefect logger)."""
    for i in range(1, lines + 1):
        print(f"printed line {i} of {lines}", flush=True)
