"""The app lifecycle's decision table, on a real Runner over the fake scheduler.

Every phase transition, reattach case, ownership case, the grace clock, bounded cancel, the log
follower and the failure tail. The last tests run the ownership hooks of the real local
scheduler across processes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_scheduler import JobTable, make_runner

from torchx_core.runner import Runner, get_runner
from torchx_core.runner.lifecycle import (
    AppCancelledError,
    AppFailedError,
    AppLifecycle,
    AppLifecycleError,
    AppVanishedError,
    GraceClock,
    InvalidTaskArgumentError,
    Observation,
    Phase,
    app_name,
    phase_of,
)
from torchx_core.specs import AppDef, AppState, AppStatus, Role, is_terminal, parse_app_handle


@pytest.fixture
def table() -> JobTable:
    t = JobTable()
    t.hold = True  # states change only when a test says so
    return t


@pytest.fixture
def runner(table: JobTable) -> Iterator[Runner]:
    with make_runner(table) as r:
        yield r
    if table.cancel_gate is not None:
        table.cancel_gate.set()  # release a hanging cancel thread


def life(runner: Runner, owner: str = "engine:run/task#try=1", **kwargs: object) -> AppLifecycle:
    kwargs.setdefault("poll_interval", 0.01)
    return AppLifecycle(runner, "fake", owner=owner, **kwargs)  # type: ignore[arg-type]


def make_app(name: str = "train", replicas: int = 2) -> AppDef:
    return AppDef(
        name, roles=[Role("worker", image="img", entrypoint="echo", num_replicas=replicas)]
    )


IDENTITY = ("run-1", "train-task")


def app_id(handle: str) -> str:
    return parse_app_handle(handle).app_id


# -- phases, grace clock, naming ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        (AppState.UNSUBMITTED, Phase.WAITING),
        (AppState.SUBMITTED, Phase.WAITING),
        (AppState.PENDING, Phase.WAITING),
        (AppState.RUNNING, Phase.WAITING),
        (AppState.SUCCEEDED, Phase.SUCCEEDED),
        (AppState.FAILED, Phase.FAILED),
        (AppState.CANCELLED, Phase.CANCELLED),
        (AppState.UNKNOWN, Phase.UNKNOWN),
    ],
)
def test_phase_of_every_state(state: AppState, phase: Phase) -> None:
    assert phase_of(AppStatus(state)) is phase


def test_phase_of_an_unknown_app_is_vanished() -> None:
    assert phase_of(None) is Phase.VANISHED


def test_grace_clock_counts_unknown_and_vanished_in_a_row_and_resets() -> None:
    now = [0.0]
    clock = GraceClock(10, clock=lambda: now[0])
    assert clock.observe(Phase.UNKNOWN) is False
    now[0] = 6
    assert clock.observe(Phase.VANISHED) is False  # one clock for both
    assert clock.waited == 6
    now[0] = 9
    assert clock.observe(Phase.WAITING) is False  # resets
    assert clock.waited == 0
    now[0] = 12
    assert clock.observe(Phase.VANISHED) is False
    now[0] = 21
    assert clock.observe(Phase.UNKNOWN) is False
    now[0] = 22
    assert clock.observe(Phase.UNKNOWN) is True
    assert clock.observe(Phase.SUCCEEDED) is False


def test_grace_clock_zero_expires_at_once_and_rejects_bad_timeouts() -> None:
    assert GraceClock(0).observe(Phase.VANISHED) is True
    for bad in (-1, float("nan"), "5s", True):
        with pytest.raises(InvalidTaskArgumentError, match="unknown_timeout"):
            GraceClock(bad)  # type: ignore[arg-type]


def test_app_name_is_deterministic_per_identity() -> None:
    assert app_name("train", ("d", "t", "r", -1)) == "train-e1b0369d8c"  # Airflow's names so far
    assert app_name("train", ["d", "t", "r", -1]) == app_name("train", ("d", "t", "r", "-1"))
    assert app_name("train", "abc") == app_name("train", ["abc"])
    assert app_name("train", ("d", "t", "r", 0)) != app_name("train", ("d", "t", "r", 1))
    assert app_name("My train.v2/x", "i").startswith("My-train-v2-x-")
    assert app_name("x" * 100, "i", max_len=8) == "xxxxxxxx-" + app_name("", "i")[-10:]
    assert app_name("***", "i").startswith("app-")
    assert app_name("_x_", "i").startswith("x-")  # label-safe ends


@pytest.mark.parametrize(("identity", "kwargs"), [((), {}), ("", {}), ("i", {"max_len": 0})])
def test_app_name_rejects_empty_identities(identity: object, kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidTaskArgumentError):
        app_name("train", identity, **kwargs)  # type: ignore[arg-type]


def test_lifecycle_lists_every_bad_argument(runner: Runner) -> None:
    with pytest.raises(InvalidTaskArgumentError) as e:
        AppLifecycle(runner, "", owner="", poll_interval=0, unknown_timeout=-1, tail_lines=-2)  # type: ignore[arg-type]
    for word in ("scheduler", "owner", "poll_interval", "unknown_timeout", "tail_lines"):
        assert word in str(e.value)


# -- attach: submit, reattach, reuse --------------------------------------------------------------


def test_attach_submits_under_the_deterministic_name_and_records_the_owner(
    runner: Runner, table: JobTable
) -> None:
    app = make_app()
    att = life(runner).attach(app, IDENTITY)
    assert att.how == "submitted" and att.status is None
    assert att.app_name == app_name("train", IDENTITY)
    job = table.job(app_id(att.app_handle))
    assert job.app.name == att.app_name
    assert job.owner == "engine:run/task#try=1"
    assert runner.owner(att.app_handle) == "engine:run/task#try=1"
    assert app.name == "train"  # the caller's AppDef is not renamed


@pytest.mark.parametrize(
    "state", [AppState.SUBMITTED, AppState.PENDING, AppState.RUNNING, AppState.UNKNOWN]
)
def test_a_live_app_of_the_name_is_reattached_and_adopted(
    runner: Runner, table: JobTable, state: AppState
) -> None:
    first = life(runner, owner="try=1").attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), state)
    again = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert (again.how, again.app_handle) == ("reattached", first.app_handle)
    assert again.status is not None and again.status.state == state
    assert len(table.jobs) == 1
    assert runner.owner(first.app_handle) == "try=2"  # the new attempt owns it now


def test_a_succeeded_app_is_reused_not_resubmitted(runner: Runner, table: JobTable) -> None:
    first = life(runner).attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), AppState.SUCCEEDED)
    by_name = life(runner).attach(make_app(), IDENTITY)
    by_handle = life(runner).attach(make_app(), IDENTITY, known_handle=first.app_handle)
    assert [by_name.how, by_handle.how] == ["reused", "reused"]
    assert by_name.app_handle == by_handle.app_handle == first.app_handle
    assert len(table.jobs) == 1


def _twin(runner: Runner, table: JobTable, owner: str) -> list[str]:
    """Makes the next submit race a twin: another attempt submits the same app just before."""
    handles: list[str] = []

    def submit_twin(info: Any) -> None:
        handles.append(runner.schedule(info))  # same name, an earlier id
        runner.set_owner(handles[0], owner)

    table.before_schedule = submit_twin
    return handles


def test_a_race_lost_cancels_its_own_app_and_reattaches_to_the_earlier(
    runner: Runner, table: JobTable
) -> None:
    table.ordered = True
    twin = _twin(runner, table, "try=1")
    att = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert (att.how, att.app_handle) == ("reattached", twin[0])
    assert [(j.state, j.cancelled) for j in table.named(att.app_name)] == [
        (AppState.SUBMITTED, 0),  # the twin, submitted first, runs on
        (AppState.CANCELLED, 1),  # mine, cancelled by my own attempt
    ]
    assert runner.owner(twin[0]) == "try=2"  # the surviving app is adopted, as on a reattach


def test_a_race_lost_is_seen_even_when_the_list_lags_behind_the_submit(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend's list may not show the app just submitted yet: the earlier twin it does show
    is still compared with this attempt's own app, and wins."""
    from support.fake_scheduler import FakeScheduler

    table.ordered = True
    twin = _twin(runner, table, "try=1")
    real_list = FakeScheduler.list

    def lagging(self: FakeScheduler, cfg: Any = None) -> list[Any]:
        return [r for r in real_list(self, cfg) if twin and r.app_id == app_id(twin[0])]

    monkeypatch.setattr(FakeScheduler, "list", lagging)
    att = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert (att.how, att.app_handle) == ("reattached", twin[0])
    assert [j.cancelled for j in table.named(att.app_name)] == [0, 1]


