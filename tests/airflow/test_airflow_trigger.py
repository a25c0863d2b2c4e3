"""TorchXTrigger unit tests: serialization, a non-blocking run(), cleanup/on_kill and ownership,
events (real Runners over the shared fake scheduler)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import pytest
from airflow_versions import import_string
from support.airflow_fakes import Cluster

from torchx_airflow._runtime import status_payload
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_airflow.trigger import TorchXTrigger, TriggerEnd, read_event
from torchx_core.runner.lifecycle import Observation, Phase
from torchx_core.specs import AppState, AppStatus

OWNER = "airflow:dag/task/run/-1#try=1"


def _trigger(cluster: Cluster, handle: str, **kwargs: Any) -> TorchXTrigger:
    kwargs.setdefault("poll_interval", 0.01)
    return TorchXTrigger(app_handle=handle, runner_factory=cluster.factory, **kwargs)


def _first_event(trigger: TorchXTrigger, timeout: float = 30) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        gen = trigger.run()
        event = await asyncio.wait_for(anext(gen), timeout)
        with pytest.raises(StopAsyncIteration):
            await anext(gen)  # exactly one event
        return event.payload

    return asyncio.run(go())


def _after_reads(cluster: Cluster, handle: str, reads: int, state: AppState) -> None:
    left = {"n": reads}

    def count() -> None:
        left["n"] -= 1
        if left["n"] == 0:
            cluster.set_state(handle, state)

    cluster.table.on_describe = count


def test_serialize_round_trip_rebuilds_an_equal_trigger() -> None:
    t = TorchXTrigger(
        app_handle="local_cwd://torchx/a-1",
        poll_interval=2.5,
        unknown_state_timeout=7,
        cancel_on_kill=False,
        timeout_at=1234.5,
        owner=OWNER,
        torchx_conn_id="my_cluster",
    )
    classpath, kwargs = t.serialize()
    assert classpath == "torchx_airflow.trigger.TorchXTrigger"
    kwargs = json.loads(json.dumps(kwargs))  # plain JSON
    again = import_string(classpath)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert kwargs == {
        "app_handle": "local_cwd://torchx/a-1",
        "poll_interval": 2.5,
        "unknown_state_timeout": 7.0,
        "cancel_on_kill": False,
        "timeout_at": 1234.5,
        "owner": OWNER,
        "torchx_conn_id": "my_cluster",
    }


def test_bad_arguments_are_all_reported_at_once() -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXTrigger(app_handle="nohandle", poll_interval=0, unknown_state_timeout=-1, owner="")
    msg = str(ei.value)
    for needle in ("nohandle", "poll_interval", "unknown_state_timeout", "owner"):
        assert needle in msg
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, True, "soon"])
def test_unknown_state_timeout_is_refused_as_the_operator_refuses_it(value: object) -> None:
    # issue 32: nan was accepted here while TorchXOperator refused it
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXTrigger(app_handle="fake://s/a", unknown_state_timeout=value)  # type: ignore[arg-type]
    assert "unknown_state_timeout must be a finite number of seconds >= 0" in str(ei.value)


def _state(payload: dict[str, Any]) -> str:
    """The app state an "observed" event carries."""
    obs = Observation.from_json(payload["observation"])
    assert obs.status is not None and not obs.expired
    return obs.status.state.name


def test_success_event_carries_the_status(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.PENDING)
    _after_reads(cluster, h, 3, AppState.SUCCEEDED)
    closed = cluster.table.closed
    payload = _first_event(_trigger(cluster, h))
    assert payload["event"] == "observed" and payload["app_handle"] == h
    assert _state(payload) == "SUCCEEDED"
    assert cluster.job(h).cancelled == 0
    assert cluster.table.closed == closed + 1  # the trigger's Runner was closed


def test_failed_and_vanished_events(cluster: Cluster) -> None:
    failed = cluster.add("a", AppState.RUNNING)
    _after_reads(cluster, failed, 2, AppState.FAILED)
    assert _state(_first_event(_trigger(cluster, failed))) == "FAILED"
    payload = _first_event(_trigger(cluster, "fake://test/never-existed", unknown_state_timeout=0))
    obs = Observation.from_json(payload["observation"])
    assert payload["event"] == "observed" and obs.phase is Phase.VANISHED and obs.expired
    assert obs.status is None and "is gone" in payload["message"]


def test_unreadable_status_is_waited_for_within_the_grace(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    errors = [ConnectionError("scheduler unreachable")] * 2

    def flaky() -> None:
        cluster.table._describe_error = errors.pop() if errors else None
        if not errors:
            cluster.set_state(h, AppState.SUCCEEDED)

    cluster.table.on_describe = flaky
    payload = _first_event(_trigger(cluster, h, unknown_state_timeout=3600))
    assert payload["event"] == "observed" and _state(payload) == "SUCCEEDED"


@pytest.mark.parametrize("cause", ["unknown", "unreadable"])
def test_unknown_past_grace_fires_unknown_timeout(cluster: Cluster, cause: str) -> None:
    h = cluster.add("a", AppState.UNKNOWN if cause == "unknown" else AppState.RUNNING)
    if cause == "unreadable":
        cluster.table.describe_error = ConnectionError("scheduler unreachable")
    payload = _first_event(_trigger(cluster, h, unknown_state_timeout=0))
    obs = Observation.from_json(payload["observation"])
    assert payload["event"] == "observed" and obs.phase is Phase.UNKNOWN and obs.expired
    assert "stayed UNKNOWN" in payload["message"]
    assert cluster.job(h).cancelled == 0  # the task decides (execute_complete), not the trigger


def test_deadline_cancels_the_owned_app_and_fires_timeout(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    cluster.job(h).owner = OWNER
    payload = _first_event(_trigger(cluster, h, timeout_at=time.time() - 1, owner=OWNER))
    assert payload["event"] == "timeout" and "was cancelled" in payload["message"]
    assert cluster.state(h) == AppState.CANCELLED


def test_deadline_without_cancel_on_kill_leaves_the_app(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    payload = _first_event(_trigger(cluster, h, timeout_at=time.time() - 1, cancel_on_kill=False))
    assert payload["event"] == "timeout" and "cancelled" not in payload["message"]
    assert cluster.job(h).cancelled == 0


def test_deadline_event_fires_even_if_cancel_fails(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    cluster.table.jobs.pop(h.rsplit("/", 1)[1])  # cancelling it now raises (unknown app id)
    payload = _first_event(_trigger(cluster, h, timeout_at=time.time() - 1))
    assert payload["event"] == "timeout"


def test_run_never_blocks_the_event_loop(cluster: Cluster) -> None:
    """Each status read blocks until a coroutine on the loop releases it.

    If ``run()`` called the Runner on the loop thread, the releasing coroutine could not run
    and every status read would give up (recorded as ``False``).
    """
    h = cluster.add("a", AppState.RUNNING)
    release = threading.Event()
    released: list[bool] = []
    on_loop_thread: list[bool] = []
    loop_thread: list[int] = []

    def blocking_status() -> None:
        on_loop_thread.append(threading.get_ident() == loop_thread[0])
        released.append(release.wait(10))
        release.clear()
        if len(released) == 3:
            cluster.set_state(h, AppState.SUCCEEDED)

    cluster.table.on_describe = blocking_status

    async def releaser(stop: asyncio.Event) -> None:
        while not stop.is_set():
            release.set()
            await asyncio.sleep(0.005)

    async def go() -> dict[str, Any]:
        loop_thread.append(threading.get_ident())
        stop = asyncio.Event()
        task = asyncio.create_task(releaser(stop))
        event = await anext(_trigger(cluster, h).run())
        stop.set()
        await task
        return event.payload

    payload = asyncio.run(go())
    assert _state(payload) == "SUCCEEDED"
    assert len(released) >= 3 and all(released)
    assert not any(on_loop_thread)


def test_cleanup_never_cancels(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    asyncio.run(_trigger(cluster, h).cleanup())
    assert cluster.job(h).cancelled == 0 and cluster.state(h) == AppState.RUNNING


def test_cancelling_a_running_trigger_does_not_cancel_the_app(cluster: Cluster) -> None:
    """Triggerer shutdown/redistribution cancels the run() coroutine: the app must survive."""
    h = cluster.add("a", AppState.RUNNING)
    polled = threading.Event()
    cluster.table.on_describe = polled.set

    async def go() -> None:
        t = _trigger(cluster, h)
        task = asyncio.ensure_future(anext(t.run()))
        # polling started: the trigger read the app's status at least once
        assert await asyncio.to_thread(polled.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await t.cleanup()

    asyncio.run(go())
    assert cluster.job(h).cancelled == 0 and cluster.state(h) == AppState.RUNNING


def test_on_kill_cancels_the_app_its_try_owns(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    cluster.job(h).owner = OWNER
    asyncio.run(_trigger(cluster, h, owner=OWNER).on_kill())
    assert cluster.state(h) == AppState.CANCELLED
    assert cluster.table.closed >= 1


def test_on_kill_leaves_an_app_a_newer_try_adopted(cluster: Cluster) -> None:
    """Fault 1: after a clear, the new try owns the app; the old trigger's on_kill must not
    cancel it."""
    h = cluster.add("a", AppState.RUNNING)
    cluster.job(h).owner = "airflow:dag/task/run/-1#try=2"
    asyncio.run(_trigger(cluster, h, owner=OWNER).on_kill())
    assert cluster.state(h) == AppState.RUNNING and cluster.job(h).cancelled == 0


def test_on_kill_without_an_owner_cancels(cluster: Cluster) -> None:
    """A trigger serialized before owners existed cancels unconditionally (as it did)."""
    h = cluster.add("a", AppState.RUNNING)
    cluster.job(h).owner = "airflow:dag/task/run/-1#try=2"
    asyncio.run(_trigger(cluster, h).on_kill())
    assert cluster.state(h) == AppState.CANCELLED


def test_on_kill_respects_cancel_on_kill_false(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    asyncio.run(_trigger(cluster, h, cancel_on_kill=False, owner=OWNER).on_kill())
    assert cluster.job(h).cancelled == 0


# -- events: this version's and the version before's (an upgrade while a task is deferred) --------

H = "local_cwd://torchx/a-1"


def _legacy(kind: str, status: AppStatus | None) -> dict[str, Any]:
    """An event as the trigger of the version before fired it (no ``observation``; the status
    as ``status_payload`` wrote it, and none for an error)."""
    event: dict[str, Any] = {
        "event": kind,
        "app_handle": H,
        "status": status_payload(H, status) if kind != "error" else None,
        "message": "m",
    }
    if kind == "error":
        event["permanent"] = False
    return event


FAILED = AppStatus(AppState.FAILED, msg="boom", structured_error_msg='{"message": "x"}')
RUNNING = AppStatus(AppState.RUNNING, num_restarts=2)


@pytest.mark.parametrize(
    ("kind", "status", "end", "phase", "expired"),
    [
        ("terminal", FAILED, TriggerEnd.OBSERVED, Phase.FAILED, False),
        ("vanished", None, TriggerEnd.OBSERVED, Phase.VANISHED, True),
        ("unknown_timeout", RUNNING, TriggerEnd.OBSERVED, Phase.UNKNOWN, True),
        ("unknown_timeout", None, TriggerEnd.OBSERVED, Phase.UNKNOWN, True),
        ("timeout", RUNNING, TriggerEnd.TIMEOUT, Phase.WAITING, False),
        ("timeout", None, TriggerEnd.TIMEOUT, None, None),
        ("error", None, TriggerEnd.ERROR, None, None),
    ],
)
def test_an_event_of_the_version_before_is_read_as_it_was_meant(
    kind: str,
    status: AppStatus | None,
    end: TriggerEnd,
    phase: Phase | None,
    expired: bool | None,
) -> None:
    got_end, obs = read_event(_legacy(kind, status))
    assert got_end is end
    if phase is None:
        assert obs is None
        return
    assert obs is not None and (obs.phase, obs.expired) == (phase, expired)
    if status is None:
        assert obs.status is None
    else:
        assert obs.status is not None and obs.status.to_json() == status.to_json()


def test_an_event_of_this_version_round_trips() -> None:
    obs = Observation(Phase.FAILED, FAILED, False)
    event = {"event": "observed", "app_handle": H, "message": "", "observation": obs.to_json()}
    end, read = read_event(event)
    assert end is TriggerEnd.OBSERVED and read is not None
    assert read.to_json() == obs.to_json()
    assert read_event({**event, "event": "error", "observation": None}) == (TriggerEnd.ERROR, None)


@pytest.mark.parametrize(
    "event",
    [
        {"event": "exploded", "app_handle": H, "observation": None},
        {"event": "terminal", "app_handle": H, "observation": None},  # old kind, new shape
        {"event": "observed", "app_handle": H, "status": None},  # new kind, old shape
        {"event": ["observed"], "app_handle": H, "observation": None},
        {"app_handle": H},
    ],
)
def test_an_event_of_neither_version_is_refused_with_what_is_valid(event: dict[str, Any]) -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        read_event(event)
    message = str(ei.value)
    assert repr(event.get("event")) in message
    assert "observed, timeout, error" in message and "terminal, vanished" in message


# -- issue 35 item 7: the app's output in the task's log while deferred -----------------------


def test_log_positions_round_trip_and_bad_ones_are_refused() -> None:
    t = TorchXTrigger(app_handle="local_cwd://torchx/a-1", log_positions={"r/0": 3})
    classpath, kwargs = t.serialize()
    assert kwargs["log_positions"] == {"r/0": 3}
    assert import_string(classpath)(**json.loads(json.dumps(kwargs))).log_positions == {"r/0": 3}
    with pytest.raises(InvalidTaskArgumentError, match="log_positions must map 'role/k'"):
        TorchXTrigger(app_handle="local_cwd://torchx/a-1", log_positions={"r/0": "3"})


def _app_lines(events: list[dict[str, Any]]) -> list[str]:
    """The replica lines among the trigger's log events (structlog, as in the triggerer)."""
    lines = [str(e["event"]) % tuple(e.get("positional_args", ())) for e in list(events)]
    return [line for line in lines if line.startswith("[r/0]")]


