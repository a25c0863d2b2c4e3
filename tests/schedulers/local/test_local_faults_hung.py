"""Fault injection, group "hung supervisor": a supervisor stopped with SIGSTOP.

A cancel escalates (SIGTERM, then SIGKILL of the supervisor and of the app's processes), a
waiter returns once the app is cancelled, and while the supervisor is stopped ``status`` says
its status is stale instead of showing exited replicas as running.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core.runner import get_runner
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local.scheduler import LocalScheduler
from torchx_core.specs import AppDef, AppState, AppStatus, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


def _started(sched: LocalScheduler, app: AppDef, cfg: dict | None = None) -> tuple[str, int]:
    app_id = sched.submit(app, cfg or {})
    app_dir = os.path.join(sched.root, app_id)

    def running() -> bool:
        desc = sched.describe(app_id)
        return desc is not None and all(
            r.state == AppState.RUNNING for rs in desc.roles_statuses for r in rs.replicas
        )

    assert wait_until(running, timeout=60)
    return app_id, _state.supervisor_pid(app_dir)


def test_cancel_kills_a_stopped_supervisor_and_a_waiter_returns(
    sched: LocalScheduler, local_root: str
) -> None:
    app = AppDef(
        "hung", roles=[Role("r", image="", entrypoint="sleep", args=["600"], num_replicas=3)]
    )
    app_id, sup = _started(sched, app, {"grace_period": 1.0})
    os.kill(sup, signal.SIGSTOP)
    assert wait_until(lambda: _proc_state(sup) == "T", timeout=10)
    handle = f"local_cwd://test/{app_id}"
    waited: list[AppStatus | None] = []
    with get_runner("test") as runner:
        waiter = threading.Thread(target=lambda: waited.append(runner.wait(handle)), daemon=True)
        waiter.start()
        runner.cancel(handle)
        waiter.join(timeout=30)
        assert not waiter.is_alive(), "runner.wait blocked after the app was cancelled"
    assert waited[0] is not None and waited[0].state == AppState.CANCELLED, waited
    assert _proc_state(sup) in (None, "Z"), "the stopped supervisor outlived the cancel"
    assert not _state.supervisor_alive(os.path.join(local_root, app_id))
    assert wait_until(lambda: not live_processes_with_env(f"TORCHX_APP_ID={app_id}"), timeout=10)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED


def test_status_of_a_stopped_supervisor_says_it_is_stale(sched: LocalScheduler) -> None:
    role = Role(
        "r", image="", entrypoint="sh", args=["-c", "read x < /dev/null; sleep 2"], num_replicas=2
    )
    app_id, sup = _started(sched, AppDef("stale", roles=[role]))
    os.kill(sup, signal.SIGSTOP)
    try:
        # the replicas exit while their supervisor cannot reap them (zombies)
        assert wait_until(
            lambda: not live_processes_with_env(f"TORCHX_APP_ID={app_id}"), timeout=30
        )
        desc = sched.describe(app_id)
        assert desc is not None
        states = [r.state for rs in desc.roles_statuses for r in rs.replicas]
        assert AppState.RUNNING not in states, desc
        assert desc.state == AppState.UNKNOWN and "stale" in desc.msg and str(sup) in desc.msg, desc
        listed = {a.app_id: a.state for a in sched.list()}
        assert listed[app_id] == AppState.UNKNOWN
    finally:
        os.kill(sup, signal.SIGCONT)
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED, final
