"""Unit tests of the ``torchx`` worker's own decisions (no server): which runs it takes back."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from prefect.client.schemas.objects import FlowRun
from prefect.states import Cancelling, Completed, Pending, Running, Scheduled

from torchx_prefect.worker import WORKER_NAME_LABEL, runs_to_take_back


def run(state: Any, pid: str | None = "local_cwd://torchx/a-1", worker: str | None = "w1") -> Any:
    labels = {} if worker is None else {WORKER_NAME_LABEL: worker}
    return FlowRun(flow_id=uuid.uuid4(), state=state, infrastructure_pid=pid, labels=labels)


@pytest.mark.parametrize("state", [Pending(), Running(), Cancelling()])
def test_a_watched_state_of_an_offline_worker_is_taken_back(state: Any) -> None:
    r = run(state)
    assert runs_to_take_back([r], online_workers={"w2"}, watching=set()) == [r]


@pytest.mark.parametrize(
    ("flow_run", "online", "why"),
    [
        (run(Scheduled()), set(), "not started: Prefect submits it"),
        (run(Completed()), set(), "final"),
        (run(None), set(), "no state"),
        (run(Running(), pid=None), set(), "no infrastructure"),
        (run(Running(), pid="12345"), set(), "a process id, not an app handle"),
        (run(Running()), {"w1"}, "its worker is online and watches it"),
    ],
)
def test_runs_not_taken_back(flow_run: Any, online: set[str], why: str) -> None:
    assert runs_to_take_back([flow_run], online_workers=online, watching=set()) == [], why


def test_a_run_this_worker_watches_or_without_a_worker_label() -> None:
    mine, unlabelled = run(Running()), run(Running(), worker=None)
    assert runs_to_take_back([mine, unlabelled], online_workers={"w1"}, watching={mine.id}) == [
        unlabelled
    ]


class _Follower:
    def __init__(self) -> None:
        self.stops: list[float | None] = []

    def stop(self, timeout: float | None = None) -> None:
        self.stops.append(timeout)


class _Lifecycle:
    """Follows an app that never ends (the app runs on while its worker stops)."""

    def __init__(self) -> None:
        self.follower = _Follower()
        self.polled = asyncio.Event()

    def follow_logs(self, handle: str, sink: Any, skip_existing: bool = False) -> _Follower:
        return self.follower

    async def apoll(self, handle: str, max_age: float) -> Any:
        self.polled.set()
        await asyncio.sleep(3600)


class _Configuration:
    def settings(self) -> tuple[float, bool]:
        return 1.0, True  # poll interval, stream output


def test_a_stopping_worker_closes_the_log_streams_at_once() -> None:
    """Cancelled (the worker stops on SIGTERM), following an app that runs on: the streams are
    closed with no idle wait (``stop(0.0)``), which would otherwise hold the worker's exit."""
    from torchx_prefect.worker import TorchXWorker

    async def main() -> _Lifecycle:
        worker = TorchXWorker(work_pool_name="unit")
        lifecycle = _Lifecycle()
        flow_run = FlowRun(flow_id=uuid.uuid4(), name="stopping")
        task = asyncio.ensure_future(
            worker._follow(flow_run, lifecycle, "local_cwd://torchx/a-1", _Configuration())  # type: ignore[arg-type]
        )
        await asyncio.wait_for(lifecycle.polled.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return lifecycle

    lifecycle = asyncio.run(main())
    assert lifecycle.follower.stops == [0.0]
