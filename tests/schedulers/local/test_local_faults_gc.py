"""Fault injection, group "data loss": garbage collection in a root that holds foreign entries.

Garbage collection must remove only what the local scheduler can prove it created (a marker
written first at creation), never follow a symlink, never touch anything outside the root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import LOCK_FILE, MARKER_FILE
from torchx_core.schedulers.local.scheduler import LocalScheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]

OLD = time.time() - 30 * 24 * 3600


def _age(path: Path) -> None:
    os.utime(path, (OLD, OLD), follow_symlinks=False)


def _tree(path: Path) -> dict[str, str]:
    """Every file under ``path`` (symlinks not followed) with its content or link target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if p.is_symlink():
                out[str(p.relative_to(path))] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p.relative_to(path))] = p.read_text()
    return out


def test_gc_in_a_root_holding_foreign_entries_touches_only_its_own_apps(
    local_root: str, sched: LocalScheduler, tmp_path: Path
) -> None:
    root = Path(local_root)
    root.mkdir(parents=True, exist_ok=True)
    dataset = tmp_path / "dataset"  # outside the root, reached through a user's symlink
    dataset.mkdir()
    (dataset / "train.csv").write_text("1,2,3\n")
    (root / "my-folder").mkdir()
    (root / "my-folder" / "notes.txt").write_text("keep me\n")
    (root / "data-link").symlink_to(dataset)
    (root / "dangling-abcdfghjklmn").symlink_to(tmp_path / "gone")
    (root / "notes-bcdfghjklmnp").write_text("a file named like an app\n")
    (root / "fake-app").mkdir()  # looks like an app (status file) but was not made by us
    (root / "fake-app" / "status.json").write_text('{"state": "SUCCEEDED", "ended": 1}')
    (root / ".new-half-bcdfghjklmnp").mkdir()  # hidden, without our marker: not ours either
    for entry in root.iterdir():
        _age(entry)
    foreign_before = _tree(root)
    dataset_before = _tree(dataset)

    # one of ours, finished long ago: collected
    old = AppDef("old", roles=[Role("r", image="", entrypoint="true")])
    old_id = sched.submit(old, {})
    sched.wait(old_id, 60)
    # one of ours with log_dir: only the root's link is collected, the user's log dir stays
    logs = tmp_path / "logs"
    kept_id = sched.submit(old, {"log_dir": str(logs)})
    sched.wait(kept_id, 60)
    for app_id in (old_id, kept_id):
        status_path = root / app_id / "status.json"
        status = _state.read_json(str(status_path))
        assert status is not None
        status["ended"] = OLD
        status_path.write_text(__import__("json").dumps(status))
    # an app whose creation was interrupted (launcher killed): its creator's lock is free
    half = root / ".new-half-cdfghjklmnpq"
    half.mkdir()
    (half / MARKER_FILE).write_text("half-cdfghjklmnpq")
    (half / LOCK_FILE).touch()
    (root / _state.GC_STAMP).unlink()  # the last collection was "long ago"

    # what the issue ran: one `torchx run -s local_cwd utils.echo`
    env = {**os.environ, _state.ROOT_ENV: local_root, _state.TTL_ENV: str(7 * 24 * 3600)}
    out = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "run", "-s", "local_cwd", "utils.echo",
         "--msg", "hi"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    assert not (root / old_id).exists()  # ours, old: removed
    assert not os.path.lexists(root / kept_id)  # our link: removed...
    assert (logs / sched.session_name / kept_id / "SUCCESS").exists()  # ...not the log dir
    assert not half.exists()  # interrupted creation: removed at once
    after = _tree(root)
    for name, content in foreign_before.items():
        assert after.get(name) == content, f"{name} was changed or removed by garbage collection"
    assert _tree(dataset) == dataset_before
    # and the root keeps working: list skips the foreign entries, shows ours
    listed = sched.list()
    assert [a.state for a in listed] == [AppState.SUCCEEDED]


def test_delete_never_follows_a_foreign_symlink(
    local_root: str, sched: LocalScheduler, tmp_path: Path
) -> None:
    root = Path(local_root)
    root.mkdir(parents=True, exist_ok=True)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("x")
    (root / "link-bcdfghjklmnp").symlink_to(precious)
    assert sched.describe("link-bcdfghjklmnp") is None
    sched.delete("link-bcdfghjklmnp")  # not an app of ours: nothing to delete
    assert (precious / "data").read_text() == "x" and (root / "link-bcdfghjklmnp").is_symlink()
