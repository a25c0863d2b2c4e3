"""The local root's index by name (issue 35, finding 9): attaching by name reads the status of the
apps of that name only, however many apps the root holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from local_helpers import wait_until

from torchx_core.runner import Runner
from torchx_core.runner.lifecycle import AppLifecycle
from torchx_core.schedulers.local import _name_index, _state
from torchx_core.specs import AppDef, AppState, Role


def _app(name: str) -> AppDef:
    return AppDef(name=name, roles=[Role(name="r", image=os.getcwd(), entrypoint="true")])


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = _state.read_status

    def read_status(app_dir: str, app_id: str | None = None, **kw: Any) -> Any:
        reads.append(app_id or app_dir)
        return real(app_dir, app_id, **kw)

    monkeypatch.setattr(_state, "read_status", read_status)
    return reads


def _ended(runner: Runner, handle: str) -> bool:
    status = runner.status(handle)
    return status is not None and status.state == AppState.SUCCEEDED


def test_attach_by_name_reads_only_the_apps_of_that_name(
    local_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runner("t", {"local_cwd": _local}) as runner:
        others = [runner.run(_app(f"other{i}"), "local_cwd") for i in range(6)]
        life = AppLifecycle(runner, "local_cwd", owner="test")
        first = life.attach(_app("step"), ("d", "t", 1))
        assert first.how == "submitted"
        assert wait_until(lambda: all(_ended(runner, h) for h in [*others, first.app_handle]), 60)
        reads = _counting_reads(monkeypatch)
        again = life.attach(_app("step"), ("d", "t", 1))
        assert (again.how, again.app_handle) == ("reused", first.app_handle)
        # the named app only: its list row, then its status (never the 6 others)
        app_id = first.app_handle.rsplit("/", 1)[1]
        assert set(reads) == {app_id}, reads


def test_a_root_made_before_the_index_is_indexed_once_by_a_full_scan(
    local_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runner("t", {"local_cwd": _local}) as runner:
        handle = runner.run(_app("old-0123456789"), "local_cwd")
        other = runner.run(_app("x"), "local_cwd")
        assert wait_until(lambda: _ended(runner, handle) and _ended(runner, other), 60)
        # as a root written by a release without the index
        index = Path(local_root, _name_index.INDEX)
        for f in index.iterdir():
            f.unlink()
        index.rmdir()
        reads = _counting_reads(monkeypatch)
        named = runner.list_named("local_cwd", "old-0123456789")
        assert [r.app_handle for r in named or []] == [handle]
        assert len(reads) == 3  # the full scan (2 apps), then the named app
        reads.clear()
        assert [r.app_handle for r in runner.list_named("local_cwd", "x") or []] == [other]
        assert len(reads) == 1


def test_apps_deleted_since_are_skipped(local_root: str) -> None:
    with Runner("t", {"local_cwd": _local}) as runner:
        handle = runner.run(_app("gone"), "local_cwd")
        assert wait_until(lambda: _ended(runner, handle), 60)
        assert runner.list_named("local_cwd", "gone") is not None
        runner.delete(handle)
        assert runner.list_named("local_cwd", "gone") == []
        assert runner.list_named("local_cwd", "never-submitted") == []


def _local(session_name: str, **kwargs: Any) -> Any:
    from torchx_core.schedulers.local.scheduler import create_scheduler

    return create_scheduler(session_name, **kwargs)