def test_a_race_won_is_kept_even_when_the_list_lags_behind_the_submit(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.fake_scheduler import FakeScheduler

    table.ordered = True
    att = life(runner, owner="try=1").attach(make_app(), IDENTITY)
    later = runner.schedule(runner.dryrun(make_app(att.app_name), "fake"))
    real_list = FakeScheduler.list

    def lagging(self: FakeScheduler, cfg: Any = None) -> list[Any]:
        return [r for r in real_list(self, cfg) if r.app_id == app_id(later)]

    monkeypatch.setattr(FakeScheduler, "list", lagging)
    assert life(runner, owner="try=1")._reconcile(att.app_name, att.app_handle) is None
    assert table.job(app_id(att.app_handle)).cancelled == 0


def test_look_up_and_submit_hold_the_schedulers_lock_on_the_apps_name(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    from support.fake_scheduler import FakeScheduler

    locked: list[str] = []
    submitted_while_locked: list[int] = []

    @contextlib.contextmanager
    def name_lock(self: FakeScheduler, name: str) -> Iterator[bool]:
        locked.append(name)
        yield True
        submitted_while_locked.append(len(table.jobs))

    monkeypatch.setattr(FakeScheduler, "name_lock", name_lock)
    att = life(runner).attach(make_app(), IDENTITY)
    assert locked == [att.app_name]
    assert submitted_while_locked == [1]  # the submit happened inside the lock


@pytest.fixture
def name_locks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The fake scheduler gets an exclusive (non-reentrant) lock per name; the events
    ``("lock"|"unlock", name)`` are returned in order."""
    import contextlib

    from support.fake_scheduler import FakeScheduler

    events: list[tuple[str, str]] = []
    locks: dict[str, threading.Lock] = {}

    @contextlib.contextmanager
    def name_lock(self: FakeScheduler, name: str) -> Iterator[bool]:
        with locks.setdefault(name, threading.Lock()):
            events.append(("lock", name))
            try:
                yield True
            finally:
                events.append(("unlock", name))

    monkeypatch.setattr(FakeScheduler, "name_lock", name_lock)
    return events


def test_the_submitter_records_its_owner_before_it_releases_the_name_lock(
    runner: Runner,
    table: JobTable,
    name_locks: list[tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Else an attempt that takes the lock right after it adopts the app, and the submitter
    then overwrites its owner: the stale attempt's kill path would cancel the adopter's app."""
    owners_at_unlock: list[str | None] = []
    real_set_owner = Runner.set_owner

    def set_owner(self: Runner, handle: str, owner: str) -> bool:
        owners_at_unlock.append(None if name_locks[-1][0] == "unlock" else owner)
        return real_set_owner(self, handle, owner)

    monkeypatch.setattr(Runner, "set_owner", set_owner)
    first = life(runner, owner="try=1").attach(make_app(), IDENTITY)
    second = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert (first.how, second.how) == ("submitted", "reattached")
    assert owners_at_unlock == ["try=1", "try=2"]  # each recorded while it held the lock
    assert runner.owner(first.app_handle) == "try=2"


def test_a_stale_attempts_kill_path_decides_under_the_name_lock(
    runner: Runner, table: JobTable, name_locks: list[tuple[str, str]]
) -> None:
    stale, newer = life(runner, owner="try=1"), life(runner, owner="try=2")
    att = stale.attach(make_app(), IDENTITY)
    newer.attach(make_app(), IDENTITY)
    del name_locks[:]
    assert stale.cancel(att.app_handle) is False  # superseded
    assert name_locks == [("lock", att.app_name), ("unlock", att.app_name)]
    assert table.job(app_id(att.app_handle)).cancelled == 0
    assert newer.cancel(att.app_handle) is True
    assert table.job(app_id(att.app_handle)).cancelled == 1


def test_a_kill_that_interrupts_its_own_attach_does_not_wait_for_its_own_name_lock(
    runner: Runner, table: JobTable, name_locks: list[tuple[str, str]]
) -> None:
    lc = life(runner, owner="try=1")
    done: list[bool] = []
    table.before_schedule = lambda *_: done.append(
        lc.cancel_by_name(app_name("train", IDENTITY), timeout=60)
    )
    lc.attach(make_app(), IDENTITY)
    assert done == [True]


def test_a_race_won_keeps_its_app(runner: Runner, table: JobTable) -> None:
    table.ordered = True
    att = life(runner, owner="try=1").attach(make_app(), IDENTITY)
    # a later twin appears after my submit: it is the later one, it must cancel itself, not me
    later = runner.schedule(runner.dryrun(make_app(att.app_name), "fake"))
    again = life(runner, owner="try=1")._reconcile(att.app_name, att.app_handle)
    assert again is None and table.job(app_id(att.app_handle)).cancelled == 0
    other = life(runner, owner="try=2")._reconcile(att.app_name, later)
    assert other is not None and other.app_handle == att.app_handle
    assert table.job(app_id(later)).state == AppState.CANCELLED


def test_without_submit_order_no_reconcile_cancels_anything(
    runner: Runner, table: JobTable
) -> None:
    _twin(runner, table, "try=1")
    att = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert att.how == "submitted"
    assert [j.cancelled for j in table.named(att.app_name)] == [0, 0]


@pytest.mark.parametrize("state", [AppState.FAILED, AppState.CANCELLED])
@pytest.mark.parametrize("known", [True, False])
def test_a_failed_or_cancelled_app_is_submitted_anew(
    runner: Runner, table: JobTable, state: AppState, known: bool
) -> None:
    first = life(runner).attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), state)
    again = life(runner).attach(
        make_app(), IDENTITY, known_handle=first.app_handle if known else None
    )
    assert again.how == "submitted" and again.app_handle != first.app_handle
    assert [j.state for j in table.named(first.app_name)] == [state, AppState.SUBMITTED]


