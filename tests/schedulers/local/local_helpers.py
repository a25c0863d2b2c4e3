"""Helpers of the local scheduler tests (processes by environment, polling)."""

from __future__ import annotations

import os
import time


def processes_with_env(entry: str) -> list[int]:
    """Pids of the processes whose environment contains ``entry`` (``NAME=value``)."""
    want = entry.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def live_processes_with_env(entry: str) -> list[int]:
    """Like :func:`processes_with_env`, without zombies (exited, not yet reaped by init)."""
    out = []
    for pid in processes_with_env(entry):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            out.append(pid)
    return out


def wait_until(pred, timeout: float = 20.0, interval: float = 0.02) -> bool:
    """Polls ``pred()`` until it is true or ``timeout`` seconds passed; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return bool(value)
        time.sleep(interval)
