"""Unit tests of the local supervisor's retry policies (REPLICA, ROLE, APPLICATION) and budgets.

The supervisor's own bookkeeping runs unchanged; only the two calls that touch processes
(``spawn`` and ``stop``) are replaced by recorders, so each test drives exits by hand and reads
which replicas were stopped and started again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from torchx_core.schedulers.local._replicas import Slot
from torchx_core.schedulers.local._supervisor import Supervisor
from torchx_core.schedulers.local.scheduler import LOCAL_STATES
from torchx_core.specs import AppState


class RecordingSupervisor(Supervisor):
    """A supervisor whose replicas are pids handed out by the test, never real processes."""

    def __init__(self, plan: dict[str, Any], app_dir: str) -> None:
        super().__init__(plan, app_dir)
        self.next_pid = 1000
        self.spawned: list[tuple[str, int]] = []
        self.stopped: list[tuple[str, int]] = []

    def spawn(self, slot: Slot) -> None:
        self.next_pid += 1
        slot.pid = self.next_pid
        slot.state = "R"
        self.procs[slot.pid] = slot
        self.spawned.append((slot.role.name, slot.k))

    def stop(self, slots: list[Slot]) -> None:
        for slot in slots:
            if slot.pid and not slot.stopping:
                slot.stopping = True
                self.stopped.append((slot.role.name, slot.k))

    # -- driving -------------------------------------------------------------------------------

    def slot(self, role: str, k: int) -> Slot:
        return next(s for r in self.roles if r.name == role for s in r.slots if s.k == k)

    def exit(self, role: str, k: int, code: int) -> None:
        """The replica's process ends with ``code``; restarts whose replicas are all down start."""
        slot = self.slot(role, k)
        assert slot.pid, f"{role}/{k} is not running"
        del self.procs[slot.pid]
        self.on_exit(slot, code, None)
        self.run_barriers()

    def stop_completes(self) -> None:
        """Every replica asked to stop exits (SIGTERM honoured)."""
        for slot in [s for s in self.procs.values() if s.stopping]:
            del self.procs[slot.pid]
            self.on_exit(slot, None, 15)
        self.run_barriers()

    def start(self) -> RecordingSupervisor:
        self.spawn_all([s for r in self.roles for s in r.slots])
        self.spawned.clear()
        return self


def _role(name: str, replicas: int, policy: str, retries: int) -> dict[str, Any]:
    return {
        "name": name,
        "cwd": "/",
        "entrypoint": "true",
        "argv": [],
        "env": {},
        "replica_env": [{} for _ in range(replicas)],
        "num_replicas": replicas,
        "max_retries": retries,
        "retry_policy": policy,
    }


def supervisor(tmp_path: Path, *roles: dict[str, Any]) -> RecordingSupervisor:
    plan = {"app_id": "app-1", "name": "app", "base_env": {}, "roles": list(roles)}
    return RecordingSupervisor(plan, str(tmp_path)).start()


def test_replica_policy_restarts_only_the_failed_replica(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 3, "REPLICA", 2), _role("ps", 1, "REPLICA", 2))
    sup.exit("trainer", 1, 3)
    assert sup.stopped == []  # no surviving replica is touched
    assert sup.spawned == [("trainer", 1)]
    assert [sup.slot("trainer", k).state for k in range(3)] == ["R", "R", "R"]
    assert (sup.num_restarts, sup.failure) == (1, None)
    assert sup.msg == "restarting after: replica trainer/1 exited with code 3"


def test_replica_budget_is_per_replica(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 2, "REPLICA", 1))
    sup.exit("trainer", 0, 1)  # replica 0 uses its one retry
    sup.exit("trainer", 1, 1)  # replica 1 still has its own
    assert sup.spawned == [("trainer", 0), ("trainer", 1)]
    assert sup.failure is None
    sup.exit("trainer", 0, 1)  # replica 0 again: budget spent
    assert sup.failure is not None and sup.failure[0] is sup.slot("trainer", 0)
    assert sup.spawned == [("trainer", 0), ("trainer", 1)]
    assert sup.stopped == [("trainer", 1)]  # the app goes down
    assert sup.msg == "replica trainer/0 exited with code 1 (after 2 restart(s))"


