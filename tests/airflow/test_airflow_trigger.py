"""TorchXTrigger unit tests: serialization, a non-blocking run(), cleanup/on_kill, events."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from airflow.sdk.module_loading import import_string
from airflow_fakes import FakeRunner

from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_airflow.trigger import TorchXTrigger
from torchx_core.specs import AppState


def _trigger(runner: FakeRunner, handle: str, **kwargs: Any) -> TorchXTrigger:
    kwargs.setdefault("poll_interval", 0.01)
    return TorchXTrigger(app_handle=handle, runner_factory=lambda: runner, **kwargs)


def _first_event(trigger: TorchXTrigger, timeout: float = 30) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        gen = trigger.run()
        event = await asyncio.wait_for(anext(gen), timeout)
        with pytest.raises(StopAsyncIteration):
            await anext(gen)  # exactly one event
        return event.payload

    return asyncio.run(go())


def test_serialize_round_trip_rebuilds_an_equal_trigger() -> None:
    t = TorchXTrigger(
        app_handle="local_cwd://torchx/a-1",
        poll_interval=2.5,
        unknown_state_timeout=7,
        cancel_on_kill=False,
        timeout_at=1234.5,
    )
    classpath, kwargs = t.serialize()
    assert classpath == "torchx_airflow.trigger.TorchXTrigger"
    import json

    kwargs = json.loads(json.dumps(kwargs))  # plain JSON
    again = import_string(classpath)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert kwargs == {
        "app_handle": "local_cwd://torchx/a-1",
        "poll_interval": 2.5,
        "unknown_state_timeout": 7.0,
        "cancel_on_kill": False,
        "timeout_at": 1234.5,
    }


def test_bad_arguments_are_all_reported_at_once() -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXTrigger(app_handle="nohandle", poll_interval=0, unknown_state_timeout=-1)
    msg = str(ei.value)
    assert "nohandle" in msg and "poll_interval" in msg and "unknown_state_timeout" in msg
    assert isinstance(ei.value, ValueError)


def test_success_event_carries_the_status() -> None:
    r = FakeRunner([AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED])
    h = r.add_app("a", [AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED])
    payload = _first_event(_trigger(r, h))
    assert payload["event"] == "terminal"
    assert payload["status"]["state"] == "SUCCEEDED"
    assert payload["app_handle"] == h
    assert r.count("cancel") == 0
    assert r.closed == 1


def test_failed_and_vanished_events() -> None:
    r = FakeRunner()
    failed = r.add_app("a", [AppState.RUNNING, AppState.FAILED])
    assert _first_event(_trigger(r, failed))["status"]["state"] == "FAILED"
    payload = _first_event(_trigger(r, "local_cwd://torchx/never-existed", unknown_state_timeout=0))
    assert payload["event"] == "vanished"
    assert payload["status"]["state"] == "VANISHED"


def test_an_app_missing_briefly_is_waited_for() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    r.missing_on = {1, 2}
    payload = _first_event(_trigger(r, h, unknown_state_timeout=3600))
    assert payload["event"] == "terminal" and payload["status"]["state"] == "SUCCEEDED"


def test_unknown_past_grace_fires_unknown_timeout() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.UNKNOWN])
    payload = _first_event(_trigger(r, h, unknown_state_timeout=0))
    assert payload["event"] == "unknown_timeout"


def test_status_errors_count_as_unknown() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    r.status_error = ConnectionError("scheduler unreachable")
    payload = _first_event(_trigger(r, h, unknown_state_timeout=0))
    assert payload["event"] == "unknown_timeout"


def test_deadline_cancels_the_app_and_fires_timeout() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    payload = _first_event(_trigger(r, h, timeout_at=time.time() - 1))
    assert payload["event"] == "timeout"
    assert ("cancel", h) in r.calls


def test_deadline_without_cancel_on_kill_leaves_the_app() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    payload = _first_event(_trigger(r, h, timeout_at=time.time() - 1, cancel_on_kill=False))
    assert payload["event"] == "timeout"
    assert r.count("cancel") == 0


def test_run_never_blocks_the_event_loop() -> None:
    """Each status call blocks until a coroutine on the loop releases it.

    If ``run()`` called the Runner on the loop thread, the releasing coroutine could not run
    and every status call would give up (recorded as ``False``).
    """
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    release = threading.Event()
    released: list[bool] = []
    on_loop_thread: list[bool] = []
    loop_thread: list[int] = []

    def blocking_status(handle: str) -> None:
        on_loop_thread.append(threading.get_ident() == loop_thread[0])
        released.append(release.wait(10))
        release.clear()

    r.status_hook = blocking_status

    async def releaser(stop: asyncio.Event) -> None:
        while not stop.is_set():
            release.set()
            await asyncio.sleep(0.005)

    async def go() -> dict[str, Any]:
        loop_thread.append(threading.get_ident())
        stop = asyncio.Event()
        task = asyncio.create_task(releaser(stop))
        event = await anext(_trigger(r, h).run())
        stop.set()
        await task
        return event.payload

    payload = asyncio.run(go())
    assert payload["status"]["state"] == "SUCCEEDED"
    assert released and all(released)
    assert on_loop_thread and not any(on_loop_thread)


def test_cleanup_never_cancels() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    t = _trigger(r, h)
    asyncio.run(t.cleanup())
    assert r.count("cancel") == 0
    assert r._state(h) == AppState.RUNNING


def test_cancelling_a_running_trigger_does_not_cancel_the_app() -> None:
    """Triggerer shutdown/redistribution cancels the run() coroutine: the app must survive."""
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])

    async def go() -> None:
        t = _trigger(r, h)
        task = asyncio.ensure_future(anext(t.run()))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await t.cleanup()

    asyncio.run(go())
    assert r.count("cancel") == 0


def test_on_kill_cancels_the_app() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    asyncio.run(_trigger(r, h).on_kill())
    assert ("cancel", h) in r.calls
    assert r._state(h) == AppState.CANCELLED
    assert r.closed == 1


def test_on_kill_respects_cancel_on_kill_false() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    asyncio.run(_trigger(r, h, cancel_on_kill=False).on_kill())
    assert r.count("cancel") == 0


def test_deadline_event_fires_even_if_cancel_fails() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])

    def broken_cancel(handle: str) -> None:
        raise ConnectionError("scheduler unreachable")

    r.cancel = broken_cancel  # type: ignore[method-assign]
    payload = _first_event(_trigger(r, h, timeout_at=time.time() - 1))
    assert payload["event"] == "timeout"