def test_a_vanished_known_handle_is_submitted_anew(runner: Runner, table: JobTable) -> None:
    first = life(runner).attach(make_app(), IDENTITY)
    table.vanish(app_id(first.app_handle))
    again = life(runner).attach(make_app(), IDENTITY, known_handle=first.app_handle)
    assert again.how == "submitted" and again.app_handle != first.app_handle
    assert len(table.jobs) == 1


def test_the_known_handle_is_looked_at_before_the_name(runner: Runner, table: JobTable) -> None:
    # an app an older release named differently: only the persisted handle finds it
    old = runner.run(make_app("legacy-name"), "fake")
    att = life(runner).attach(make_app(), IDENTITY, known_handle=old)
    assert (att.how, att.app_handle) == ("reattached", old)
    assert len(table.jobs) == 1


def test_a_failed_known_handle_falls_back_to_a_live_app_of_the_name(
    runner: Runner, table: JobTable
) -> None:
    first = life(runner).attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), AppState.FAILED)
    second = life(runner).attach(make_app(), IDENTITY)  # a newer attempt resubmitted
    third = life(runner).attach(make_app(), IDENTITY, known_handle=first.app_handle)
    assert (third.how, third.app_handle) == ("reattached", second.app_handle)


def test_a_known_handle_of_another_scheduler_or_malformed_is_ignored(
    runner: Runner, table: JobTable
) -> None:
    for known in ("local_cwd://torchx/train-1", "not a handle"):
        att = life(runner).attach(make_app(), (known,), known_handle=known)
        assert att.how == "submitted"
    assert len(table.jobs) == 2


@pytest.mark.parametrize("list_names", ["none", "id"])
def test_reattach_by_a_name_the_backend_derived(
    runner: Runner, table: JobTable, list_names: str
) -> None:
    table.list_names = list_names
    first = life(runner).attach(make_app(), IDENTITY)
    other = life(runner).attach(make_app(), ("run-1", "other-task"))
    again = life(runner).attach(make_app(), IDENTITY)
    assert (again.how, again.app_handle) == ("reattached", first.app_handle)
    assert other.app_handle != first.app_handle and len(table.jobs) == 2


def test_cancel_by_a_plain_name_matches_only_that_exact_name(
    runner: Runner, table: JobTable
) -> None:
    table.list_names = "none"
    handle = runner.run(make_app("train"), "fake")  # app id "train-0": not named "train" exactly
    assert life(runner).cancel_by_name("train") is True
    assert table.job(app_id(handle)).cancelled == 0


def test_different_identities_get_different_apps(runner: Runner, table: JobTable) -> None:
    a = life(runner).attach(make_app(), ("run-1", "task", 0))
    b = life(runner).attach(make_app(), ("run-1", "task", 1))
    assert a.app_handle != b.app_handle and len(table.jobs) == 2


def test_attach_submits_when_listing_fails_and_lists_with_the_cfg(
    runner: Runner, table: JobTable
) -> None:
    table.list_error = ConnectionError("scheduler down")
    att = life(runner, cfg={"queue": "q1"}).attach(make_app(), IDENTITY)
    assert att.how == "submitted"
    assert table.job(app_id(att.app_handle)).request.cfg["queue"] == "q1"


def test_an_unreadable_known_handle_does_not_block_a_submission(
    runner: Runner, table: JobTable
) -> None:
    first = life(runner).attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), AppState.FAILED)
    table.describe_error = TimeoutError("describe timed out")
    att = life(runner).attach(make_app(), IDENTITY, known_handle=first.app_handle)
    assert att.how == "submitted"


def test_a_listed_running_app_with_an_unreadable_status_is_reattached_not_duplicated(
    runner: Runner, table: JobTable
) -> None:
    """No stored handle (Airflow < 3.3, a re-run): the by-name lookup lists the running app but
    its status read fails; submitting again would run the app twice."""
    first = life(runner).attach(make_app(), IDENTITY)
    table.set_state(app_id(first.app_handle), AppState.RUNNING)
    table.describe_error = ConnectionError("scheduler unreachable")
    att = life(runner).attach(make_app(), IDENTITY)
    assert (att.how, att.app_handle, att.status) == ("reattached", first.app_handle, None)
    assert len(table.jobs) == 1


def test_a_backend_without_owner_hooks_still_attaches(runner: Runner, table: JobTable) -> None:
    table.supports_owner = False
    att = life(runner).attach(make_app(), IDENTITY)
    assert att.how == "submitted" and runner.owner(att.app_handle) is None


# -- poll, result, wait ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase", "done"),
    [
        (AppState.SUBMITTED, Phase.WAITING, False),
        (AppState.RUNNING, Phase.WAITING, False),
        (AppState.SUCCEEDED, Phase.SUCCEEDED, True),
        (AppState.FAILED, Phase.FAILED, True),
        (AppState.CANCELLED, Phase.CANCELLED, True),
        (AppState.UNKNOWN, Phase.UNKNOWN, False),
    ],
)
def test_poll_maps_every_state(
    runner: Runner, table: JobTable, state: AppState, phase: Phase, done: bool
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), state)
    obs = lc.poll(handle)
    assert (obs.phase, obs.expired, obs.done) == (phase, False, done)
    assert obs.status is not None and obs.status.state == state


