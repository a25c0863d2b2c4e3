"""Batched status reads: ``Runner.status_many`` and the process-wide shared status of watchers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from support.fake_scheduler import FakeScheduler, JobTable

from torchx_core.runner import Runner
from torchx_core.runner.status_watch import StatusWatcher
from torchx_core.schedulers.api import DescribeAppResponse
from torchx_core.specs import AppDef, AppState, Role


class CountingScheduler(FakeScheduler):
    """The fake scheduler, counting batched reads; ``describe`` alone must not be used."""

    def __init__(self, session_name: str, table: JobTable, **kwargs: Any) -> None:
        super().__init__(session_name, table, steps=10**9, **kwargs)
        self.batches: list[list[str]] = table.batches  # type: ignore[attr-defined]

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        ids = list(app_ids)
        self.batches.append(ids)
        self.table.in_flight.set()  # type: ignore[attr-defined]
        gate = self.table.gate  # type: ignore[attr-defined]
        if gate is not None:  # a slow scheduler: the read lasts until the test opens the gate
            self.table.opened.append(gate.wait(30))  # type: ignore[attr-defined]
        if self.table.fail is not None:  # type: ignore[attr-defined]
            raise self.table.fail  # type: ignore[attr-defined]
        return {a: super(CountingScheduler, self).describe(a) for a in ids}


@pytest.fixture
def table() -> JobTable:
    t = JobTable()
    t.batches = []  # type: ignore[attr-defined]
    t.gate = None  # type: ignore[attr-defined]  # a threading.Event: reads wait for it
    t.in_flight = threading.Event()  # type: ignore[attr-defined]  # set once a read began
    t.opened = []  # type: ignore[attr-defined]  # per gated read: was the gate opened in time
    t.fail = None  # type: ignore[attr-defined]
    return t


def runner_for(
    table: JobTable, backend: str = "fake", clock: Callable[[], float] = time.monotonic
) -> Runner:
    """A Runner with its own watcher (reading ``clock``)."""

    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table, **kwargs)

    return Runner("t", {backend: factory}, status_watcher=StatusWatcher(clock))


def reads_made(runner: Runner, handle: str) -> int:
    return runner.status_watcher.reads_made(runner.watch_key(handle.split(":")[0]))


def lists_made(runner: Runner, scheduler: str, cfg: dict[str, Any] | None = None) -> int:
    return runner.status_watcher.lists_made(runner.watch_key(scheduler), cfg)


def submit(runner: Runner, n: int, backend: str = "fake") -> list[str]:
    app = AppDef("w", roles=[Role("r", image="i", entrypoint="e")])
    return [runner.run(app, scheduler=backend) for _ in range(n)]


def test_status_many_is_one_batched_call_per_scheduler(table: JobTable) -> None:
    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table, **kwargs)

    runner = Runner("t", {"a": factory, "b": factory})
    ha = submit(runner, 3, "a")
    hb = submit(runner, 2, "b")
    gone = "a://t/never-submitted"
    handles = [hb[0], gone, *ha, hb[1]]
    out = runner.status_many(handles)
    assert list(out) == handles  # the order given
    assert out[gone] is None
    assert all(out[h] is not None and out[h].state == AppState.RUNNING for h in ha + hb)
    assert sorted(len(b) for b in table.batches) == [2, 4]  # one call per scheduler


def test_concurrent_watchers_share_one_read(table: JobTable) -> None:
    runner = runner_for(table, clock=lambda: 100.0)
    handles = submit(runner, 200)
    for h in handles:
        runner.watch(h)
    # a slow scheduler: its read lasts until every watcher has asked (they pile up on it)
    table.gate = threading.Event()  # type: ignore[attr-defined]
    results: dict[str, Any] = {}
    start = threading.Barrier(len(handles))
    asked = threading.Semaphore(0)

    def poll(h: str) -> None:
        start.wait()
        asked.release()
        results[h] = runner.watch_status(h, max_age=5.0)

    def open_gate() -> None:
        for _ in handles:
            asked.acquire(timeout=60)
        table.gate.set()  # type: ignore[attr-defined]

    threading.Thread(target=open_gate, daemon=True).start()

    threads = [threading.Thread(target=poll, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids(handles))
    assert all(results[h] is not None and results[h].state == AppState.RUNNING for h in handles)
    assert table.opened == [True]  # type: ignore[attr-defined]


def handles_ids(handles: list[str]) -> list[str]:
    return [h.rsplit("/", 1)[1] for h in handles]


def test_a_watcher_polling_a_moment_later_reads_the_cache(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)
    runner.watch(a)
    runner.watch(b)
    runner.watch_status(a, max_age=5.0)
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids([a, b]))
    now[0] += 1.0
    runner.watch_status(b, max_age=5.0)  # b was part of a's read: no new call
    assert len(table.batches) == 1
    now[0] += 5.0
    table.jobs[handles_ids([b])[0]].state = AppState.SUCCEEDED
    status = runner.watch_status(b, max_age=5.0)  # too old now: a fresh read of both
    assert len(table.batches) == 2 and sorted(table.batches[1]) == sorted(handles_ids([a, b]))
    assert status is not None and status.state == AppState.SUCCEEDED


def test_unwatched_apps_leave_the_batches(table: JobTable) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch(a)
    runner.watch(b)
    runner.unwatch(b)
    runner.watch_status(a, max_age=0.0)
    assert table.batches == [handles_ids([a])]


def test_a_read_error_reaches_every_watcher_of_that_read_and_the_next_read_retries(
    table: JobTable,
) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch(a)
    runner.watch(b)
    table.fail = RuntimeError("squeue: slurmctld not responding")  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="not responding"):
        runner.watch_status(a, max_age=5.0)
    table.fail = None  # type: ignore[attr-defined]
    status = runner.watch_status(b, max_age=5.0)
    assert status is not None and status.state == AppState.RUNNING
    assert len(table.batches) == 2


def test_async_watchers_share_one_read_without_blocking_the_loop(table: JobTable) -> None:
    runner = runner_for(table)
    handles = submit(runner, 200)
    for h in handles:
        runner.watch(h)
    # the read lasts until the loop has ticked 5 times while it is in flight: if the read
    # blocked the loop, the gate would stay shut (and the read give up after 30 s)
    table.gate = threading.Event()  # type: ignore[attr-defined]
    ticks: list[float] = []

    async def heartbeat(stop: asyncio.Event) -> None:
        while not stop.is_set():
            if table.in_flight.is_set():  # type: ignore[attr-defined]
                ticks.append(time.monotonic())
                if len(ticks) == 5:
                    table.gate.set()  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)

    async def main() -> list[Any]:
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop))
        out = await asyncio.gather(*(runner.awatch_status(h, max_age=5.0) for h in handles))
        stop.set()
        await beat
        return out

    statuses = asyncio.run(main())
    assert len(table.batches) == 1
    assert all(s is not None and s.state == AppState.RUNNING for s in statuses)
    # the loop kept running while the read waited in a worker thread: the heartbeat ticked on
    assert len(ticks) >= 5 and table.opened == [True]  # type: ignore[attr-defined]


def test_apps_asked_recently_join_the_batches_and_are_forgotten_later(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)
    runner.watch_status(a, max_age=5.0)  # no explicit watch(): asking registers the app
    now[0] += 6.0
    runner.watch_status(b, max_age=5.0)
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))
    now[0] += 31.0  # a was not asked for 30 s (and 4 x max_age): it leaves the batches
    runner.watch_status(b, max_age=5.0)
    assert table.batches[-1] == handles_ids([b])


def test_an_app_whose_every_read_failed_is_forgotten_like_the_others(table: JobTable) -> None:
    now = [0.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)
    table.describe_error = RuntimeError("scheduler briefly down")
    with pytest.raises(RuntimeError):
        runner.watch_status(a, max_age=5.0)  # asked for, never cached
    table.describe_error = None
    now[0] += 31.0  # a leaves the batches; it has no cached status to drop
    assert runner.watch_status(b, max_age=5.0) is not None
    assert table.batches[-1] == handles_ids([b])


def test_lifecycle_watchers_share_reads(table: JobTable) -> None:
    """One AppLifecycle and one Runner per watched app (as one per trigger), built over the same
    scheduler factory (as ``get_runner()`` does): their polls share one batched read."""
    from torchx_core.runner.lifecycle import AppLifecycle, Phase

    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table, **kwargs)

    handles = submit(Runner("t", {"fake": factory}), 50)
    table.batches.clear()  # type: ignore[attr-defined]
    lifecycles = [
        AppLifecycle(Runner("t", {"fake": factory}), "fake", owner=f"o{i}", poll_interval=30.0)
        for i in range(len(handles))
    ]
    seen = [lc.poll(h).phase for lc, h in zip(lifecycles, handles, strict=True)]
    assert seen == [Phase.WAITING] * len(handles)
    # the first poll read its own app; every later app was asked once, read in its own batch...
    assert len(table.batches) == len(handles)
    # ...and from now on one read answers every lifecycle for a whole poll interval
    table.batches.clear()  # type: ignore[attr-defined]
    # the first poll asks for a status newer than the cache: one read of every app asked for
    seen = [
        lc.poll(h, max_age=1e-9 if i == 0 else None).phase
        for i, (lc, h) in enumerate(zip(lifecycles, handles, strict=True))
    ]
    assert seen == [Phase.WAITING] * len(handles)
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids(handles))


def test_an_app_watched_twice_stays_until_its_last_watcher_leaves(table: JobTable) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.unwatch(b)  # never watched: nothing to do
    runner.watch(a)
    runner.watch(a)
    runner.unwatch(a)
    runner.watch_status(b, max_age=0.0)
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))
    runner.unwatch(a)
    runner.watch_status(b, max_age=0.0)
    assert table.batches[-1] == handles_ids([b])


def test_unwatching_forgets_the_asked_app_and_its_cached_status(table: JobTable) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch(b)
    runner.watch_status(b, max_age=5.0)  # asked for, and cached
    runner.unwatch(b)
    runner.watch_status(a, max_age=0.0)
    assert table.batches[-1] == handles_ids([a])  # b left the batches at once
    runner.watch_status(b, max_age=5.0)
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))  # not from a forgotten cache


def test_each_scheduler_and_cfg_has_its_own_shared_list(table: JobTable) -> None:
    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table, **kwargs)

    runner = Runner("t", {"a": factory, "b": factory})
    submit(runner, 1, "a")
    assert lists_made(runner, "a") == 0
    rows = runner.shared_list("a")
    assert [r.app_handle.split(":")[0] for r in rows] == ["a"]
    assert [r.app_handle.split(":")[0] for r in runner.shared_list("b")] == ["b"]
    runner.shared_list("a", {"queue": "q"})
    assert lists_made(runner, "a") == 1
    assert lists_made(runner, "b") == 1
    assert lists_made(runner, "a", {"queue": "q"}) == 1
    assert lists_made(runner, "a", {"queue": "other"}) == 0


def test_async_watchers_read_the_cache_and_keep_their_apps_in_the_batches(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)

    async def ask(handle: str) -> Any:
        return await runner.awatch_status(handle, max_age=5.0)

    first = asyncio.run(ask(a))
    now[0] += 1.0
    again = asyncio.run(ask(a))  # from the cache
    assert len(table.batches) == 1 and again is first
    now[0] += 5.0
    runner.watch_status(b, max_age=5.0)  # a, asked 6 s ago by an async watcher, is read too
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))


def _recording_async_sleep(
    monkeypatch: pytest.MonkeyPatch, table: JobTable | None = None
) -> list[float]:
    """Records the pauses asked of ``asyncio.sleep`` (each still yields to the loop); with a
    ``table``, a pause taken while a read is in flight opens its gate (a watcher is waiting
    for that read: the read may end)."""
    slept: list[float] = []
    real = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        slept.append(delay)
        if table is not None and table.in_flight.is_set():  # type: ignore[attr-defined]
            table.gate.set()  # type: ignore[attr-defined]
        return await real(min(delay, 0.01), *args)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return slept


def test_an_async_watcher_joins_a_read_a_thread_makes(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch(b)
    table.gate = threading.Event()  # type: ignore[attr-defined]  # the read lasts until joined
    reader = threading.Thread(target=runner.watch_status, args=(a, 5.0))
    reader.start()
    assert table.in_flight.wait(30)  # type: ignore[attr-defined]  # the thread's read began
    slept = _recording_async_sleep(monkeypatch, table)
    status = asyncio.run(runner.awatch_status(b, max_age=5.0))
    reader.join()
    assert table.opened == [True]  # type: ignore[attr-defined]
    assert status is not None and status.state == AppState.RUNNING
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids([a, b]))
    assert slept and set(slept) == {0.05}  # checked the thread's read every 50 ms, no own read


def test_an_async_watcher_on_another_loop_polls_that_loop_s_read(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two event loops (two threads, e.g. two async flows): the read one loop leads is joined
    from the other by polling; the leader's ``asyncio.Event`` belongs to its own loop, and a
    waiter of another loop that awaited it would not be woken by its ``set()``."""
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch(b)
    table.gate = threading.Event()  # type: ignore[attr-defined]  # the read lasts until joined
    slept = _recording_async_sleep(monkeypatch, table)
    joined: dict[str, Any] = {}

    def other_loop() -> None:
        if not table.in_flight.wait(30):  # type: ignore[attr-defined]  # the first loop's read
            joined["error"] = "the first loop's read never began"
            return
        slept.clear()  # from here on: this loop's pauses only
        waited = asyncio.wait_for(runner.awatch_status(b, max_age=5.0), 30)
        try:
            joined["status"] = asyncio.run(waited)
        except Exception as e:  # noqa: BLE001 - reported by the assertions below
            joined["error"] = e

    thread = threading.Thread(target=other_loop)
    thread.start()
    status = asyncio.run(runner.awatch_status(a, max_age=5.0))
    thread.join(60)
    assert status is not None and status.state == AppState.RUNNING
    assert not thread.is_alive() and "error" not in joined, joined
    assert joined["status"] is not None and joined["status"].state == AppState.RUNNING
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids([a, b]))
    assert slept and set(slept) == {0.05}  # polled the other loop's read, no own read
    assert table.opened == [True]  # type: ignore[attr-defined]


