"""Helpers of the Prefect integration tests: app processes left behind, app states, run logs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from torchx_core.runner import get_runner
from torchx_core.specs import AppState


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def app_processes(root: Path) -> list[tuple[int, str]]:
    """Live supervisors (from status files) and replicas/children (by TORCHX_APP_ID) under root."""
    app_ids = {d.name for d in root.iterdir() if d.is_dir()}
    found: list[tuple[int, str]] = []
    for d in root.iterdir():
        try:
            status = json.loads((d / "status.json").read_text())
        except (OSError, ValueError):
            continue
        pid = int(status.get("sup_pid") or 0)
        if pid and pid != os.getpid() and _alive(pid):
            found.append((pid, f"supervisor of {d.name}"))
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            if item.startswith(b"TORCHX_APP_ID=") and item[14:].decode() in app_ids:
                if _alive(int(proc.name)):
                    found.append((int(proc.name), item.decode()))
                break
    return found


def wait_no_app_processes(root: Path, timeout: float = 120.0) -> list[tuple[int, str]]:
    """Waits (bounded) for every app process under root to exit; returns those still alive."""
    deadline = time.monotonic() + timeout
    while (left := app_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def wait_terminal(handle: str, timeout: float = 120.0) -> AppState | None:
    """Polls (bounded) until the app is terminal; returns its last state (None if unknown)."""
    deadline = time.monotonic() + timeout
    with get_runner() as runner:
        while True:
            status = runner.status(handle)
            if status is None or status.is_terminal() or time.monotonic() > deadline:
                return None if status is None else AppState(status.state)
            time.sleep(0.2)


def flow_run_logs(flow_run_id: Any, *needles: str, timeout: float = 120.0) -> list[str]:
    """The messages of the flow run's logs in the Prefect API.

    Logs reach the API in batches from a background worker (its flush gives up after 5 s), so on
    a loaded machine they can arrive late: read again (bounded) until every ``needle`` is a
    substring of some message. The caller still asserts on what is returned.
    """
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    deadline = time.monotonic() + timeout
    while True:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            )
        messages = [log.message for log in logs]
        if time.monotonic() > deadline or all(any(n in m for m in messages) for n in needles):
            return messages
        time.sleep(0.5)


def task_runs(flow_run_id: Any) -> list[Any]:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )


def artifacts_of(task_run_id: Any) -> list[Any]:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterTaskRunId

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(task_run_id=ArtifactFilterTaskRunId(any_=[task_run_id]))
        )