def test_poll_of_a_vanished_or_unreadable_app_never_raises(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.describe_error = OSError("connection reset")
    assert lc.poll(handle) == Observation(Phase.UNKNOWN, None, False)
    table.describe_error = None
    table.vanish(app_id(handle))
    assert lc.poll(handle) == Observation(Phase.VANISHED, None, False)


@pytest.mark.parametrize("fault", ["unknown", "unreadable", "vanished"])
def test_the_grace_clock_expires_for_unknown_unreadable_and_vanished(
    runner: Runner, table: JobTable, fault: str
) -> None:
    lc = life(runner, unknown_timeout=0)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    if fault == "unknown":
        table.set_state(app_id(handle), AppState.UNKNOWN)
    elif fault == "unreadable":
        table.describe_error = OSError("connection reset")
    else:
        table.vanish(app_id(handle))
    obs = lc.poll(handle)
    assert obs.expired and obs.done
    table.describe_error = None
    with pytest.raises(AppVanishedError) as e:
        lc.result(handle, obs)
    assert e.value.phase == (Phase.VANISHED if fault == "vanished" else Phase.UNKNOWN)
    assert handle in str(e.value) and "unknown_timeout" in str(e.value)


def test_an_app_stuck_unknown_is_cancelled_if_still_owned(runner: Runner, table: JobTable) -> None:
    mine = life(runner, owner="try=1", unknown_timeout=0)
    handle = mine.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.UNKNOWN)
    with pytest.raises(AppVanishedError, match="was cancelled"):
        mine.wait(handle)
    assert table.job(app_id(handle)).cancelled == 1
    # the same, once a newer attempt adopted it: not cancelled
    table.set_state(app_id(handle), AppState.UNKNOWN)
    runner.set_owner(handle, "try=2")
    with pytest.raises(AppVanishedError) as e:
        mine.wait(handle)
    assert "was cancelled" not in str(e.value)
    assert table.job(app_id(handle)).cancelled == 1


def test_the_grace_clock_tolerates_a_short_vanish(runner: Runner, table: JobTable) -> None:
    lc = life(runner, unknown_timeout=3600)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    job = table.job(app_id(handle))
    table.vanish(app_id(handle))
    assert lc.poll(handle).phase == Phase.VANISHED
    table.jobs[app_id(handle)] = job  # back (e.g. an eventually consistent API)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert lc.wait(handle).state == AppState.SUCCEEDED


def test_wait_reports_every_transition_and_returns_the_succeeded_status(
    runner: Runner, table: JobTable
) -> None:
    table.hold = False
    table.steps = 4  # SUBMITTED -> RUNNING x3 -> SUCCEEDED
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    seen: list[tuple[Phase, AppState | None]] = []
    status = lc.wait(
        handle, on_change=lambda o: seen.append((o.phase, o.status and o.status.state))
    )
    assert status.state == AppState.SUCCEEDED
    assert seen == [(Phase.WAITING, AppState.RUNNING), (Phase.SUCCEEDED, AppState.SUCCEEDED)]


def test_wait_raises_failed_with_a_tail_of_every_replica_failed_first(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner, tail_lines=2)
    handle = lc.attach(make_app(replicas=3), IDENTITY).app_handle
    aid = app_id(handle)
    table.set_replica(aid, "worker", 0, AppState.CANCELLED)
    table.set_replica(aid, "worker", 1, AppState.FAILED, error='{"message": "boom"}')
    table.set_replica(aid, "worker", 2, AppState.CANCELLED)
    table.job(aid).error = '{"message": "boom"}'
    table.set_state(aid, AppState.FAILED)
    with pytest.raises(AppFailedError) as e:
        lc.wait(handle)
    err = e.value
    assert type(err) is AppFailedError and err.phase == Phase.FAILED
    assert err.status is not None and err.status.state == AppState.FAILED
    assert err.log_tail == [
        "[worker/1] worker 1 line 1",
        "[worker/1] worker 1 line 2",
        "[worker/0] worker 0 line 1",
        "[worker/0] worker 0 line 2",
        "[worker/2] worker 2 line 1",
        "[worker/2] worker 2 line 2",
    ]
    text = str(err)
    assert text.startswith(f"app {handle} ended FAILED")
    assert text.count("boom") == 1  # the structured error is printed once
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.app_handle, again.log_tail) == (
        AppFailedError,
        text,
        handle,
        err.log_tail,
    )


def test_wait_raises_cancelled_for_an_app_cancelled_by_someone_else(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.CANCELLED)
    with pytest.raises(AppCancelledError) as e:
        lc.wait(handle)
    assert isinstance(e.value, AppFailedError) and e.value.phase == Phase.CANCELLED
    assert f"app {handle} ended CANCELLED" in str(e.value)
    assert type(pickle.loads(pickle.dumps(e.value))) is AppCancelledError


def test_result_of_an_observation_that_is_not_done_is_a_usage_error(runner: Runner) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    obs = lc.poll(handle)
    assert not obs.done
    with pytest.raises(AppLifecycleError, match="still waiting"):
        lc.result(handle, obs)


def test_an_observation_travels_as_json(runner: Runner, table: JobTable) -> None:
    import json

    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_replica(app_id(handle), "worker", 1, AppState.FAILED, error="boom")
    table.set_state(app_id(handle), AppState.FAILED)
    for obs in (lc.poll(handle), Observation(Phase.VANISHED, None, True)):
        again = Observation.from_json(json.loads(json.dumps(obs.to_json())))
        assert again == obs
    with pytest.raises(InvalidTaskArgumentError, match="Observation"):
        Observation.from_json({"phase": "nope", "status": None, "expired": False})


