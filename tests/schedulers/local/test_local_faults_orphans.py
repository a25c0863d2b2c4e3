"""Fault injection, group "orphans": a supervisor killed at any moment leaves no replica behind.

Every replica carries ``TORCHX_APP_ID`` in its environment and leads its own process group, so
the first ``status``/``cancel``/``wait``/``list`` that notices a dead supervisor finds and kills
them all, whatever the supervisor had recorded.
"""

from __future__ import annotations

import os
import random
import signal
import time
from functools import partial
from pathlib import Path

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import STATUS_FILE, write_json_atomic
from torchx_core.schedulers.local.scheduler import LocalScheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(600)]


def sleepers(n: int) -> AppDef:
    return AppDef(
        "orphans", roles=[Role("r", image="", entrypoint="sleep", args=["600"], num_replicas=n)]
    )


def _replicas(app_id: str) -> list[int]:
    return live_processes_with_env(f"TORCHX_APP_ID={app_id}")


def _no_replicas(app_id: str) -> bool:
    return not _replicas(app_id)


def _has_replicas(app_id: str, n: int) -> bool:
    return len(_replicas(app_id)) == n


def _lock_free(app_dir: str) -> bool:
    return not _state.supervisor_alive(app_dir)


def _supervisor_pid(sched: LocalScheduler, app_id: str) -> int:
    app_dir = os.path.join(sched.root, app_id)
    pid = 0

    def recorded() -> bool:
        nonlocal pid
        pid = _state.supervisor_pid(app_dir)
        return pid > 0

    assert wait_until(recorded, timeout=60), "the supervisor never started"
    return pid


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_supervisor_sigkilled_while_spawning_leaves_no_replica(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """20 trials per start mode: SIGKILL the supervisor at a random point while it spawns 64
    replicas; one status (even trials) or cancel (odd trials) later, no replica is left."""
    monkeypatch.setenv("TORCHX_LOCAL_SUPERVISOR", mode)
    rng = random.Random(12)
    mid_spawn = 0
    for trial in range(20):
        app_id = sched.submit(sleepers(64), {})
        pid = _supervisor_pid(sched, app_id)
        # a random point in the spawning (64 spawns take tens of ms here)
        deadline = rng.uniform(0.0, 0.08)
        time.sleep(deadline)  # fault injection at a random moment (nothing is asserted after it)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(partial(_gone, pid), timeout=30)
        spawned = len(_replicas(app_id))
        mid_spawn += 0 < spawned < 64
        if trial % 2 == 0:
            # dead for readers once its lock is free (a spawn-mode launcher's short-lived
            # intermediate process, or a replica between fork and exec, may hold it a moment)
            assert wait_until(partial(_lock_free, os.path.join(sched.root, app_id)), timeout=30)
            desc = sched.describe(app_id)
            assert desc is not None and desc.state == AppState.FAILED, desc
            assert "died" in desc.msg
        else:
            sched.cancel(app_id)
        assert wait_until(partial(_no_replicas, app_id), timeout=30), (
            f"trial {trial}: replicas of {app_id} survived its supervisor: {_replicas(app_id)}"
        )
    print(f"{mode}: {mid_spawn} of 20 kills landed while some but not all replicas were running")


def test_list_and_wait_also_notice_a_dead_supervisor(sched: LocalScheduler) -> None:
    for notice in ("list", "wait"):
        app_id = sched.submit(sleepers(4), {})
        pid = _supervisor_pid(sched, app_id)
        assert wait_until(partial(_has_replicas, app_id, 4), timeout=60)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(partial(_gone, pid), timeout=30)
        if notice == "list":
            states = {a.app_id: a.state for a in sched.list()}
            assert states[app_id] == AppState.FAILED
        else:
            desc = sched.wait(app_id, timeout=60)
            assert desc is not None and desc.state == AppState.FAILED
        assert wait_until(partial(_no_replicas, app_id), timeout=30)


def test_describe_many_sweeps_the_apps_of_dead_supervisors_in_one_scan(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher of many apps (a triggerer, ``torchx status a b c``) that finds several dead
    supervisors reads each status once and kills all their replicas in one scan of /proc."""
    from torchx_core.schedulers.local import _procs

    dead = [sched.submit(sleepers(2), {}) for _ in range(3)]
    alive = sched.submit(sleepers(1), {})
    for app_id in dead:
        assert wait_until(partial(_has_replicas, app_id, 2), timeout=60)
    assert wait_until(partial(_has_replicas, alive, 1), timeout=60)
    for app_id in dead:
        pid = _supervisor_pid(sched, app_id)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(partial(_gone, pid), timeout=30)
    scans: list[str] = []
    real = os.listdir

    def counting(path: str = ".") -> list[str]:
        if path == "/proc":
            scans.append(path)
        return real(path)

    monkeypatch.setattr(_procs.os, "listdir", counting)
    out = sched.describe_many([*dead, alive, "never-submitted"])
    monkeypatch.undo()
    assert [out[a].state for a in dead] == [AppState.FAILED] * 3  # type: ignore[union-attr]
    assert "supervisor" in out[dead[0]].msg  # type: ignore[union-attr]
    assert out[alive].state == AppState.RUNNING  # type: ignore[union-attr]
    assert out["never-submitted"] is None
    # one /proc scan for the three dead apps (none for the live one), and one asking whether
    # the app never submitted is one whose directory was deleted while it runs
    assert len(scans) == 2
    for app_id in dead:
        assert wait_until(partial(_no_replicas, app_id), timeout=30)
    assert _has_replicas(alive, 1)  # the live app is untouched
    sched.cancel(alive)


def test_cancel_of_a_failed_app_still_kills_its_survivors(sched: LocalScheduler) -> None:
    """The app already says FAILED (its supervisor died and a replica escaped the first sweep,
    e.g. it was still starting): ``cancel`` sweeps again instead of "already ended"."""
    app_id = sched.submit(sleepers(2), {})
    pid = _supervisor_pid(sched, app_id)
    assert wait_until(partial(_has_replicas, app_id, 2), timeout=60)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(partial(_gone, pid), timeout=30)
    # record FAILED without sweeping, as a reader that died half way would have left it
    path = os.path.join(sched.root, app_id, STATUS_FILE)
    status = _state.read_json(path)
    assert status is not None
    status.update(state="FAILED", ended=1.0)
    write_json_atomic(path, status)
    assert _replicas(app_id)
    assert sched.describe(app_id).state == AppState.FAILED  # type: ignore[union-attr]
    sched.cancel(app_id)
    assert wait_until(partial(_no_replicas, app_id), timeout=30)


@pytest.mark.parametrize("supervisor", ["alive", "dead"])
@pytest.mark.parametrize("action", ["cancel", "delete"])
def test_unreadable_status_still_stops_the_replicas(
    sched: LocalScheduler, supervisor: str, action: str
) -> None:
    app_id = sched.submit(sleepers(3), {})
    pid = _supervisor_pid(sched, app_id)
    assert wait_until(partial(_has_replicas, app_id, 3), timeout=60)
    if supervisor == "dead":
        os.kill(pid, signal.SIGKILL)
        assert wait_until(partial(_gone, pid), timeout=30)
    Path(sched.root, app_id, STATUS_FILE).write_text('{"state": "RUNNING", "roles": "xyz"')
    assert sched.exists(app_id)
    getattr(sched, action)(app_id)
    assert wait_until(partial(_no_replicas, app_id), timeout=60)
    if action == "delete":
        assert not os.path.lexists(os.path.join(sched.root, app_id))
    else:
        desc = sched.describe(app_id)
        assert desc is not None and desc.state in (AppState.CANCELLED, AppState.FAILED), desc


def test_supervisor_has_its_own_process_title(sched: LocalScheduler) -> None:
    app_id = sched.submit(sleepers(1), {})
    pid = _supervisor_pid(sched, app_id)

    def titled() -> bool:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].startswith(f"torchx-supervisor {app_id}".encode()[:40])

    assert wait_until(titled, timeout=60)
    with open(f"/proc/{pid}/comm") as f:
        assert f.read().strip() == "torchx-supervis"
    sched.cancel(app_id)
