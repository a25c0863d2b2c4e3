"""Shared benchmark helpers: the TorchX 0.7.0 baseline venv and simple timing."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE_DIR = REPO / ".bench" / "torchx070"
OUR_PYTHON = REPO / ".venv" / "bin" / "python"


def torchx070_python() -> Path:
    """Returns the python of a separate venv holding TorchX 0.7.0 from PyPI (made on first use)."""
    py = BASELINE_DIR / "bin" / "python"
    if not (py.exists() and _imports(py, "torchx")):
        subprocess.run([sys.executable, "-m", "venv", str(BASELINE_DIR)], check=True)
        # TorchX 0.7.0 predates setuptools' removal of pkg_resources; pin what it imports.
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "torchx==0.7.0", "setuptools<81"],
            check=True,
        )
    return py


def _imports(py: Path, module: str) -> bool:
    return subprocess.run([str(py), "-c", f"import {module}"], capture_output=True).returncode == 0


def best_of(n: int, fn: Callable[[], object]) -> tuple[float, float]:
    """Runs ``fn`` n times; returns (best, median) wall seconds."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def time_command(
    cmd: list[str], n: int = 10, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Best and median wall time of a whole command over n runs (output discarded)."""
    full_env = {**os.environ, **(env or {})}

    def run() -> None:
        subprocess.run(
            cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=full_env
        )

    run()  # warm the page cache
    return best_of(n, run)
