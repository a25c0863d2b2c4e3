"""Fixtures of the local scheduler tests: a private state root per test, and a leak check.

Every replica inherits the launcher's environment, which holds ``TORCHX_LOCAL_ROOT=<this test's
root>``; after the test, any process still carrying it (a replica, a grandchild, a supervisor
started as a fresh interpreter) is a leak: it is killed by pid and the test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local.scheduler import LocalScheduler, create_scheduler


@pytest.fixture
def local_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh state root (``TORCHX_LOCAL_ROOT``) for one test; fails it on leaked processes."""
    root = str(tmp_path / "torchx-local")
    monkeypatch.setenv(_state.ROOT_ENV, root)
    yield root
    marker = f"{_state.ROOT_ENV}={root}"
    sched = create_scheduler("cleanup", root=root)
    for app_id, app_dir in _state.iter_app_dirs(root):
        if _state.supervisor_alive(app_dir):
            sched.cancel(app_id)
    leaked = (
        live_processes_with_env(marker)
        if not wait_until(lambda: not live_processes_with_env(marker), timeout=5)
        else []
    )
    for pid in leaked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not leaked, f"processes left behind by the test: {leaked}"
    running = [a for a, d in _state.iter_app_dirs(root) if _state.supervisor_alive(d)]
    assert not running, f"supervisors still running after cancel: {running}"


@pytest.fixture
def sched(local_root: str) -> LocalScheduler:
    """A ``local_cwd`` scheduler on the test's root."""
    return create_scheduler("test", root=local_root)