def test_role_policy_restarts_every_replica_of_the_role_only(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 3, "ROLE", 1), _role("ps", 2, "ROLE", 1))
    sup.exit("trainer", 2, 1)
    assert sup.stopped == [("trainer", 0), ("trainer", 1)]
    assert sup.spawned == []  # the restart waits until the whole role is down
    sup.stop_completes()
    assert sup.spawned == [("trainer", 0), ("trainer", 1), ("trainer", 2)]
    assert [sup.slot("ps", k).pid for k in range(2)] == [1004, 1005]  # ps never restarted
    assert (sup.num_restarts, sup.failure) == (1, None)


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_role_budget_allows_exactly_max_retries_restarts(tmp_path: Path, retries: int) -> None:
    sup = supervisor(tmp_path, _role("trainer", 2, "ROLE", retries))
    for attempt in range(retries):
        sup.exit("trainer", 0, 1)
        sup.stop_completes()
        assert sup.failure is None, f"failed after {attempt + 1} of {retries} retries"
    assert sup.num_restarts == retries
    sup.exit("trainer", 0, 1)
    assert sup.failure is not None
    assert sup.num_restarts == retries
    assert len(sup.spawned) == 2 * retries


@pytest.mark.parametrize("retries", [0, 2])
def test_application_policy_restarts_every_role(tmp_path: Path, retries: int) -> None:
    sup = supervisor(
        tmp_path, _role("trainer", 2, "APPLICATION", retries), _role("ps", 1, "APPLICATION", 0)
    )
    for _ in range(retries):
        sup.exit("trainer", 1, 1)
        assert sorted(sup.stopped) == [("ps", 0), ("trainer", 0)]
        sup.stopped.clear()
        sup.spawned.clear()
        sup.stop_completes()
        assert sup.spawned == [("trainer", 0), ("trainer", 1), ("ps", 0)]
    sup.exit("trainer", 1, 1)
    assert sup.failure is not None and sup.num_restarts == retries


def test_success_and_stopping_exits_do_not_use_the_budget(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 2, "ROLE", 1))
    sup.exit("trainer", 1, 0)
    assert (sup.slot("trainer", 1).state, sup.num_restarts, sup.failure) == ("S", 0, None)
    sup.exit("trainer", 0, 2)  # the role restarts: replica 1 had already ended
    assert sup.spawned == [("trainer", 0), ("trainer", 1)]
    assert sup.num_restarts == 1 and sup.failure is None


def test_killed_by_signal_is_named_in_the_message(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 1, "REPLICA", 0))
    slot = sup.slot("trainer", 0)
    del sup.procs[slot.pid]
    sup.on_exit(slot, None, 9)
    assert sup.msg == "replica trainer/0 killed by SIGKILL"
    assert sup.failure == (slot, None, 9)


def test_status_file_state_characters() -> None:
    # the one-character replica states the supervisor writes (P R S F C U), read back by status
    assert dict(LOCAL_STATES) == {
        "P": AppState.PENDING,
        "R": AppState.RUNNING,
        "S": AppState.SUCCEEDED,
        "F": AppState.FAILED,
        "C": AppState.CANCELLED,
        "U": AppState.UNKNOWN,
    }


def test_exit_bookkeeping_codes_states_and_dirty(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 3, "REPLICA", 0))
    sup.dirty = False
    sup.exit("trainer", 0, 0)
    assert (sup.slot("trainer", 0).state, sup.slot("trainer", 0).exitcode, sup.dirty) == (
        "S",
        0,
        True,
    )
    slot = sup.slot("trainer", 1)
    del sup.procs[slot.pid]
    sup.on_exit(slot, None, 9)
    assert (slot.state, slot.exitcode, slot.pid) == ("F", -9, 0)
    # the app is failing: the last replica is stopped, and its exit marks it CANCELLED
    assert sup.stopped == [("trainer", 2)]
    sup.stop_completes()
    last = sup.slot("trainer", 2)
    assert (last.state, last.stopping, last.exitcode) == ("C", False, -15)