def test_apoll_reads_from_an_event_loop(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    obs = asyncio.run(lc.apoll(handle))
    assert obs.phase == Phase.SUCCEEDED and lc.result(handle, obs).state == AppState.SUCCEEDED


# -- ownership and cancel -------------------------------------------------------------------------


def test_the_owner_cancels_its_app(runner: Runner, table: JobTable) -> None:
    lc = life(runner, owner="try=1")
    handle = lc.attach(make_app(), IDENTITY).app_handle
    assert lc.cancel(handle) is True
    assert table.job(app_id(handle)).state == AppState.CANCELLED


def test_a_superseded_attempt_does_not_cancel_the_app_its_successor_adopted(
    runner: Runner, table: JobTable
) -> None:
    # Airflow's clear of a deferred task: the new try reattaches, then the old trigger's on_kill
    old = life(runner, owner="try=1")
    new = life(runner, owner="try=2")
    handle = old.attach(make_app(), IDENTITY).app_handle
    assert new.attach(make_app(), IDENTITY).how == "reattached"
    assert old.cancel(handle) is False
    job = table.job(app_id(handle))
    assert (job.cancelled, job.state) == (0, AppState.SUBMITTED)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert new.wait(handle).state == AppState.SUCCEEDED  # the new try finishes on the same app
    assert len(table.jobs) == 1


def test_without_owner_support_a_kill_path_cancels(runner: Runner, table: JobTable) -> None:
    table.supports_owner = False
    life(runner, owner="try=1").attach(make_app(), IDENTITY)
    handle = life(runner, owner="try=2").attach(make_app(), IDENTITY).app_handle
    assert life(runner, owner="try=1").cancel(handle) is True  # documented limitation
    assert table.job(app_id(handle)).state == AppState.CANCELLED


def test_only_if_owned_false_cancels_whoever_owns_it(runner: Runner, table: JobTable) -> None:
    handle = life(runner, owner="try=2").attach(make_app(), IDENTITY).app_handle
    assert life(runner, owner="operator").cancel(handle, only_if_owned=False) is True
    assert table.job(app_id(handle)).state == AppState.CANCELLED


def test_cancel_is_idempotent_and_sweeps_a_finished_app(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    assert lc.cancel(handle) is True and lc.cancel(handle) is True
    job = table.job(app_id(handle))
    assert (job.state, job.cancelled) == (AppState.CANCELLED, 2)  # the scheduler saw both
    table.vanish(app_id(handle))
    assert lc.cancel(handle) is True  # an app gone: nothing to do, no error


def test_a_hanging_cancel_is_bounded(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.cancel_gate = threading.Event()
    assert lc.cancel(handle, timeout=0.2) is False  # returned although the cancel hangs
    table.cancel_gate.set()  # the helper thread goes on and cancels
    with table.cond:
        assert table.cond.wait_for(lambda: table.job(app_id(handle)).cancelled == 1, timeout=30)


def test_a_failing_cancel_returns_false(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.describe_error = OSError("scheduler down")  # cancel checks that the app exists
    assert lc.cancel(handle) is False


def test_cancel_by_name_cancels_the_unfinished_owned_apps_of_that_name(
    runner: Runner, table: JobTable
) -> None:
    name = app_name("train", IDENTITY)
    lc = life(runner, owner="try=1")
    done = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(done), AppState.FAILED)
    mine = lc.attach(make_app(), IDENTITY).app_handle
    runner.set_owner(mine, "try=1")
    unowned = runner.run(AppDef(name, roles=make_app().roles), "fake")  # submit interrupted
    theirs = runner.run(AppDef(name, roles=make_app().roles), "fake")
    runner.set_owner(theirs, "try=2")
    other = life(runner).attach(make_app(), ("another", "identity")).app_handle
    assert lc.cancel_by_name(name) is True
    states = {h: table.job(app_id(h)) for h in (done, mine, unowned, theirs, other)}
    assert [(j.state, j.cancelled) for j in states.values()] == [
        (AppState.FAILED, 0),
        (AppState.CANCELLED, 1),
        (AppState.CANCELLED, 1),
        (AppState.SUBMITTED, 0),
        (AppState.SUBMITTED, 0),
    ]


def test_cancel_by_name_is_bounded(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    att = lc.attach(make_app(), IDENTITY)
    table.cancel_gate = threading.Event()
    assert lc.cancel_by_name(att.app_name, timeout=0.2) is False


def test_set_owner_rejects_bad_tokens(runner: Runner) -> None:
    from torchx_core.runner import RunnerError

    handle = life(runner).attach(make_app(), IDENTITY).app_handle
    for bad in ("", "a\nb", "x" * 201, 3):
        with pytest.raises(RunnerError, match="owner must be"):
            runner.set_owner(handle, bad)  # type: ignore[arg-type]


# -- logs -----------------------------------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, line: str) -> None:
        with self.cond:
            self.lines.append(line)
            self.cond.notify_all()

    def wait_for(self, n: int) -> list[str]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.lines) >= n, timeout=60), self.lines
            return list(self.lines)


def test_the_follower_streams_every_replica_until_the_app_ends(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    sink = Sink()
    follower = lc.follow_logs(handle, sink)
    sink.wait_for(6)
    table.append_log(app_id(handle), "worker", 1, "late line")
    sink.wait_for(7)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert follower.join(timeout=60)
    follower.stop()
    assert sorted(sink.lines) == sorted(
        [f"[worker/{k}] worker {k} line {i}" for k in range(2) for i in range(3)]
        + ["[worker/1] late line"]
    )


def test_after_a_reattach_the_follower_skips_what_was_already_written(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    sink = Sink()
    follower = lc.follow_logs(handle, sink, skip_existing=True)
    table.append_log(app_id(handle), "worker", 0, "new 0")
    table.append_log(app_id(handle), "worker", 1, "new 1")
    sink.wait_for(2)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert follower.join(timeout=60)
    assert sorted(sink.lines) == ["[worker/0] new 0", "[worker/1] new 1"]


def test_a_broken_stream_resumes_without_repeating_lines(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(replicas=1), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    table.log_breaks = 2  # the first two opens fail (e.g. the log file does not exist yet)
    sink = Sink()
    follower = lc.follow_logs(handle, sink, retry_interval=0.01)
    sink.wait_for(3)
    table.log_breaks = 1  # break again mid-way: the reopened stream skips what was given
    table.append_log(app_id(handle), "worker", 0, "more")
    sink.wait_for(4)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert follower.join(timeout=60)
    assert sink.lines == [f"[worker/0] worker 0 line {i}" for i in range(3)] + ["[worker/0] more"]


def test_the_follower_caps_the_replicas_and_says_how_to_read_the_others(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner, max_log_replicas=2)
    handle = lc.attach(make_app(replicas=5), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    sink = Sink()
    follower = lc.follow_logs(handle, sink)
    assert follower.join(timeout=60)
    assert sink.lines[0] == (
        f"(showing 2 of 5 replicas; read the others with `torchx log {handle}/<role>/<k>`)"
    )
    assert {line.split("]")[0] for line in sink.lines[1:]} == {"[worker/0", "[worker/1"}
    assert len(sink.lines) == 1 + 2 * 3


def test_an_app_that_already_ended_gives_every_line_once(runner: Runner, table: JobTable) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(replicas=2), IDENTITY).app_handle
    for k in range(2):
        table.append_log(app_id(handle), "worker", k, *(f"n{i:03d}" for i in range(100)))
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    sink = Sink()
    follower = lc.follow_logs(handle, sink)
    assert follower.join(timeout=60)
    follower.stop()
    expected = [f"[worker/{k}] worker {k} line {i}" for k in range(2) for i in range(3)]
    expected += [f"[worker/{k}] n{i:03d}" for k in range(2) for i in range(100)]
    assert sorted(sink.lines) == sorted(expected)
    assert follower.positions() == {"worker/0": 103, "worker/1": 103}


def test_a_log_followed_in_two_parts_gives_every_line_once(runner: Runner, table: JobTable) -> None:
    """An engine log followed in two parts (a task that watched on a worker, deferred and
    resumed): the second follower starts where the first one stopped."""
    lc = life(runner)
    handle = lc.attach(make_app(replicas=2), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    sink = Sink()
    first = lc.follow_logs(handle, sink)
    sink.wait_for(6)
    table.append_log(app_id(handle), "worker", 0, "before stop")
    sink.wait_for(7)
    first.stop(timeout=0)  # the app still runs: closed at once
    given = first.positions()
    assert given == {"worker/0": 4, "worker/1": 3}
    table.append_log(app_id(handle), "worker", 0, "while deferred 0")
    table.append_log(app_id(handle), "worker", 1, "while deferred 1")
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert sink.lines[6:] == ["[worker/0] before stop"]  # nothing given after stop()
    second = lc.follow_logs(handle, sink, start_at=given)
    assert second.join(timeout=60)
    second.stop()
    assert sorted(sink.lines) == sorted(
        [f"[worker/{k}] worker {k} line {i}" for k in range(2) for i in range(3)]
        + ["[worker/0] before stop", "[worker/0] while deferred 0", "[worker/1] while deferred 1"]
    )
    assert second.positions() == {"worker/0": 5, "worker/1": 4}


def test_stop_waits_for_streams_that_still_give_lines(runner: Runner, table: JobTable) -> None:
    """A slow sink (a busy engine log) behind a long log: stop()'s timeout is idle time, so a
    stream that keeps giving lines is drained whole, however long that takes."""
    lc = life(runner)
    handle = lc.attach(make_app(replicas=1), IDENTITY).app_handle
    table.append_log(app_id(handle), "worker", 0, *(f"n{i:03d}" for i in range(100)))
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    lines: list[str] = []
    gate = threading.Event()

    def slow_sink(line: str) -> None:
        gate.wait(0.02)  # each line takes a while; together far longer than stop()'s timeout
        lines.append(line)

    follower = lc.follow_logs(handle, slow_sink)
    follower.stop(timeout=0.5)
    assert len(lines) == 103 and len(set(lines)) == 103


def test_the_failure_tail_is_capped_and_never_raises(runner: Runner, table: JobTable) -> None:
    lc = life(runner, max_log_replicas=2, tail_lines=1)
    handle = lc.attach(make_app(replicas=4), IDENTITY).app_handle
    aid = app_id(handle)
    for k in range(3):
        table.set_replica(aid, "worker", k, AppState.CANCELLED)
    table.set_replica(aid, "worker", 3, AppState.FAILED)
    table.set_state(aid, AppState.FAILED)
    del table.job(aid).logs[("worker", 3)]
    status = runner.status(handle)
    assert lc.failure_tail(handle, status) == [
        "[worker/3] <logs unavailable: no replica worker/3>",
        "[worker/0] worker 0 line 2",
        f"(showing 2 of 4 replicas; read the others with `torchx log {handle}/<role>/<k>`)",
    ]
    assert life(runner, tail_lines=0).failure_tail(handle, status) == []


# -- the real local scheduler: the owner is shared by every process ------------------------------


_OWNER_SCRIPT = """
import sys
from torchx_core.runner import get_runner
from torchx_core.runner.lifecycle import AppLifecycle
handle, me = sys.argv[1], sys.argv[2]
with get_runner() as runner:
    print(runner.owner(handle))
    print(AppLifecycle(runner, "local_cwd", owner=me).cancel(handle))
"""


@pytest.mark.integration
@pytest.mark.local
def test_local_owner_is_seen_by_other_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    app = AppDef("sleeper", roles=[Role("sleep", image="/", entrypoint="sleep", args=["120"])])
    with get_runner(component_defaults={}) as runner:
        lc = AppLifecycle(runner, "local_cwd", owner="try=1", poll_interval=0.1)
        att = lc.attach(app, IDENTITY)
        try:
            assert runner.owner(att.app_handle) == "try=1"
            # a successor adopts it in this process; a stale attempt elsewhere must not cancel it
            assert (
                AppLifecycle(runner, "local_cwd", owner="try=2").attach(app, IDENTITY).how
                == "reattached"
            )
            stale = subprocess.run(
                [sys.executable, "-c", _OWNER_SCRIPT, att.app_handle, "try=1"],
                capture_output=True,
                text=True,
                timeout=120,
                env=dict(os.environ),
                check=True,
            )
            assert stale.stdout.split() == ["try=2", "False"]
            status = runner.status(att.app_handle)
            assert status is not None and not is_terminal(status.state)
            # the owner cancels it from another process
            owner = subprocess.run(
                [sys.executable, "-c", _OWNER_SCRIPT, att.app_handle, "try=2"],
                capture_output=True,
                text=True,
                timeout=120,
                env=dict(os.environ),
                check=True,
            )
            assert owner.stdout.split() == ["try=2", "True"]
            with pytest.raises(AppCancelledError):
                lc.wait(att.app_handle)
        finally:
            runner.cancel(att.app_handle)


@pytest.mark.integration
@pytest.mark.local
def test_local_owner_of_an_unknown_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    with get_runner(component_defaults={}) as runner:
        assert runner.set_owner("local_cwd://torchx/no-such-app", "me") is False
        assert runner.owner("local_cwd://torchx/no-such-app") is None


_HUNDRED_LINES = "for i in range(100): print(f'line {i:03d}', flush=True)"


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.parametrize("follow", ["at_submit", "after_the_end"])
def test_local_app_that_exits_at_once_gives_each_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, follow: str
) -> None:
    """An app printing 100 numbered lines and exiting at once: every line of both replicas
    reaches the sink exactly once, whether following starts at submission or after the end."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    role = Role(
        "r", image="/", entrypoint=sys.executable, args=["-c", _HUNDRED_LINES], num_replicas=2
    )
    with get_runner(component_defaults={}) as runner:
        lc = AppLifecycle(runner, "local_cwd", owner="try=1", poll_interval=0.05)
        handle = lc.attach(AppDef("hundred", roles=[role]), IDENTITY).app_handle
        if follow == "after_the_end":
            assert lc.wait(handle).state == AppState.SUCCEEDED
        lines: list[str] = []
        follower = lc.follow_logs(handle, lines.append)
        assert lc.wait(handle).state == AppState.SUCCEEDED
        follower.stop()
    expected = [f"[r/{k}] line {i:03d}" for k in range(2) for i in range(100)]
    assert sorted(lines) == sorted(expected), lines
    assert follower.errors == []


def test_attach_leaves_the_callers_appdef_as_given() -> None:
    """Submitting fills the roles in (TORCHX_JOB_ID, workspace): not the caller's AppDef, whose
    digest an engine may use as the identity of the next attempt."""
    app = AppDef("keep", roles=[Role("r", image="i", entrypoint="e", env={"A": "1"})])
    before = repr(app)
    life = AppLifecycle(make_runner(JobTable()), "fake", owner="o")
    life.attach(app, ("id",))
    assert repr(app) == before and app.roles[0].env == {"A": "1"}


def test_the_follower_reads_status_through_the_shared_read(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # many followers in one process (a flow's tasks, each following its replicas) must not each
    # ask the scheduler: their "has it ended?" reads are shared, at most one retry interval old
    from torchx_core.runner import _lifecycle_logs

    asked: list[float] = []
    real = _lifecycle_logs.read_status

    def recording(runner_: Runner, handle: str, max_age: float = 0.0) -> Any:
        asked.append(max_age)
        return real(runner_, handle, max_age)

    monkeypatch.setattr(_lifecycle_logs, "read_status", recording)
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    sink = Sink()
    follower = lc.follow_logs(handle, sink, retry_interval=0.05)
    sink.wait_for(6)
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    assert follower.join(timeout=60)
    assert asked and set(asked) == {0.05}
    assert len(sink.lines) == 6


# -- what the lifecycle tells the operator, and what a failure carries ---------------------------


def _messages(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    """What the lifecycle logged at ``level`` or above (other tests may enable INFO)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "torchx_core.runner.lifecycle" and r.levelno >= level
    ]


def test_why_an_app_of_the_name_is_or_is_not_adopted_is_logged(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="torchx_core.runner.lifecycle")
    first = life(runner).attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(first), AppState.FAILED)
    caplog.clear()
    life(runner).attach(make_app(), IDENTITY, known_handle=first)
    assert f"not reattaching to {first}: it is failed" in _messages(caplog, logging.INFO)

    table.describe_error = TimeoutError("describe timed out")
    caplog.clear()
    life(runner).attach(make_app(), ("run-2", "t"), known_handle=first)
    assert (
        f"cannot read the status of {first} (describe timed out); not reattaching to it"
        in _messages(caplog)
    )


def test_reattaching_to_a_listed_app_with_an_unreadable_status_is_logged(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    first = life(runner).attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(first), AppState.RUNNING)
    table.describe_error = ConnectionError("scheduler unreachable")
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    life(runner).attach(make_app(), IDENTITY)
    assert (
        f"cannot read the status of {first} (scheduler unreachable); reattaching to it, as the"
        " scheduler lists it running" in _messages(caplog)
    )


def test_an_unreadable_poll_is_logged_with_the_handle_and_the_error(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.describe_error = OSError("connection reset")
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    lc.poll(handle, max_age=0)
    assert _messages(caplog) == [f"cannot read the status of {handle}: connection reset"]


def test_the_grace_clock_of_an_app_runs_across_polls(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One clock per app, kept from poll to poll (on a clock the test moves, no sleep)."""
    import functools

    from torchx_core.runner import lifecycle

    now = [100.0]
    monkeypatch.setattr(
        lifecycle, "GraceClock", functools.partial(GraceClock, clock=lambda: now[0])
    )
    lc = life(runner, unknown_timeout=5)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.vanish(app_id(handle))
    assert lc.poll(handle, max_age=0).expired is False
    now[0] = 104.9
    assert lc.poll(handle, max_age=0).expired is False
    now[0] = 105.0
    assert lc.poll(handle, max_age=0).expired is True


def test_a_vanished_error_carries_the_last_status_read_and_says_why(
    runner: Runner, table: JobTable
) -> None:
    lc = life(runner, unknown_timeout=0)
    handle = lc.attach(make_app(), IDENTITY).app_handle
    table.set_state(app_id(handle), AppState.RUNNING)
    assert lc.poll(handle, max_age=0).phase == Phase.WAITING
    table.vanish(app_id(handle))
    obs = lc.poll(handle, max_age=0)
    with pytest.raises(AppVanishedError) as e:
        lc.result(handle, obs)
    assert e.value.status is not None and e.value.status.state == AppState.RUNNING
    assert e.value.phase is Phase.VANISHED and e.value.log_tail == []
    assert e.value.detail == (
        "vanished: the scheduler has not known it for 0 s (unknown_timeout); it was deleted"
        " or expired"
    )


def test_an_unknown_error_carries_the_last_status_its_log_tail_and_says_why(
    runner: Runner, table: JobTable
) -> None:
    handle = life(runner).attach(make_app(replicas=1), IDENTITY).app_handle
    # a lifecycle in another process: its Runner knows the app only from the scheduler
    lc = life(make_runner(table), unknown_timeout=0, tail_lines=1)
    table.set_state(app_id(handle), AppState.RUNNING)
    lc.poll(handle, max_age=0)
    table.describe_error = OSError("connection reset")
    obs = lc.poll(handle, max_age=0)
    with pytest.raises(AppVanishedError) as e:
        lc.result(handle, obs)  # still unreadable: the replicas are the last status read's
    assert e.value.status is not None and e.value.status.state == AppState.RUNNING
    assert e.value.phase is Phase.UNKNOWN
    assert e.value.log_tail == ["[worker/0] <logs unavailable: connection reset>"]
    assert e.value.detail == (
        "stayed UNKNOWN (or unreadable) for 0 s (unknown_timeout); check the scheduler, or raise"
        " unknown_timeout"
    )
    table.describe_error = None
    table.set_state(app_id(handle), AppState.UNKNOWN)
    with pytest.raises(AppVanishedError) as e:
        lc.result(handle, lc.poll(handle, max_age=0))
    assert e.value.log_tail == ["[worker/0] worker 0 line 2"]
    assert e.value.detail.endswith("raise unknown_timeout; it was cancelled")


def test_an_unreadable_owner_is_cancelled_and_logged(
    runner: Runner,
    table: JobTable,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lc = life(runner)
    handle = lc.attach(make_app(), IDENTITY).app_handle

    def unreadable(handle: str) -> str | None:
        raise ConnectionError("owner store down")

    monkeypatch.setattr(runner, "owner", unreadable)
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    assert lc.cancel(handle) is True
    assert table.job(app_id(handle)).cancelled == 1
    assert f"cannot read the owner of {handle} (owner store down); cancelling it" in _messages(
        caplog
    )


def test_a_superseded_cancel_is_logged_with_both_owners(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    handle = life(runner, owner="try=1").attach(make_app(), IDENTITY).app_handle
    runner.set_owner(handle, "try=2")
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    assert life(runner, owner="try=1").cancel(handle) is False
    assert f"not cancelling {handle}: superseded by try=2 (I am try=1)" in _messages(caplog)


def test_a_twin_that_already_ended_does_not_take_over(runner: Runner, table: JobTable) -> None:
    """Only live apps of the name compete: an ended twin (even SUCCEEDED) leaves mine alone."""
    table.ordered = True

    def ended_twin(info: Any) -> None:
        twin = runner.schedule(info)
        table.set_state(app_id(twin), AppState.SUCCEEDED)

    table.before_schedule = ended_twin
    att = life(runner).attach(make_app(), IDENTITY)
    assert att.how == "submitted"
    assert table.job(app_id(att.app_handle)).cancelled == 0


def test_a_failed_reconcile_keeps_my_app_and_says_so(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    table.ordered = True

    def list_breaks(info: Any) -> None:
        table.list_error = ConnectionError("list failed")

    table.before_schedule = list_breaks
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    att = life(runner).attach(make_app(), IDENTITY)
    assert att.how == "submitted" and table.job(app_id(att.app_handle)).cancelled == 0
    assert (
        f"cannot check for another app named {att.app_name} (list failed); keeping"
        f" {att.app_handle}" in _messages(caplog)
    )


@pytest.mark.parametrize(
    ("listed_name", "listed_id", "named"),
    [
        ("", "ns:train-e1b0369d8c-x7", True),  # a namespace prefix and a backend suffix
        ("", "NS:TRAIN-E1B0369D8C", True),  # case-insensitive, no suffix
        ("", "ns:train-e1b0369d8cx", False),  # a longer name is another name
        ("TRAIN-E1B0369D8C-1", "q:1", True),  # a derived listed name
        ("", "train-e1b0369d8c:x", False),
    ],
)
def test_a_listed_app_is_named_by_its_name_or_app_id(
    listed_name: str, listed_id: str, named: bool
) -> None:
    from torchx_core.runner.lifecycle import _is_named
    from torchx_core.schedulers.api import ListAppResponse

    row = ListAppResponse(app_id=listed_id, state=AppState.RUNNING, name=listed_name)
    assert _is_named(row, "train-e1b0369d8c") is named


def test_a_plain_attach_warns_about_nothing_and_a_failed_list_is_logged(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    life(runner).attach(make_app(), IDENTITY)
    assert _messages(caplog) == []
    table.list_error = ConnectionError("scheduler down")
    life(runner).attach(make_app(), ("run-2", "t"))
    assert _messages(caplog) == [
        "cannot list apps on fake to reattach (scheduler down); submitting anew"
    ]


@pytest.mark.parametrize(
    ("base", "max_len", "prefix"),
    [
        ("a" * 50, None, "a" * 40),  # the default cut
        ("train", 1, "t"),  # the shortest prefix
        ("___abcdef", 4, "abcd"),  # cut after stripping the ends
        ("ab-cd", 3, "ab"),  # and stripped again after the cut
        ("X-trainX", 40, "X-trainX"),  # only '-' and '_' are stripped
        ("!!!", 40, "app"),
    ],
)
def test_app_name_prefix_is_the_sanitized_cut_base(
    base: str, max_len: int | None, prefix: str
) -> None:
    name = (
        app_name(base, IDENTITY) if max_len is None else app_name(base, IDENTITY, max_len=max_len)
    )
    assert name == f"{prefix}-{app_name('x', IDENTITY).rpartition('-')[2]}"


def test_app_name_says_what_is_wrong() -> None:
    with pytest.raises(InvalidTaskArgumentError, match=r"identity must name the step .*got ''"):
        app_name("train", "")
    for bad in (0, True, "5"):
        with pytest.raises(InvalidTaskArgumentError, match=r"max_len must be an int >= 1, got"):
            app_name("train", IDENTITY, max_len=bad)  # type: ignore[arg-type]


def test_bad_seconds_are_explained() -> None:
    from torchx_core.runner.lifecycle import _seconds

    with pytest.raises(InvalidTaskArgumentError) as e:
        GraceClock("5s")  # type: ignore[arg-type]
    assert str(e.value) == (
        "unknown_timeout must be a finite number of seconds >= 0, got '5s' (str)"
        " (set e.g. unknown_timeout=300)"
    )
    assert GraceClock(" 5 ").timeout_s == 5.0  # type: ignore[arg-type]  # a config string
    with pytest.raises(InvalidTaskArgumentError) as e:
        GraceClock(-1)
    assert str(e.value).startswith(
        "unknown_timeout must be a finite number of seconds >= 0, got -1 ("
    )
    with pytest.raises(InvalidTaskArgumentError) as e:
        _seconds("unknown_timeout", math.nan, allow_zero=True)
    assert str(e.value).startswith(
        "unknown_timeout must be a finite number of seconds >= 0, got nan"
    )


def test_a_lost_race_reattaches_with_the_earlier_apps_status_and_says_so(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    table.ordered = True
    twin = _twin(runner, table, "try=1")
    caplog.set_level("WARNING", logger="torchx_core.runner.lifecycle")
    att = life(runner, owner="try=2").attach(make_app(), IDENTITY)
    assert att.status is not None and att.status.state == AppState.SUBMITTED
    mine = [h for h in (f"fake://test/{j}" for j in table.jobs) if h != twin[0]]
    assert _messages(caplog) == [
        f"{mine[0]} and an earlier {twin[0]} were both submitted as {att.app_name}; cancelling mine"
    ]
