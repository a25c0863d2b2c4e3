from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from torchx_core.tracker.api import AppRun

TRACKER_ENV_PREFIXES = ("TORCHX_TRACKER", "TORCHX_JOB_ID", "TORCHX_PARENT_RUN_ID")


@pytest.fixture(autouse=True)
def clean_tracker_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No tracker variables of the calling shell leak in; the AppRun singleton is reset."""
    for key in list(os.environ):
        if key.startswith(TRACKER_ENV_PREFIXES):
            monkeypatch.delenv(key)
    AppRun.run_from_env.cache_clear()
    yield
    AppRun.run_from_env.cache_clear()


@pytest.fixture(scope="session")
def mlflow_server() -> Iterator[str]:
    """An MLflow tracking server on loopback (scripts/services/mlflow), stopped by PID at session
    end when this session started it."""
    from support.service_helpers import run_service_script, start_service

    port = os.environ.setdefault("MLFLOW_PORT", "15000")
    started = start_service("mlflow", f"mlflow-{port}.pid")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if started:
            run_service_script("mlflow", "stop.sh")
