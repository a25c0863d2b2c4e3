"""Fault injection, group "copies": a read on a copy of the root never kills the original's apps.

``cp -a`` of a root (or a restored backup, an rsync of the state folder) holds apps whose lock
no supervisor holds: they look dead. A sweep kills only the processes carrying both the app id
and the instance of *that* app directory, which a copy does not have.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local.scheduler import LocalScheduler, create_scheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]


def _sleepers(n: int) -> AppDef:
    return AppDef(
        "orig", roles=[Role("r", image="", entrypoint="sleep", args=["600"], num_replicas=n)]
    )


@pytest.mark.parametrize("with_log_dir", [False, True])
def test_list_status_and_cancel_on_a_copy_of_the_root_leave_the_original_running(
    sched: LocalScheduler, local_root: str, tmp_path: Path, with_log_dir: bool
) -> None:
    cfg = {"log_dir": str(tmp_path / "logs")} if with_log_dir else {}
    app_id = sched.submit(_sleepers(3), cfg)
    marker = f"TORCHX_APP_ID={app_id}"
    assert wait_until(lambda: len(live_processes_with_env(marker)) == 3, timeout=60)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", local_root, str(copy)], check=True)
    if with_log_dir:  # a backup of the log_dir too, with the root's links pointing at it
        subprocess.run(
            ["cp", "-a", str(tmp_path / "logs"), str(tmp_path / "logs-copy")], check=True
        )
        link = copy / app_id
        target = os.readlink(link).replace(str(tmp_path / "logs"), str(tmp_path / "logs-copy"))
        link.unlink()
        link.symlink_to(target)

    other = create_scheduler("copy", root=str(copy))
    listed = {a.app_id: a.state for a in other.list()}
    desc = other.describe(app_id)
    many = other.describe_many([app_id])[app_id]
    assert listed[app_id] == AppState.FAILED
    assert desc is not None and desc.state == AppState.FAILED and "is a copy" in desc.msg, desc
    assert many is not None and many.state == AppState.FAILED
    other.cancel(app_id)
    assert len(live_processes_with_env(marker)) == 3, (
        "a read on the copy killed the original's replicas"
    )

    original = sched.describe(app_id)
    assert original is not None and original.state == AppState.RUNNING
    sched.cancel(app_id)
    assert wait_until(lambda: not live_processes_with_env(marker), timeout=30)


def test_a_dead_supervisor_is_still_swept_in_its_own_root(
    sched: LocalScheduler, local_root: str
) -> None:
    """The instance check does not stop the real sweep: SIGKILL the supervisor, one status
    later its replicas are gone."""
    app_id = sched.submit(_sleepers(2), {})
    marker = f"TORCHX_APP_ID={app_id}"
    assert wait_until(lambda: len(live_processes_with_env(marker)) == 2, timeout=60)
    app_dir = os.path.join(local_root, app_id)
    assert wait_until(lambda: _state.supervisor_pid(app_dir) > 0, timeout=60)
    os.kill(_state.supervisor_pid(app_dir), 9)
    assert wait_until(lambda: not _state.supervisor_alive(app_dir), timeout=30)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED and "died" in desc.msg
    assert wait_until(lambda: not live_processes_with_env(marker), timeout=30)
