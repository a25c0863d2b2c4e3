from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from torchx_core.tracker.api import AppRun

TRACKER_ENV_PREFIXES = ("TORCHX_TRACKER", "TORCHX_JOB_ID", "TORCHX_PARENT_RUN_ID")


@pytest.fixture(autouse=True)
def clean_tracker_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No tracker variables of the calling shell leak in; the AppRun singleton is reset."""
    import os

    for key in list(os.environ):
        if key.startswith(TRACKER_ENV_PREFIXES):
            monkeypatch.delenv(key)
    AppRun.run_from_env.cache_clear()
    yield
    AppRun.run_from_env.cache_clear()
