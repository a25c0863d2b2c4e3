"""Helpers for the KFP adapter's real-run tests (processes, waiting)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls ``predicate()`` until true; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def read_pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in directory.glob("*.pid") if p.read_text().strip()]

