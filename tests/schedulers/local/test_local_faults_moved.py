"""Fault injection, group "moved": the root renamed, or an app directory deleted, under an app.

Renamed: the supervisor's own path to its app directory follows the directory, so the real
outcome (a replica's exit code) is recorded where the app now is. Deleted: ``status`` says so
and ``cancel`` still stops the app's processes (found by its supervisor, which holds the
deleted directory's lock, and by the instance its replicas carry).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local.scheduler import LocalScheduler, create_scheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]


def _waiting_for(go: Path, code: int) -> AppDef:
    """An app whose replica waits for the file ``go``, says bye on stderr and exits ``code``."""
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        "print('bye', file=sys.stderr)\n"
        f"sys.exit({code})\n"
    )
    return AppDef(
        "moved", roles=[Role("r", image="", entrypoint=sys.executable, args=["-c", script])]
    )


def _running(sched: LocalScheduler, app_id: str) -> bool:
    desc = sched.describe(app_id)
    return desc is not None and desc.state == AppState.RUNNING


def test_a_replicas_exit_code_is_kept_when_the_root_is_renamed_under_the_app(
    sched: LocalScheduler, local_root: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    app_id = sched.submit(_waiting_for(go, 3), {})
    assert wait_until(lambda: _running(sched, app_id), timeout=60)
    moved = tmp_path / "renamed-root"
    os.rename(local_root, moved)
    go.touch()
    there = create_scheduler("test", root=str(moved))
    assert wait_until(lambda: there.describe(app_id).state == AppState.FAILED, timeout=60)  # type: ignore[union-attr]
    desc = there.describe(app_id)
    assert desc is not None and desc.msg == "replica r/0 exited with code 3"
    error = json.loads(desc.structured_error_msg)
    assert error["exit_code"] == 3 and error["stderr_tail"] == ["bye"]
    log = (moved / app_id / "supervisor.log").read_text()
    assert "could not write" not in log and "crashed" not in log, log
    assert list(there.log_iter(app_id, "r", 0, streams="stderr")) == ["bye\n"]
    assert sched.describe(app_id) is None  # not in the old root any more: not found there


@pytest.mark.parametrize("command", ["cancel", "delete"])
def test_an_app_whose_directory_was_deleted_says_so_and_cancel_stops_its_processes(
    sched: LocalScheduler, local_root: str, command: str
) -> None:
    app = AppDef(
        "deleted", roles=[Role("r", image="", entrypoint="sleep", args=["600"], num_replicas=2)]
    )
    app_id = sched.submit(app, {})
    assert wait_until(lambda: _running(sched, app_id), timeout=60)
    marker = f"TORCHX_APP_ID={app_id}"
    assert len(live_processes_with_env(marker)) == 2
    shutil.rmtree(os.path.join(local_root, app_id))
    handle = f"local_cwd://test/{app_id}"
    env = {**os.environ, _state.ROOT_ENV: local_root}
    status = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "status", handle],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert status.returncode == 0 and "UNKNOWN" in status.stdout, status
    assert "was deleted while the app runs" in status.stdout
    cancel = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", command, handle],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert cancel.returncode == 0, cancel.stderr
    assert live_processes_with_env(marker) == []
    assert sched.describe(app_id) is None  # stopped: nothing of it is left


def test_describe_many_finds_deleted_apps_in_one_scan_and_leaves_others_unknown(
    sched: LocalScheduler, local_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.schedulers.local import _gone

    app = AppDef("del", roles=[Role("r", image="", entrypoint="sleep", args=["600"])])
    ids = [sched.submit(app, {}) for _ in range(2)]
    for app_id in ids:
        assert wait_until(lambda a=app_id: _running(sched, a), timeout=60)  # type: ignore[misc]
        shutil.rmtree(os.path.join(local_root, app_id))
    scans: list[str] = []
    real = os.listdir

    def counting(path: str = ".") -> list[str]:
        if path == "/proc":
            scans.append(path)
        return real(path)

    monkeypatch.setattr(_gone.os, "listdir", counting)
    out = sched.describe_many([*ids, "never-submitted"])
    monkeypatch.undo()
    assert [out[a].state for a in ids] == [AppState.UNKNOWN] * 2  # type: ignore[union-attr]
    assert out["never-submitted"] is None and len(scans) == 1
    for app_id in ids:
        sched.cancel(app_id)
        assert live_processes_with_env(f"TORCHX_APP_ID={app_id}") == []
