"""Helpers of the container/cloud integration fixtures and tests (docker, moto, ray).

* :func:`run_service_script` / :func:`start_service` run ``scripts/services/<svc>/*.sh`` and tell
  whether this call started the daemon (so a session stops only what it started, by PID);
* :func:`wait_for_app` polls ``describe`` until a condition on the app state holds;
* :func:`free_port` names a TCP port nothing listens on now (for a test's own listener).

A script that fails raises (with its output): a missing service fails the tests, never skips them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from torchx_core.schedulers.api import DescribeAppResponse
from torchx_core.specs import AppState, is_terminal

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICES = os.path.join(REPO, "scripts", "services")
RUN_DIR = os.environ.get("CI_RUN_DIR", "/run/torchx-ci")


def run_service_script(service: str, script: str, timeout: float = 600) -> str:
    """Runs ``scripts/services/<service>/<script>``; raises with its output if it fails."""
    path = os.path.join(SERVICES, service, script)
    proc = subprocess.run(
        ["bash", path], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{path} failed with exit code {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


def start_service(service: str, pidfile: str, script: str = "start.sh") -> bool:
    """Starts a service with its ``start.sh``; returns True if this call started it.

    "Started it" means no live process was recorded in its PID file before and one is after, so
    the session stops only daemons it started (a developer's running daemon is reused and left
    alone).
    """
    path = os.path.join(RUN_DIR, pidfile)
    running_before = _pid_alive(path)
    run_service_script(service, script)
    return not running_before and _pid_alive(path)


def _pid_alive(pidfile: str) -> bool:
    try:
        with open(pidfile, encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # zombies are gone
    except (OSError, ValueError, IndexError):
        return False


def wait_for_app(
    sched: Any,
    app_id: str,
    until: Callable[[AppState], bool] = is_terminal,
    timeout: float = 120,
    interval: float = 0.2,
) -> DescribeAppResponse:
    """Polls ``sched.describe(app_id)`` until ``until(state)``; fails on timeout or a lost app."""
    deadline = time.monotonic() + timeout
    while True:
        desc = sched.describe(app_id)
        assert desc is not None, f"{app_id} vanished"
        if until(desc.state):
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"{app_id} still {desc.state} after {timeout}s")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on this host now (the kernel's choice): a fixed port may be held by
    another listener, and a second listener on it fails or, on a shared network, steals the
    connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
