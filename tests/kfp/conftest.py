"""Fixtures for the KFP adapter's real runs: a private local-scheduler root and kfp.local."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

LOCAL_ROOT_ENV = "TORCHX_LOCAL_ROOT"


@pytest.fixture(scope="session")
def kfp_local_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One local-scheduler root for this session's KFP runs (apps of other tests stay apart)."""
    return tmp_path_factory.mktemp("kfp-local-root")


def _live_apps() -> list[str]:
    from torchx_core.runner import get_runner
    from torchx_core.specs import is_terminal

    with get_runner() as runner:
        return [a.app_handle for a in runner.list("local_cwd") if not is_terminal(a.state)]


def _cancel_all(handles: list[str]) -> None:
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        for handle in handles:
            runner.cancel(handle)


@pytest.fixture
def local_apps(kfp_local_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Points the local scheduler (and kfp.local's subprocesses) at the session root.

    After the test, every app in the root must be finished: anything still running is cancelled
    and the test fails.
    """
    monkeypatch.setenv(LOCAL_ROOT_ENV, str(kfp_local_root))
    yield kfp_local_root
    leftover = _live_apps()
    if leftover:
        _cancel_all(leftover)
        pytest.fail(f"apps left running after the test (cancelled now): {leftover}")


@pytest.fixture
def kfp_local(local_apps: Path, tmp_path: Path) -> Iterator[Path]:
    """kfp.local with the SubprocessRunner on the current interpreter (no venv, no pip)."""
    import kfp.local

    pipeline_root = tmp_path / "pipeline-root"
    kfp.local.init(
        runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root)
    )
    yield pipeline_root