def test_a_streaming_trigger_logs_the_lines_after_the_positions_while_waiting(
    cluster: Cluster,
) -> None:
    """Lines already given on the worker are skipped; the others reach the trigger's log while
    the app runs (before it ends), and the event says how far the log got."""
    from structlog.testing import capture_logs

    h = cluster.add("a", AppState.RUNNING)
    app_id = h.rsplit("/", 1)[1]
    given = len(cluster.job(h).logs.get(("r", 0), []))
    cluster.table.append_log(app_id, "r", 0, "new-1", "new-2")
    trigger = _trigger(cluster, h, log_positions={"r/0": given})
    if isinstance(trigger.log, logging.Logger):  # Airflow < 3.1: not structlog, not captured here
        pytest.skip("this capture reads structlog events; this Airflow's trigger logs to stdlib")
    seen_while_running: list[list[str]] = []
    with capture_logs() as events:

        def end_once_logged() -> None:
            if "[r/0] new-2" in _app_lines(events) and not seen_while_running:
                seen_while_running.append(_app_lines(events))
                cluster.table.append_log(app_id, "r", 0, "last")
                cluster.set_state(h, AppState.SUCCEEDED)

        cluster.table.on_describe = end_once_logged
        payload = _first_event(trigger)
    assert seen_while_running == [["[r/0] new-1", "[r/0] new-2"]]
    assert _app_lines(events) == ["[r/0] new-1", "[r/0] new-2", "[r/0] last"]
    assert payload["log_positions"] == {"r/0": given + 3} and _state(payload) == "SUCCEEDED"


def test_a_trigger_without_log_positions_logs_no_app_output(cluster: Cluster) -> None:
    from structlog.testing import capture_logs

    h = cluster.add("a", AppState.RUNNING)
    cluster.table.append_log(h.rsplit("/", 1)[1], "r", 0, "line")
    _after_reads(cluster, h, 2, AppState.SUCCEEDED)
    with capture_logs() as events:
        payload = _first_event(_trigger(cluster, h))
    assert _app_lines(events) == [] and "log_positions" not in payload
