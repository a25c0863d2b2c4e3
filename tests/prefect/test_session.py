"""Unit tests of one task attempt (``_Session``): reattach, persist, outcomes and the abort policy.

A stateful fake Runner and an in-memory handle store stand in for the scheduler and Prefect.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Self

import pytest
from prefect_fakes import FakeRunner, echo_app

from torchx_core.specs import AppState
from torchx_prefect._launch import validate_args
from torchx_prefect._prefect_io import TaskIdentity
from torchx_prefect.errors import AppFailedError
from torchx_prefect.states import Outcome
from torchx_prefect.tasks import _Session

LOG = logging.getLogger("test-session")


class MemoryStore:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def put(self, key: str, handle: str) -> bool:
        self.data[key] = handle
        return True


class BrokenStore(MemoryStore):
    def get(self, key: str) -> str | None:
        raise ConnectionError("prefect api down")

    def put(self, key: str, handle: str) -> bool:
        raise ConnectionError("prefect api down")


def identity(run_count: int = 1, retries: int = 0) -> TaskIdentity:
    return TaskIdentity(None, None, "run_app-abc", "0", run_count, retries)


def session(runner: FakeRunner, store: Any = None, run_count: int = 1, retries: int = 0,
            **kw: Any) -> _Session:
    args: dict[str, Any] = {
        "app_args": None, "scheduler": "local_cwd", "cfg": None, "workspace": None,
        "poll_interval": 0.01, "unknown_state_timeout": 0.0, "stream_logs": False,
        "log_tail_lines": 3, "create_artifacts": False, "reattach": True, "cancel_timeout": 5.0,
    }
    app = kw.pop("app", None) or echo_app()
    args.update(kw)
    spec = validate_args(app, **args)  # type: ignore[arg-type]
    return _Session(runner, spec, identity(run_count, retries), LOG,
                    store if store is not None else MemoryStore())  # type: ignore[arg-type]


def drive(s: _Session) -> Any:
    s.start()
    while (outcome := s.poll_once()) is Outcome.WAIT:
        pass
    return s.finish(outcome)


def test_success_returns_an_app_result_and_persists_the_handle() -> None:
    runner, store = FakeRunner([AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED]), MemoryStore()
    s = session(runner, store)
    result = drive(s)
    assert result.state == AppState.SUCCEEDED and result.app_handle == s.handle
    assert store.data == {s.identity.label_key: s.handle}
    assert s.app is not None and s.app.name == s.app_name != "echo"


def test_failure_raises_with_the_log_tail() -> None:
    runner = FakeRunner([AppState.RUNNING, AppState.FAILED])
    runner.logs = {("worker", 0): ["a\n", "b\n", "c\n", "d\n"]}
    with pytest.raises(AppFailedError) as info:
        drive(session(runner))
    assert info.value.log_tail == ["[worker/0] b", "[worker/0] c", "[worker/0] d"]


def test_cancelled_app_returns_a_cancelled_state() -> None:
    state = drive(session(FakeRunner([AppState.RUNNING, AppState.CANCELLED])))
    assert state.is_cancelled()


def test_a_second_attempt_reattaches_through_the_store() -> None:
    runner, store = FakeRunner([AppState.RUNNING]), MemoryStore()
    first = session(runner, store, run_count=1, retries=1)
    handle = first.start()
    second = session(runner, store, run_count=2, retries=1)
    assert second.start() == handle and second.reattached
    assert [c for c in runner.calls if c[0] == "run"] == [("run", handle)]


def test_reattach_by_name_when_the_store_is_unreachable() -> None:
    runner = FakeRunner([AppState.RUNNING])
    handle = session(runner, BrokenStore()).start()
    again = session(runner, BrokenStore(), run_count=2, retries=1)
    assert again.start() == handle and again.reattached


def test_an_ended_app_is_not_reattached() -> None:
    runner, store = FakeRunner([AppState.FAILED]), MemoryStore()
    first = session(runner, store)
    h1 = first.start()
    h2 = session(runner, store, run_count=2, retries=1).start()
    assert h1 != h2


def test_reattach_off_always_submits() -> None:
    runner, store = FakeRunner([AppState.RUNNING]), MemoryStore()
    h1 = session(runner, store, reattach=False).start()
    h2 = session(runner, store, reattach=False).start()
    assert h1 != h2


def test_component_apps_are_materialized_and_renamed() -> None:
    runner = FakeRunner([AppState.SUCCEEDED])
    s = session(runner, app="utils.echo", app_args=["--msg", "hi"])
    s.start()
    assert s.app is not None and s.app.name.startswith("echo-")


def test_vanished_app_fails_after_the_grace() -> None:
    from torchx_prefect.errors import AppVanishedError

    runner = FakeRunner([AppState.RUNNING])
    s = session(runner)
    s.start()
    runner.apps.clear()
    with pytest.raises(AppVanishedError):
        s.poll_once()


@pytest.mark.parametrize(
    ("exc", "run_count", "retries", "cancelled"),
    [
        (asyncio.CancelledError(), 1, 3, True),     # task/flow cancelled
        (KeyboardInterrupt(), 1, 3, True),          # crash / termination
        (TimeoutError("task timed out"), 1, 3, True),
        (ConnectionError("blip"), 1, 1, False),      # a retry will reattach
        (ConnectionError("blip"), 2, 1, True),       # last attempt: nobody will watch the app
        (ConnectionError("blip"), 1, 0, True),
    ],
)
def test_abort_policy(exc: BaseException, run_count: int, retries: int, cancelled: bool) -> None:
    runner = FakeRunner([AppState.RUNNING])
    s = session(runner, run_count=run_count, retries=retries)
    handle = s.start()
    s.abort(exc)
    assert (runner.peek(handle) == AppState.CANCELLED) is cancelled


def test_abort_leaves_ended_apps_alone() -> None:
    runner = FakeRunner([AppState.SUCCEEDED])
    s = session(runner)
    s.start()
    s.poll_once()
    s.abort(KeyboardInterrupt())
    assert not [c for c in runner.calls if c[0] == "cancel"]


def test_abort_before_submission_does_nothing() -> None:
    runner = FakeRunner()
    session(runner).abort(KeyboardInterrupt())
    assert runner.calls == []


def test_identity_digest_is_stable_across_attempts_and_distinct_per_call() -> None:
    import uuid

    flow_run = uuid.uuid4()
    first = TaskIdentity(flow_run, uuid.uuid4(), "run_app-abc", "0", 1, 2)
    retry = TaskIdentity(flow_run, first.task_run_id, "run_app-abc", "0", 2, 2)
    other_call = TaskIdentity(flow_run, uuid.uuid4(), "run_app-abc", "1", 1, 2)
    assert first.digest == retry.digest != other_call.digest
    assert first.label_key == "torchx.app." + first.digest
    assert first.retries_left and retry.retries_left
    assert not TaskIdentity(flow_run, None, "k", "0", 3, 2).retries_left


def test_handles_are_read_from_torchx_labels_only() -> None:
    from torchx_prefect._prefect_io import app_handles_from_labels

    labels = {"prefect.flow.id": "x", "torchx.app.a": "local_cwd://s/a", "torchx.app.b": ""}
    assert app_handles_from_labels(labels) == {"torchx.app.a": "local_cwd://s/a"}
    assert app_handles_from_labels(None) == {}


def test_store_without_a_flow_run_is_a_no_op() -> None:
    from torchx_prefect._prefect_io import FlowRunHandleStore

    store = FlowRunHandleStore(None)
    assert store.put("torchx.app.x", "h") is False
    assert store.get("torchx.app.x") is None and store.handles() == {}


def test_abort_during_a_submission_in_a_worker_thread_cancels_the_app() -> None:
    """Async task: the attempt is cancelled while runner.run is still running in a thread."""
    import threading

    entered, release = threading.Event(), threading.Event()

    class SlowRun(FakeRunner):
        def run(self, app: Any, scheduler: str, cfg: Any = None, workspace: Any = None) -> str:
            handle = super().run(app, scheduler, cfg, workspace)
            entered.set()
            release.wait(5)
            return handle

    runner = SlowRun([AppState.RUNNING])
    s = session(runner)
    worker = threading.Thread(target=s.start)
    worker.start()
    assert entered.wait(5)
    threading.Timer(0.1, release.set).start()
    s.abort(asyncio.CancelledError())
    worker.join(5)
    (handle,) = runner.apps
    assert runner.peek(handle) == AppState.CANCELLED


def test_abort_after_an_interrupted_submission_finds_the_app_by_name() -> None:
    """Sync task: a timeout/termination exception lands inside runner.run after the app exists."""

    class Interrupted(FakeRunner):
        def run(self, app: Any, scheduler: str, cfg: Any = None, workspace: Any = None) -> str:
            super().run(app, scheduler, cfg, workspace)
            raise KeyboardInterrupt  # stands for TerminationSignal / a sync timeout

    runner = Interrupted([AppState.RUNNING])
    s = session(runner)
    with pytest.raises(KeyboardInterrupt):
        s.start()
    s.abort(KeyboardInterrupt())
    (handle,) = runner.apps
    assert s.handle == handle and runner.peek(handle) == AppState.CANCELLED


def test_a_start_that_runs_after_abort_submits_nothing() -> None:
    runner = FakeRunner([AppState.RUNNING])
    s = session(runner)
    s.abort(asyncio.CancelledError())
    with pytest.raises(RuntimeError, match="before"):
        s.start()
    assert runner.apps == {}


class FakeLabelsClient:
    """A stand-in for Prefect's sync client holding one flow run's labels.

    ``script`` lists what each ``update_flow_run_labels`` call does: ``"ok"`` merges, ``"lost"``
    drops the update (a concurrent writer's read-modify-write overwrote it), ``"busy"`` raises
    (the server's database refused the write).
    """

    def __init__(self, script: list[str]) -> None:
        self.labels: dict[str, str] = {}
        self.script = script
        self.updates = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update_flow_run_labels(self, flow_run_id: Any, labels: dict[str, str]) -> None:
        action = self.script[self.updates] if self.updates < len(self.script) else "ok"
        self.updates += 1
        if action == "busy":
            raise RuntimeError("database is locked")
        if action == "ok":
            self.labels.update(labels)

    def read_flow_run(self, flow_run_id: Any) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(labels=dict(self.labels))


@pytest.mark.parametrize("script", [["busy", "ok"], ["lost", "busy", "ok"], ["ok"]])
def test_store_put_retries_lost_and_refused_writes(script: list[str]) -> None:
    import uuid

    from torchx_prefect._prefect_io import FlowRunHandleStore

    client = FakeLabelsClient(script)
    store = FlowRunHandleStore(uuid.uuid4(), client_factory=lambda: client)
    assert store.put("torchx.app.x", "local_cwd://s/a", backoff=0.0) is True
    assert store.get("torchx.app.x") == "local_cwd://s/a"
    assert client.updates == len(script)


def test_store_put_gives_up_after_its_attempts(caplog: pytest.LogCaptureFixture) -> None:
    import uuid

    from torchx_prefect._prefect_io import FlowRunHandleStore

    client = FakeLabelsClient(["busy"] * 3)
    store = FlowRunHandleStore(uuid.uuid4(), client_factory=lambda: client)
    with caplog.at_level(logging.WARNING):
        assert store.put("torchx.app.x", "h", attempts=3, backoff=0.0) is False
    assert client.updates == 3 and store.handles() == {}
    assert "after 3 attempts: database is locked" in caplog.text


def test_a_submission_that_outlasts_the_aborts_wait_cancels_its_app() -> None:
    """Async task: the attempt is cancelled, abort() gives up waiting for a slow runner.run and
    cannot find the app by name yet; when the submission finally returns, the app is cancelled."""
    import threading

    entered, release = threading.Event(), threading.Event()

    class VerySlowRun(FakeRunner):
        def run(self, app: Any, scheduler: str, cfg: Any = None, workspace: Any = None) -> str:
            entered.set()
            release.wait(5)  # the app appears only when the submission returns
            return super().run(app, scheduler, cfg, workspace)

    runner = VerySlowRun([AppState.RUNNING])
    s = session(runner, cancel_timeout=0.05)
    worker = threading.Thread(target=s.start)
    worker.start()
    assert entered.wait(5)
    s.abort(asyncio.CancelledError())
    assert runner.apps == {} and s.handle is None  # abort() returned without finding it
    release.set()
    worker.join(5)
    (handle,) = runner.apps
    assert runner.peek(handle) == AppState.CANCELLED

