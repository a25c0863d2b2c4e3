"""Batched status reads: ``Runner.status_many`` and the process-wide shared status of watchers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from fake_scheduler import FakeScheduler, JobTable

from torchx_core.runner import Runner, status_watch
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
        if self.table.delay:  # type: ignore[attr-defined]
            time.sleep(self.table.delay)  # type: ignore[attr-defined]
        if self.table.fail is not None:  # type: ignore[attr-defined]
            raise self.table.fail  # type: ignore[attr-defined]
        return {a: super(CountingScheduler, self).describe(a) for a in ids}


@pytest.fixture
def table() -> Iterator[JobTable]:
    t = JobTable()
    t.batches = []  # type: ignore[attr-defined]
    t.delay = 0.0  # type: ignore[attr-defined]
    t.fail = None  # type: ignore[attr-defined]
    yield t
    status_watch.reset()


def runner_for(table: JobTable, backend: str = "fake") -> Runner:
    def factory(session_name: str, **kwargs: Any) -> CountingScheduler:
        return CountingScheduler(session_name, table, **kwargs)

    return Runner("t", {backend: factory})


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
    runner = runner_for(table)
    handles = submit(runner, 200)
    for h in handles:
        status_watch.watch(runner, h)
    table.delay = 0.3  # type: ignore[attr-defined]  # a slow scheduler: watchers pile up
    results: dict[str, Any] = {}
    start = threading.Barrier(len(handles))

    def poll(h: str) -> None:
        start.wait()
        results[h] = runner.watch_status(h, max_age=5.0)

    threads = [threading.Thread(target=poll, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids(handles))
    assert all(results[h] is not None and results[h].state == AppState.RUNNING for h in handles)


def handles_ids(handles: list[str]) -> list[str]:
    return [h.rsplit("/", 1)[1] for h in handles]


def test_a_watcher_polling_a_moment_later_reads_the_cache(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(status_watch, "_clock", lambda: now[0])
    runner = runner_for(table)
    a, b = submit(runner, 2)
    status_watch.watch(runner, a)
    status_watch.watch(runner, b)
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
    status_watch.watch(runner, a)
    status_watch.watch(runner, b)
    status_watch.unwatch(runner, b)
    runner.watch_status(a, max_age=0.0)
    assert table.batches == [handles_ids([a])]


def test_a_read_error_reaches_every_watcher_of_that_read_and_the_next_read_retries(
    table: JobTable,
) -> None:
    runner = runner_for(table)
    a, b = submit(runner, 2)
    status_watch.watch(runner, a)
    status_watch.watch(runner, b)
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
        status_watch.watch(runner, h)
    table.delay = 0.5  # type: ignore[attr-defined]
    ticks: list[float] = []

    async def heartbeat(stop: asyncio.Event) -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def main() -> list[Any]:
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop))
        out = await asyncio.gather(
            *(status_watch.ashared_status(runner, h, max_age=5.0) for h in handles)
        )
        stop.set()
        await beat
        return out

    statuses = asyncio.run(main())
    assert len(table.batches) == 1
    assert all(s is not None and s.state == AppState.RUNNING for s in statuses)
    # the loop kept running while the read slept in a worker thread: the heartbeat ticked on
    assert len(ticks) >= 5


def test_apps_asked_recently_join_the_batches_and_are_forgotten_later(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    monkeypatch.setattr(status_watch, "_clock", lambda: now[0])
    runner = runner_for(table)
    a, b = submit(runner, 2)
    runner.watch_status(a, max_age=5.0)  # no explicit watch(): asking registers the app
    now[0] += 6.0
    runner.watch_status(b, max_age=5.0)
    assert sorted(table.batches[-1]) == sorted(handles_ids([a, b]))
    now[0] += 31.0  # a was not asked for 30 s (and 4 x max_age): it leaves the batches
    runner.watch_status(b, max_age=5.0)
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
    seen = [lc.poll(h).phase for lc, h in zip(lifecycles, handles)]
    assert seen == [Phase.WAITING] * len(handles)
    # the first poll read its own app; every later app was asked once, read in its own batch...
    assert len(table.batches) == len(handles)
    # ...and from now on one read answers every lifecycle for a whole poll interval
    table.batches.clear()  # type: ignore[attr-defined]
    status_watch._groups[next(iter(status_watch._groups))].cache.clear()
    seen = [lc.poll(h).phase for lc, h in zip(lifecycles, handles)]
    assert seen == [Phase.WAITING] * len(handles)
    assert len(table.batches) == 1 and sorted(table.batches[0]) == sorted(handles_ids(handles))