def test_a_quick_async_watcher_gathers_briefly(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = runner_for(table)
    (a,) = submit(runner, 1)
    slept = _recording_async_sleep(monkeypatch)
    asyncio.run(runner.awatch_status(a, max_age=0.2))
    assert slept[0] == pytest.approx(0.01)  # gathers max_age / 20, not 250 ms


def test_each_scheduler_configuration_has_its_own_group(table: JobTable) -> None:
    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table)

    def other_factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table)

    runner = Runner("t", {"a": factory, "b": factory})
    (a,) = submit(runner, 1, "a")
    (b,) = submit(runner, 1, "b")
    runner.watch(a)
    runner.watch(b)
    runner.watch_status(a, max_age=5.0)
    assert table.batches == [handles_ids([a])]  # b is watched in its own group
    for other in (
        Runner("t", {"a": factory}, scheduler_params={"region": "eu"}),
        Runner("t", {"a": other_factory}),
    ):
        other.watch_status(a, max_age=5.0)  # another configuration: its own read
    same = Runner("t2", {"a": factory})
    same.watch_status(a, max_age=5.0)  # the same configuration: the cached status
    assert len(table.batches) == 3
    assert reads_made(runner, a) == 1
    assert reads_made(same, a) == 1


def test_a_status_exactly_max_age_old_is_fresh(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    runner = runner_for(table, clock=lambda: now[0])
    (a,) = submit(runner, 1)
    runner.watch_status(a, max_age=5.0)
    now[0] += 5.0
    runner.watch_status(a, max_age=5.0)
    assert len(table.batches) == 1
    assert reads_made(runner, a) == 1


@pytest.mark.parametrize(
    ("max_age", "kept_until"),
    [(5.0, 30.0), (10.0, 40.0)],  # max(30 s, 4 x max_age)
)
def test_an_app_asked_for_stays_in_the_batches_for_a_while(
    table: JobTable, monkeypatch: pytest.MonkeyPatch, max_age: float, kept_until: float
) -> None:
    now = [100.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)
    runner.watch_status(a, max_age=max_age)
    now[0] = 100.0 + kept_until
    runner.watch_status(b, max_age=0.0)
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))  # still kept
    now[0] += 0.5
    runner.watch_status(b, max_age=0.0)
    assert table.batches[-1] == handles_ids([b])  # forgotten...
    reads = len(table.batches)
    runner.watch_status(a, max_age=10**6)  # ...with its cached status: read anew
    assert len(table.batches) == reads + 1


