"""``Runner.shared_list``: callers that look for their apps at the same time share a list
read, and never get a list read before they asked."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
from support.fake_scheduler import FakeScheduler, JobTable

from torchx_core.runner import Runner
from torchx_core.runner.status_watch import StatusWatcher
from torchx_core.schedulers.api import ListAppResponse
from torchx_core.specs import AppDef, AppState, CfgVal, Role


class GatedLists:
    """What the scheduler's ``list`` does: counts reads, and holds each one until released."""

    def __init__(self) -> None:
        self.started: list[threading.Event] = []
        self.release: list[threading.Event] = []
        self.cfgs: list[Mapping[str, CfgVal] | None] = []
        self.fail: BaseException | None = None
        self.lock = threading.Lock()


class ListingScheduler(FakeScheduler):
    def __init__(self, session_name: str, table: JobTable, gates: GatedLists, **kw: Any) -> None:
        super().__init__(session_name, table, steps=10**9, **kw)
        self.gates = gates

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        with self.gates.lock:
            started, release = threading.Event(), threading.Event()
            self.gates.started.append(started)
            self.gates.release.append(release)
            self.gates.cfgs.append(cfg)
        rows = super().list(cfg)  # the apps as they are when this read starts
        started.set()
        assert release.wait(10), "the test never released this list read"
        if self.gates.fail is not None:
            raise self.gates.fail
        return rows


@pytest.fixture
def gates() -> GatedLists:
    return GatedLists()


@pytest.fixture
def runner(gates: GatedLists) -> Runner:
    table = JobTable()

    def factory(session_name: str, **kwargs: Any) -> ListingScheduler:
        return ListingScheduler(session_name, table, gates, **kwargs)

    return Runner("t", {"fake": factory}, status_watcher=StatusWatcher())


def lists_made(runner: Runner, scheduler: str) -> int:
    return runner.status_watcher.lists_made(runner.watch_key(scheduler))


def _submit(runner: Runner, name: str) -> str:
    return runner.run(AppDef(name, roles=[Role("r", image="i", entrypoint="e")]), "fake")


def _ask(
    runner: Runner, out: dict[int, Any], i: int, cfg: Mapping[str, CfgVal] | None = None
) -> threading.Thread:
    def run() -> None:
        try:
            out[i] = sorted(r.name for r in runner.shared_list("fake", cfg))
        except BaseException as e:  # noqa: BLE001 - checked by the test
            out[i] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_reads(gates: GatedLists, n: int) -> None:
    for _ in range(1000):
        with gates.lock:
            if len(gates.started) >= n:
                break
        threading.Event().wait(0.01)
    with gates.lock:
        assert len(gates.started) >= n, f"{len(gates.started)} list reads started, not {n}"
    assert gates.started[n - 1].wait(10)


def test_a_lone_caller_reads_at_once(runner: Runner, gates: GatedLists) -> None:
    _submit(runner, "a")
    out: dict[int, Any] = {}
    thread = _ask(runner, out, 0)
    _wait_reads(gates, 1)
    gates.release[0].set()
    thread.join(10)
    assert out[0] == ["a"]
    assert lists_made(runner, "fake") == 1


def test_callers_asking_during_a_read_share_the_next_one_which_sees_their_apps(
    runner: Runner, gates: GatedLists
) -> None:
    out: dict[int, Any] = {}
    first = _ask(runner, out, 0)
    _wait_reads(gates, 1)  # read 1 runs, started before any app existed
    _submit(runner, "late")  # submitted while read 1 runs: read 1 cannot see it
    waiters = [_ask(runner, out, i) for i in range(1, 21)]
    gates.release[0].set()
    first.join(10)
    _wait_reads(gates, 2)
    gates.release[1].set()
    for t in waiters:
        t.join(10)
    assert out[0] == []  # read 1: before "late"
    assert all(out[i] == ["late"] for i in range(1, 21)), out  # never the older read 1
    with gates.lock:
        assert len(gates.started) == 2  # 21 callers, two reads
    assert lists_made(runner, "fake") == 2


def test_a_read_error_reaches_every_caller_of_that_read_and_the_next_read_recovers(
    runner: Runner, gates: GatedLists
) -> None:
    out: dict[int, Any] = {}
    gates.fail = RuntimeError("squeue: slurmctld not responding")
    callers = [_ask(runner, out, i) for i in range(3)]
    _wait_reads(gates, 1)
    gates.release[0].set()
    _wait_reads(gates, 2)  # the callers who came during read 1 read again, together
    gates.release[1].set()
    for t in callers:
        t.join(10)
    assert all(isinstance(out[i], RuntimeError) for i in range(3)), out
    gates.fail = None
    _submit(runner, "b")
    again = _ask(runner, out, 9)
    _wait_reads(gates, 3)
    gates.release[2].set()
    again.join(10)
    assert out[9] == ["b"]


def test_different_run_options_are_different_reads(runner: Runner, gates: GatedLists) -> None:
    out: dict[int, Any] = {}
    a = _ask(runner, out, 0, {"queue": "a"})
    _wait_reads(gates, 1)
    b = _ask(runner, out, 1, {"queue": "b"})  # not made to wait for queue a's read
    _wait_reads(gates, 2)
    for release in gates.release:
        release.set()
    a.join(10)
    b.join(10)
    assert gates.cfgs == [{"queue": "a"}, {"queue": "b"}]
    assert out == {0: [], 1: []}


def test_the_lifecycle_finds_apps_by_name_through_the_shared_list(
    runner: Runner, gates: GatedLists
) -> None:
    from torchx_core.runner.lifecycle import AppLifecycle, app_name

    app = AppDef("train", roles=[Role("r", image="i", entrypoint="e")])
    existing = runner.run(AppDef(app_name("train", "step-1"), roles=app.roles), "fake")
    result: dict[str, Any] = {}

    def attach() -> None:
        result["a"] = AppLifecycle(runner, "fake", owner="o").attach(app, "step-1")

    thread = threading.Thread(target=attach)
    thread.start()
    _wait_reads(gates, 1)
    gates.release[0].set()
    thread.join(10)
    assert result["a"].app_handle == existing
    assert result["a"].how == "reattached"
    assert runner.status(existing).state == AppState.RUNNING  # type: ignore[union-attr]
    assert lists_made(runner, "fake") == 1


def test_a_caller_asking_during_the_second_read_gets_a_third(
    runner: Runner, gates: GatedLists
) -> None:
    out: dict[int, Any] = {}
    first = _ask(runner, out, 0)
    _wait_reads(gates, 1)
    second = _ask(runner, out, 1)  # waits for read 1, then makes read 2
    gates.release[0].set()
    first.join(10)
    _wait_reads(gates, 2)
    _submit(runner, "late")  # read 2 is running: it cannot see this app
    third = _ask(runner, out, 2)
    gates.release[1].set()
    second.join(10)
    _wait_reads(gates, 3)
    gates.release[2].set()
    third.join(10)
    assert out == {0: [], 1: [], 2: ["late"]}
    assert lists_made(runner, "fake") == 3
