"""Which processes of an app or a process group are still alive (read from ``/proc``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def live_processes(match: Callable[[Path, list[str]], bool]) -> list[int]:
    """PIDs of the live (not zombie) processes for which ``match(pid_dir, stat_fields)`` holds."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and match(Path(f"/proc/{entry}"), fields):
                found.append(int(entry))
        except OSError:  # the process is gone
            continue
    return found


def group_alive(pgid: int) -> list[int]:
    """PIDs (not zombies) whose process group is ``pgid``."""
    return live_processes(lambda _, fields: int(fields[2]) == pgid)


def app_processes(handle: str) -> list[int]:
    """PIDs (not zombies) of every process of an app: the local scheduler gives each replica
    ``TORCHX_JOB_ID=<handle>``, which its children inherit (race-free, no PID file needed)."""
    marker = f"TORCHX_JOB_ID={handle}".encode()
    return live_processes(lambda d, _: marker in (d / "environ").read_bytes().split(b"\0"))
