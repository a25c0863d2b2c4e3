"""Unit tests of the local scheduler's state decisions (run by ``make test-fast``).

The dead-supervisor sweep kills the app's processes (and only those of this app directory),
and the marker is proof of ownership for one app id only. A small app directory is made by
hand; the processes are real ``sleep`` processes carrying the app's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import LOCK_FILE, MARKER_FILE, STATUS_FILE, new_instance
from torchx_core.schedulers.local._procs import kill_apps_processes

APP = "unit-bcdfghjklmnp"


def _app_dir(root: Path, app_id: str = APP, marker: str | None = None) -> tuple[Path, str]:
    """An app directory whose supervisor is gone (lock free), status RUNNING; returns its
    instance."""
    d = root / app_id
    d.mkdir(parents=True)
    instance = new_instance(str(d))
    (d / MARKER_FILE).write_text(marker if marker is not None else f"{app_id}\n{instance}\n")
    (d / LOCK_FILE).write_text("999999\n")
    status = {
        "v": 1,
        "app_id": app_id,
        "name": "unit",
        "state": "RUNNING",
        "sup_pid": 999999,
        "created": 1.0,
        "updated": 1.0,
        "ended": None,
        "failed": None,
        "msg": "",
        "roles": [{"name": "r", "states": "R", "pids": [0]}],
    }
    (d / STATUS_FILE).write_text(json.dumps(status))
    return d, instance


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _sleeper(procs: list[subprocess.Popen[bytes]], **env: str) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(["sleep", "600"], env={**os.environ, **env}, start_new_session=True)
    procs.append(p)
    return p


def _ended(p: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return p.poll() is not None


def test_a_read_of_an_app_whose_supervisor_died_kills_its_leftovers(
    tmp_path: Path, procs: list
) -> None:
    d, instance = _app_dir(tmp_path)
    mine = _sleeper(procs, TORCHX_APP_ID=APP, TORCHX_APP_INSTANCE=instance)
    status = _state.read_status(str(d), APP)
    assert status is not None and status.state == "FAILED" and "died" in status.msg
    assert _ended(mine), "the leftover replica of a dead supervisor was not killed"


def test_a_many_apps_read_collects_the_dead_and_the_caller_kills_them_together(
    tmp_path: Path, procs: list
) -> None:
    d, instance = _app_dir(tmp_path)
    dead: list[tuple[str, str | None]] = []
    mine = _sleeper(procs, TORCHX_APP_ID=APP, TORCHX_APP_INSTANCE=instance)
    _state.read_status(str(d), APP, dead=dead)
    assert dead == [(APP, instance)]
    assert kill_apps_processes(dead) == 1
    assert _ended(mine)


def test_the_sweep_spares_processes_of_another_instance_or_app(tmp_path: Path, procs: list) -> None:
    d, instance = _app_dir(tmp_path)
    copy_of_it = _sleeper(procs, TORCHX_APP_ID=APP, TORCHX_APP_INSTANCE=instance[:-2] + "00")
    other_app = _sleeper(procs, TORCHX_APP_ID="other-bcdfghjklmnp", TORCHX_APP_INSTANCE=instance)
    mine = _sleeper(procs, TORCHX_APP_ID=APP, TORCHX_APP_INSTANCE=instance)
    _state.read_status(str(d), APP)
    assert _ended(mine)
    assert copy_of_it.poll() is None and other_app.poll() is None


def test_a_copied_app_directory_kills_nothing(tmp_path: Path, procs: list) -> None:
    d, instance = _app_dir(tmp_path / "a")
    mine = _sleeper(procs, TORCHX_APP_ID=APP, TORCHX_APP_INSTANCE=instance)
    copy = tmp_path / "b" / APP
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(d), str(copy)], check=True)
    status = _state.read_status(str(copy), APP)
    assert status is not None and "is a copy" in status.msg
    assert mine.poll() is None


def test_a_marker_naming_another_app_is_not_ownership(tmp_path: Path) -> None:
    d, _ = _app_dir(tmp_path, marker="someone-else-bcdfghjk\n")
    assert _state.is_owned(str(d), "someone-else-bcdfghjk")
    assert not _state.is_owned(str(d), APP)
    assert _state.remove_app_dir(str(d), APP) and d.exists()  # refused, named in the failures
    (d / STATUS_FILE).write_text(
        json.dumps(
            {**json.loads((d / STATUS_FILE).read_text()), "state": "SUCCEEDED", "ended": 1.0}
        )
    )
    assert _state.collect_garbage(str(tmp_path), ttl=0) == [] and d.exists()


def test_an_app_whose_directory_is_there_is_never_looked_for_among_deleted_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-up of deleted apps (``_gone``) costs nothing for apps (or entries) present."""
    from torchx_core.schedulers.local import _gone

    (tmp_path / "present").mkdir()
    (tmp_path / "a-file").write_text("x")

    def no_scan(path: str = ".") -> list[str]:
        raise AssertionError(f"scanned {path}")

    monkeypatch.setattr(_gone.os, "listdir", no_scan)
    assert _gone.deleted_supervisors(str(tmp_path), ["present", "a-file"]) == {}
    assert _gone.status(str(tmp_path), "present") is None


def test_a_deleted_app_is_found_by_the_lock_file_its_supervisor_holds(tmp_path: Path) -> None:
    """A process holding ``<root>/<app_id>/supervisor.lock`` after the directory went is it."""
    from torchx_core.schedulers.local import _gone

    app_dir = tmp_path / "app-1"
    app_dir.mkdir()
    (app_dir / LOCK_FILE).write_text("")
    holder = subprocess.Popen(
        ["python3", "-c", "import sys, time; f = open(sys.argv[1]); print(1, flush=True);"
         " time.sleep(600)", str(app_dir / LOCK_FILE), "app-1"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"1\n"
        assert _gone.deleted_supervisors(str(tmp_path), ["app-1"]) == {}  # still there
        (app_dir / LOCK_FILE).unlink()
        app_dir.rmdir()
        assert _gone.deleted_supervisors(str(tmp_path), ["app-1", "app-2"]) == {"app-1": holder.pid}
        doc = _gone.status(str(tmp_path), "app-1")
        assert doc is not None and doc.state == "UNKNOWN" and "was deleted" in doc.msg
    finally:
        holder.kill()
        holder.wait()