def test_a_replica_stopped_for_a_restart_is_pending_again(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("trainer", 2, "ROLE", 1))
    sup.exit("trainer", 0, 1)
    other = sup.slot("trainer", 1)
    assert (other.stopping, other.state) == (True, "R")  # asked to stop, not yet down
    assert sup.slot("trainer", 0).state == "P"  # already down: waits for the restart
    pid = other.pid
    del sup.procs[pid]
    sup.on_exit(other, None, 15)
    assert (other.state, other.stopping) == ("P", False)


def test_exits_after_the_app_failed_or_while_cancelling_restart_nothing(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("a", 1, "REPLICA", 0), _role("b", 2, "REPLICA", 5))
    sup.exit("a", 0, 1)  # no retries: the app fails
    failure = sup.failure
    sup.exit("b", 0, 1)  # b has retries left, but the app is already going down
    assert sup.failure is failure and sup.num_restarts == 0 and sup.spawned == []
    assert sup.slot("b", 0).state == "C"  # it was being stopped with the app

    sup = supervisor(tmp_path, _role("b", 2, "REPLICA", 5))
    sup.cancelling = True
    sup.exit("b", 0, 1)  # ended on its own during the cancel: failed, not restarted
    assert (sup.failure, sup.num_restarts, sup.spawned) == (None, 0, [])
    assert sup.slot("b", 0).state == "F"


def test_replica_restart_count_is_per_slot_and_by_one(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, _role("w", 1, "REPLICA", 2))
    sup.exit("w", 0, 1)
    assert sup.slot("w", 0).restarts == 1
    sup.exit("w", 0, 1)
    assert (sup.slot("w", 0).restarts, sup.failure) == (2, None)
    sup.exit("w", 0, 1)
    assert sup.failure is not None
    assert sup.msg == "replica w/0 exited with code 1 (after 2 restart(s))"


@pytest.mark.parametrize("policy", ["ROLE", "APPLICATION"])
def test_restart_message_names_the_failed_replica(tmp_path: Path, policy: str) -> None:
    sup = supervisor(tmp_path, _role("trainer", 3, policy, 1))
    sup.exit("trainer", 2, 7)
    assert sup.msg == "restarting after: replica trainer/2 exited with code 7"
    assert [s.state for s in sup.roles[0].slots] == ["R", "R", "P"]


def test_pending_restarts_are_dropped_when_the_app_fails_or_is_cancelled(tmp_path: Path) -> None:
    for stop in ("failure", "cancel"):
        sup = supervisor(tmp_path, _role("t", 2, "ROLE", 1))
        sup.exit("t", 0, 1)  # restart pending until t/1 is down
        if stop == "failure":
            sup.failure = (sup.slot("t", 0), 1, None)
        else:
            sup.cancelling = True
        sup.stop_completes()
        assert sup.spawned == [], stop


def test_the_success_file_is_written_before_the_final_status(tmp_path: Path) -> None:
    """Whoever sees the app ended (TorchX's users wait, then read ``SUCCESS``) finds the file."""
    from torchx_core.schedulers.local import _layout

    seen: list[bool] = []

    class Ending(Supervisor):
        def write_status(self, ended: float | None = None) -> bool:
            seen.append(os.path.exists(os.path.join(str(tmp_path), _layout.SUCCESS_FILE)))
            return super().write_status(ended)

    plan = {"app_id": "app-1", "name": "app", "layout": _layout.TORCHX_LAYOUT}
    sup = Ending({**plan, "roles": [_role("trainer", 1, "APPLICATION", 0)]}, str(tmp_path))
    sup.state = "SUCCEEDED"
    sup.record_end(ended=1.0)
    assert seen == [True]
    status = json.loads((tmp_path / _layout.STATUS_FILE).read_text())
    assert status["state"] == "SUCCEEDED"