def test_a_watched_app_keeps_its_cached_status_when_no_longer_asked_for(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    runner = runner_for(table, clock=lambda: now[0])
    a, b = submit(runner, 2)
    runner.watch(a)
    runner.watch_status(a, max_age=5.0)
    now[0] += 31.0
    runner.watch_status(b, max_age=0.0)  # reads a too (watched) and forgets it was asked
    batches = len(table.batches)
    runner.watch_status(a, max_age=10**6)
    assert len(table.batches) == batches  # still cached


def test_a_quick_watcher_gathers_briefly(table: JobTable, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = runner_for(table)
    (a,) = submit(runner, 1)
    slept: list[float] = []
    monkeypatch.setattr("torchx_core.runner.status_watch.time.sleep", slept.append)
    runner.watch_status(a, max_age=0.2)
    assert slept == [pytest.approx(0.01)]  # gathers max_age / 20, not 250 ms


def test_an_async_watcher_gets_the_read_error_and_reads_count(table: JobTable) -> None:
    runner = runner_for(table)
    (a,) = submit(runner, 1)
    table.fail = RuntimeError("DescribeJobs throttled")  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="throttled"):
        asyncio.run(asyncio.wait_for(runner.awatch_status(a, max_age=0.01), timeout=10))
    table.fail = None  # type: ignore[attr-defined]
    status = asyncio.run(runner.awatch_status(a, max_age=0.01))
    assert status is not None and status.state == AppState.RUNNING
    assert reads_made(runner, a) == 2


def test_a_blocking_read_inside_the_loop_of_an_async_reader_does_not_wait_for_it(
    table: JobTable,
) -> None:
    """A coroutine calling the blocking ``watch_status`` (e.g. a log follower started on a
    Prefect worker's loop) while another coroutine of that loop leads a read: waiting for that
    read would block the loop the read needs, forever. It reads its own app instead."""
    runner = runner_for(table)
    a, b = submit(runner, 2)
    done: dict[str, Any] = {}

    async def main() -> None:
        leader = asyncio.create_task(runner.awatch_status(a, max_age=5.0))
        await asyncio.sleep(0)  # the leader registered its read and gathers (sleeps)
        group = runner.status_watcher._group(runner.watch_key("fake"))
        done["leading"] = group.reading is not None and group.reading.loop is not None
        done["blocking"] = runner.watch_status(b, max_age=5.0)  # on the loop's own thread
        done["async"] = await leader

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the blocking read waited for the loop it blocks"
    assert done["leading"] is True
    assert done["blocking"] is not None and done["blocking"].state == AppState.RUNNING
    assert done["async"] is not None and done["async"].state == AppState.RUNNING
    assert sorted(table.batches[0]) == handles_ids([b])  # its own read, of its own app


def test_a_leader_cancelled_while_gathering_hands_the_read_back(table: JobTable) -> None:
    """A coroutine that leads a read is cancelled (its trigger or flow run stopped) while it
    gathers, before it read: the read must not stay in flight forever. The watcher waiting on it
    reads, and so does the next one (a stuck read held every later caller of the group)."""
    runner = runner_for(table)
    a, b = submit(runner, 2)

    async def main() -> tuple[Any, Any]:
        leader = asyncio.create_task(runner.awatch_status(a, max_age=5.0))
        await asyncio.sleep(0)  # the leader registered its read and gathers (sleeps)
        waiter = asyncio.create_task(runner.awatch_status(b, max_age=5.0))
        await asyncio.sleep(0)  # the waiter joined that read
        leader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leader
        joined = await asyncio.wait_for(waiter, 10)
        later = await asyncio.wait_for(runner.awatch_status(a, max_age=5.0), 10)
        return joined, later

    joined, later = asyncio.run(main())
    assert joined is not None and joined.state == AppState.RUNNING
    assert later is not None and later.state == AppState.RUNNING
    group = runner.status_watcher._group(runner.watch_key("fake"))
    assert group.reading is None


def test_a_blocking_leader_interrupted_while_gathering_hands_the_read_back(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a thread: an exception raised in the leader's gathering sleep (as Airflow's
    execution_timeout raises from its signal handler) must not leave the read in flight."""
    from torchx_core.runner import status_watch

    runner = runner_for(table)
    a, b = submit(runner, 2)
    joined: dict[str, Any] = {}
    waiter = threading.Thread(
        target=lambda: joined.update(status=runner.watch_status(b, max_age=5.0)), daemon=True
    )
    real_sleep = time.sleep

    def interrupted(seconds: float) -> None:
        monkeypatch.setattr(status_watch.time, "sleep", real_sleep)  # once
        waiter.start()  # joins the read this leader gathers
        real_sleep(0.2)
        raise TimeoutError("the task's execution_timeout")

    monkeypatch.setattr(status_watch.time, "sleep", interrupted)
    with pytest.raises(TimeoutError):
        runner.watch_status(a, max_age=5.0)
    waiter.join(10)
    assert not waiter.is_alive(), "the waiter still waits on the abandoned read"
    assert joined["status"] is not None and joined["status"].state == AppState.RUNNING
    later = runner.watch_status(a, max_age=5.0)
    assert later is not None and later.state == AppState.RUNNING
