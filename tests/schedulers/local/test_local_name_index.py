"""The local root's index by name (issue 35, finding 9): attaching by name reads the status of the
apps of that name only, however many apps the root holds."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from local_helpers import wait_until

from torchx_core.runner import Runner
from torchx_core.runner.lifecycle import AppLifecycle
from torchx_core.schedulers.local import _name_index, _state
from torchx_core.specs import AppDef, AppState, Role


def _app(name: str, cmd: str = "true") -> AppDef:
    entrypoint, *args = cmd.split()
    role = Role(name="r", image=os.getcwd(), entrypoint=entrypoint, args=args)
    return AppDef(name=name, roles=[role])


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = _state.read_status

    def read_status(app_dir: str, app_id: str | None = None, **kw: Any) -> Any:
        reads.append(app_id or app_dir)
        return real(app_dir, app_id, **kw)

    monkeypatch.setattr(_state, "read_status", read_status)
    return reads


def _ended(runner: Runner, handle: str) -> bool:
    """SUCCEEDED, and its supervisor gone: it exits a moment after writing the final status, and
    while it lives the app is not collected."""
    status = runner.status(handle)
    if status is None or status.state != AppState.SUCCEEDED:
        return False
    app_dir = os.path.join(os.environ[_state.ROOT_ENV], handle.rsplit("/", 1)[1])
    return not _state.supervisor_alive(app_dir)


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


def _id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


def _index_file(root: str, name: str) -> Path:
    return Path(_name_index._file(root, name))


def test_collection_drops_the_index_entries_of_removed_apps_only(local_root: str) -> None:
    with Runner("t", {"local_cwd": _local}) as runner:
        gone = [runner.run(_app("gone"), "local_cwd") for _ in range(2)]
        done = runner.run(_app("mixed"), "local_cwd")
        live = runner.run(_app("mixed", "sleep 60"), "local_cwd")
        assert wait_until(lambda: all(_ended(runner, h) for h in [*gone, done]), 60)
        removed = _state.collect_garbage(local_root, ttl=1, now=time.time() + 10)
        assert sorted(removed) == sorted(_id(h) for h in [*gone, done])
        assert not _index_file(local_root, "gone").exists()  # emptied: deleted
        assert _index_file(local_root, "mixed").read_text() == f"{_id(live)}\n"
        assert [r.app_handle for r in runner.list_named("local_cwd", "mixed") or []] == [live]
        assert runner.list_named("local_cwd", "gone") == []
        assert sorted(os.listdir(Path(local_root, _name_index.INDEX))) == sorted(
            [".complete", _index_file(local_root, "mixed").name]
        )
        runner.cancel(live)


_FORGET_STALLED = """
import os, sys, time
from torchx_core.schedulers.local import _name_index
root, name, app_id, ready, go = sys.argv[1:]
path, unlink = _name_index._file(root, name), os.unlink
def stalled_unlink(p, *a, **kw):
    if p == path:  # the collection holds the file's lock: let the submit race it now
        open(ready, "w").close()
        while not os.path.exists(go):
            time.sleep(0.01)
    return unlink(p, *a, **kw)
os.unlink = stalled_unlink
_name_index.forget(root, {name: [app_id]})
"""


def _waiting_flocks() -> int:
    """The flock requests blocked right now, machine-wide (``/proc/locks`` "->" lines)."""
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and "FLOCK" in line)


def test_a_submit_racing_the_collection_keeps_its_entry(local_root: str, tmp_path: Path) -> None:
    with Runner("t", {"local_cwd": _local}) as runner:
        old = runner.run(_app("race"), "local_cwd")
        assert wait_until(lambda: _ended(runner, old), 60)
        assert runner.list_named("local_cwd", "race")  # the index is complete
        ready, go = tmp_path / "ready", tmp_path / "go"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        collector = subprocess.Popen(
            [sys.executable, "-c", _FORGET_STALLED, local_root, "race", _id(old), ready, go],
            env=env,
        )
        try:
            assert wait_until(ready.exists, 30), "the collection never reached the unlink"
            waiting = _waiting_flocks()
            new: list[str] = []
            submit = threading.Thread(
                target=lambda: new.append(runner.run(_app("race"), "local_cwd"))
            )
            submit.start()
            # the submit's append waits for the collection's lock on the index file
            assert wait_until(lambda: _waiting_flocks() > waiting, 30), "the append did not wait"
            go.touch()
            assert collector.wait(30) == 0
            submit.join(30)
        finally:
            go.touch()
            collector.wait(30)
        assert new, "the racing submit failed"
        assert _name_index.app_ids(local_root, "race") == [_id(new[0])]
        assert [r.app_handle for r in runner.list_named("local_cwd", "race") or []] == new
        assert wait_until(lambda: _ended(runner, new[0]), 60)


def _local(session_name: str, **kwargs: Any) -> Any:
    from torchx_core.schedulers.local.scheduler import create_scheduler

    return create_scheduler(session_name, **kwargs)


def test_delete_waits_for_the_supervisor_of_an_app_that_just_ended(
    local_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its status is final a moment before its supervisor exits; removing the directory
    meanwhile raced the supervisor's last writes ("stopped but not (fully) deleted")."""
    waited: list[tuple[str, bool]] = []
    real = _state.wait_supervisor

    def wait_supervisor(app_dir: str, timeout: float | None = None) -> bool:
        waited.append((app_dir, os.path.isdir(app_dir)))
        return real(app_dir, timeout)

    with Runner("t", {"local_cwd": _local}) as runner:
        handle = runner.run(_app("deleted"), "local_cwd")
        assert wait_until(lambda: runner.status(handle).state == AppState.SUCCEEDED, 60)  # type: ignore[union-attr]
        monkeypatch.setattr(_state, "wait_supervisor", wait_supervisor)
        runner.delete(handle)
    assert waited == [(os.path.join(local_root, _id(handle)), True)]  # before the removal
    assert not os.path.exists(os.path.join(local_root, _id(handle)))
