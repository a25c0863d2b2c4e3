"""Unit tests of one task attempt (``_session.Session``) over the shared lifecycle: attach,
persist, outcomes, identity, ownership, the abort policy and its decision table.

A real :class:`~torchx_core.runner.Runner` over the shared fake scheduler
(``tests/support/fake_scheduler.py``) stands in for the cluster; an in-memory store for the
flow-run labels.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is 3.11+

import pytest
from support.fake_scheduler import JobTable, make_runner

from torchx_core.specs import AppDef, AppState, Role
from torchx_prefect._launch import call_digest, validate_args
from torchx_prefect._prefect_io import TaskIdentity, flow_run_owner_prefix
from torchx_prefect._session import (
    ABORT_ACTIONS,
    AbortAction,
    Session,
    SessionState,
    abort_action,
    leaves_for_retry,
)
from torchx_prefect.errors import AppFailedError, AppVanishedError, InvalidTaskArgumentError
from torchx_prefect.states import Outcome, outcome_for

LOG = logging.getLogger("test-session")


class MemoryStore:
    """The flow run's labels (and its run_count) in memory."""

    def __init__(self, run_count: int | None = 1) -> None:
        self.data: dict[str, str] = {}
        self.run_count = run_count

    def read(self) -> tuple[dict[str, str], int | None]:
        return dict(self.data), self.run_count

    def put(self, key: str, handle: str) -> bool:
        self.data[key] = handle
        return True


class BrokenStore(MemoryStore):
    def read(self) -> tuple[dict[str, str], int | None]:
        raise ConnectionError("prefect api down")

    def put(self, key: str, handle: str) -> bool:
        raise ConnectionError("prefect api down")


def echo_app(replicas: int = 1) -> AppDef:
    return AppDef(
        name="echo",
        roles=[
            Role(name="worker", image="/tmp", entrypoint="echo", args=["hi"], num_replicas=replicas)
        ],
    )


def identity(
    run_count: int = 1,
    retries: int = 0,
    *,
    occurrence: int = 0,
    task_run: str = "tr-1",
    flow_run_count: int = 1,
) -> TaskIdentity:
    return TaskIdentity(
        "fr-1",
        "torchx-run-app",
        "call",
        occurrence,
        task_run,
        None,
        flow_run_count,
        run_count,
        retries,
    )


@pytest.fixture
def table() -> JobTable:
    return JobTable()


def session(
    table: JobTable, store: Any = None, ident: TaskIdentity | None = None, **kw: Any
) -> Session:
    args: dict[str, Any] = {
        "app_args": None,
        "scheduler": "fake",
        "cfg": None,
        "workspace": None,
        "poll_interval": 0.01,
        "unknown_state_timeout": 0.0,
        "stream_logs": False,
        "log_tail_lines": 3,
        "create_artifacts": False,
        "reattach": True,
        "cancel_timeout": 5.0,
    }
    app = kw.pop("app", None) or echo_app()
    args.update(kw)
    spec = validate_args(app, **args)
    return Session(
        make_runner(table),
        spec,
        ident or identity(),
        LOG,
        store if store is not None else MemoryStore(),
    )


def drive(s: Session) -> Any:
    s.start()
    while outcome_for(obs := s.poll_once()) is Outcome.WAIT:
        pass
    return s.end_task(obs)


def running(table: JobTable) -> None:
    """Jobs stay where the test puts them; new ones start RUNNING."""
    table.hold = True


def start_running(s: Session, table: JobTable) -> str:
    handle = s.start()
    table.set_state(handle.rsplit("/", 1)[1], AppState.RUNNING)
    return handle


def app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


# -- outcomes ------------------------------------------------------------------------------------


def test_success_returns_an_app_result_and_persists_the_handle(table: JobTable) -> None:
    table.steps = 3
    store = MemoryStore()
    s = session(table, store)
    result = drive(s)
    assert result.state == AppState.SUCCEEDED and result.app_handle == s.handle
    assert not result.reattached
    assert store.data == {s.identity.label_key: s.handle}
    (job,) = table.jobs.values()
    assert job.app.name == s.app_name and s.app_name.startswith("echo-")
    assert job.owner == "prefect:fr-1#run=1/torchx-run-app/tr-1#try=1"


def test_failure_raises_with_a_tail_over_every_replica_and_the_error_once(table: JobTable) -> None:
    running(table)
    s = session(table, app=echo_app(replicas=2))
    handle = start_running(s, table)
    table.append_log(app_id(handle), "worker", 0, "a", "b")
    table.set_replica(app_id(handle), "worker", 0, AppState.CANCELLED)
    table.set_replica(app_id(handle), "worker", 1, AppState.FAILED, error="boom: exit 3")
    table.jobs[app_id(handle)].error = "boom: exit 3"
    table.set_state(app_id(handle), AppState.FAILED)
    with pytest.raises(AppFailedError) as info:
        s.end_task(s.poll_once())
    err = info.value
    # the failed replica first, then the others (cancelled because of it); 3 lines each
    assert err.log_tail == [
        "[worker/1] worker 1 line 0",
        "[worker/1] worker 1 line 1",
        "[worker/1] worker 1 line 2",
        "[worker/0] worker 0 line 2",
        "[worker/0] a",
        "[worker/0] b",
    ]
    assert str(err).count("boom: exit 3") == 1


def test_cancelled_app_returns_a_cancelled_state(table: JobTable) -> None:
    table.final = AppState.CANCELLED
    assert drive(session(table)).is_cancelled()


def test_vanished_app_fails_after_the_grace(table: JobTable) -> None:
    running(table)
    s = session(table)
    handle = start_running(s, table)
    table.vanish(app_id(handle))
    obs = s.poll_once()
    assert outcome_for(obs) is Outcome.FAIL
    with pytest.raises(AppVanishedError):
        s.end_task(obs)


def test_component_apps_are_materialized_and_renamed(table: JobTable) -> None:
    s = session(table, app="utils.echo", app_args=["--msg", "hi"])
    s.start()
    (job,) = table.jobs.values()
    assert job.app.name == s.app_name and s.app_name.startswith("echo-")
    assert job.request.roles[0][3][-1] == "hi"


# -- reattach and identity -----------------------------------------------------------------------


def test_a_second_attempt_reattaches_through_the_store_and_takes_ownership(table: JobTable) -> None:
    running(table)
    store = MemoryStore()
    handle = start_running(session(table, store, identity(1, retries=1)), table)
    second = session(table, store, identity(2, retries=1))
    assert second.start() == handle and second.attachment.how == "reattached"
    assert len(table.jobs) == 1
    assert table.jobs[app_id(handle)].owner.endswith("#try=2")


def test_reattach_by_name_when_the_store_is_unreachable(table: JobTable) -> None:
    running(table)
    handle = start_running(session(table, BrokenStore()), table)
    again = session(table, BrokenStore(), identity(2, retries=1))
    assert again.start() == handle and again.attachment.how == "reattached"


def test_a_rerun_of_the_flow_run_reattaches_and_distinct_calls_get_distinct_apps(
    table: JobTable,
) -> None:
    """Fault 2: a new execution (new task runs, new run_count) with the same calls."""
    running(table)
    first = [
        start_running(
            session(table, MemoryStore(1), identity(occurrence=i, task_run=f"a{i}")), table
        )
        for i in range(2)
    ]
    assert len(set(first)) == 2  # two calls with one AppDef: two apps
    rerun = [
        session(table, MemoryStore(2), identity(occurrence=i, task_run=f"b{i}")) for i in range(2)
    ]
    assert [s.start() for s in rerun] == first
    assert len(table.jobs) == 2
    assert [table.jobs[app_id(h)].owner for h in first] == [
        "prefect:fr-1#run=2/torchx-run-app/b0#try=1",
        "prefect:fr-1#run=2/torchx-run-app/b1#try=1",
    ]


def test_a_succeeded_app_is_reused_and_an_ended_one_resubmitted(table: JobTable) -> None:
    store = MemoryStore()
    done = drive(session(table, store))
    again = session(table, store, identity(2, retries=1))
    assert again.start() == done.app_handle and again.attachment.how == "reused"
    table.set_state(app_id(done.app_handle), AppState.FAILED)
    third = session(table, store, identity(3, retries=2))
    assert third.start() != done.app_handle and third.attachment.how == "submitted"


def test_reattach_off_always_submits(table: JobTable) -> None:
    running(table)
    h1 = start_running(session(table, reattach=False), table)
    h2 = start_running(session(table, reattach=False), table)
    assert h1 != h2


def test_the_call_digest_separates_different_calls() -> None:
    def spec(app: Any, **kw: Any) -> Any:
        return validate_args(
            app,
            kw.pop("args", None),
            scheduler=kw.pop("scheduler", "local_cwd"),
            cfg=kw.pop("cfg", None),
            poll_interval=5,
            unknown_state_timeout=0,
        )

    base = call_digest(spec(echo_app()))
    assert base == call_digest(spec(echo_app()))  # equal calls, any process
    assert base != call_digest(spec(echo_app(replicas=2)))
    assert base != call_digest(spec(echo_app(), scheduler="slurm"))
    assert base != call_digest(spec(echo_app(), cfg={"queue": "q"}))
    assert call_digest(spec("utils.echo", args=["--msg", "a"])) != call_digest(
        spec("utils.echo", args=["--msg", "b"])
    )


def test_identity_label_is_stable_across_attempts_and_distinct_per_occurrence() -> None:
    first, retry = identity(1, retries=2), identity(2, retries=2)
    rerun = identity(1, flow_run_count=2, task_run="other")
    assert first.label_key == retry.label_key == rerun.label_key
    assert first.label_key != identity(occurrence=1).label_key
    assert first.label_key.startswith("torchx.app.") and len(first.label_key) == 21
    assert first.retries_left and retry.retries_left
    assert not identity(3, retries=2).retries_left
    assert first.owner.startswith(flow_run_owner_prefix("fr-1", 1))
    assert not rerun.owner.startswith(flow_run_owner_prefix("fr-1", 1))


def test_occurrences_count_identical_calls_per_execution() -> None:
    from torchx_prefect._prefect_io import _Occurrences

    occ = _Occurrences()
    run1 = ("fr", 1, "t", "call")
    assert [occ.index(run1, "a"), occ.index(run1, "b"), occ.index(run1, "a")] == [0, 1, 0]
    assert occ.index(("fr", 1, "t", "other"), "c") == 0  # another call
    assert occ.index(("fr", 2, "t", "call"), "d") == 0  # a re-run counts again


# -- abort ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "run_count", "retries", "cancelled"),
    [
        (asyncio.CancelledError(), 1, 3, True),  # task/flow cancelled
        (KeyboardInterrupt(), 1, 3, True),  # crash / termination
        (TimeoutError("task timed out"), 1, 3, True),
        (ConnectionError("blip"), 1, 1, False),  # a retry will reattach
        (ConnectionError("blip"), 2, 1, True),  # last attempt: nobody will watch the app
        (ConnectionError("blip"), 1, 0, True),
    ],
)
def test_abort_policy(
    table: JobTable, exc: BaseException, run_count: int, retries: int, cancelled: bool
) -> None:
    running(table)
    s = session(table, ident=identity(run_count, retries))
    handle = start_running(s, table)
    s.abort(exc)
    assert (table.jobs[app_id(handle)].state == AppState.CANCELLED) is cancelled


class PermanentError(InvalidTaskArgumentError):
    """A permanent error (``is_permanent_error``): no retry follows it."""


@pytest.mark.parametrize(
    ("exc", "reattach", "retries_left", "leaves"),
    [
        (ConnectionError("blip"), True, True, True),  # the retry reattaches
        (ConnectionError("blip"), True, False, False),  # last attempt
        (ConnectionError("blip"), False, True, False),  # the retry would not find it
        (PermanentError("bad"), True, True, False),  # no retry follows a permanent error
        (TimeoutError("task timed out"), True, True, False),
        (asyncio.CancelledError(), True, True, False),  # a stop
        (KeyboardInterrupt(), True, True, False),
    ],
)
def test_leaves_for_retry_table(
    exc: BaseException, reattach: bool, retries_left: bool, leaves: bool
) -> None:
    assert leaves_for_retry(exc, reattach=reattach, retries_left=retries_left) is leaves


@pytest.mark.parametrize(
    ("state", "leave", "action"),
    [
        (SessionState.NEW, False, AbortAction.NOTHING),
        (SessionState.NEW, True, AbortAction.NOTHING),
        (SessionState.SUBMITTING, False, AbortAction.CANCEL_BY_NAME),
        (SessionState.SUBMITTING, True, AbortAction.LEAVE_BY_NAME),
        (SessionState.INTERRUPTED, False, AbortAction.CANCEL_BY_NAME),
        (SessionState.INTERRUPTED, True, AbortAction.LEAVE_BY_NAME),
        (SessionState.WATCHING, False, AbortAction.CANCEL),
        (SessionState.WATCHING, True, AbortAction.LEAVE),
        (SessionState.ENDED, False, AbortAction.NOTHING),
        (SessionState.ENDED, True, AbortAction.NOTHING),
    ],
)
def test_abort_action_table(state: SessionState, leave: bool, action: AbortAction) -> None:
    assert abort_action(state, leave) is action


def test_abort_actions_cover_every_state() -> None:
    assert set(ABORT_ACTIONS) == {(st, leave) for st in SessionState for leave in (False, True)}


def test_the_session_state_follows_the_app(table: JobTable) -> None:
    running(table)
    s = session(table)
    assert s.state is SessionState.NEW
    handle = start_running(s, table)
    assert s.state is SessionState.WATCHING
    table.set_state(app_id(handle), AppState.SUCCEEDED)
    s.poll_once()
    assert s.state is SessionState.ENDED


def test_a_job_session_raises_for_a_cancelled_app(table: JobTable) -> None:
    """A JobRun has no Cancelled state to end in: its finish raises AppCancelledError."""
    from torchx_prefect.errors import AppCancelledError

    table.final = AppState.CANCELLED
    s = session(table)
    s.kind = "job"
    s.start()
    while outcome_for(obs := s.poll_once()) is Outcome.WAIT:
        pass
    with pytest.raises(AppCancelledError):
        s.finish(obs)


@pytest.mark.parametrize("how", ["reattached", "reused"])
def test_a_later_attempt_logs_the_apps_lines_from_the_start_once(
    table: JobTable, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 22: a reattached or reused app's earlier lines reach the new attempt's log, once."""
    running(table)
    store = MemoryStore()
    handle = start_running(session(table, store, identity(1, retries=1)), table)
    table.append_log(app_id(handle), "worker", 0, "early 1", "early 2")
    if how == "reused":
        table.set_state(app_id(handle), AppState.SUCCEEDED)
    later = session(table, store, identity(2, retries=1), stream_logs=True)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert later.start() == handle and later.attachment.how == how
        table.set_state(app_id(handle), AppState.SUCCEEDED)
        assert drive_started(later).state == AppState.SUCCEEDED
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[worker/0]")]
    assert lines.count("[worker/0] early 1") == 1 and lines.count("[worker/0] early 2") == 1
    assert len(lines) == len(set(lines))  # one attempt never gives a line twice


def drive_started(s: Session) -> Any:
    while outcome_for(obs := s.poll_once()) is Outcome.WAIT:
        pass
    return s.end_task(obs)


def test_abort_does_not_cancel_an_app_a_newer_attempt_adopted(table: JobTable) -> None:
    running(table)
    store = MemoryStore()
    old = session(table, store, identity(1, retries=1))
    handle = start_running(old, table)
    session(table, store, identity(2, retries=1)).start()  # adopts the app
    old.abort(KeyboardInterrupt())  # the stale attempt is stopped late
    job = table.jobs[app_id(handle)]
    assert job.state == AppState.RUNNING and job.cancelled == 0


def test_abort_leaves_ended_apps_alone(table: JobTable) -> None:
    s = session(table)
    drive(s)
    s.abort(KeyboardInterrupt())
    assert [j.cancelled for j in table.jobs.values()] == [0]


def test_abort_before_submission_does_nothing(table: JobTable) -> None:
    session(table).abort(KeyboardInterrupt())
    assert table.jobs == {}


class SlowSubmit:
    """Wraps the fake scheduler's ``schedule``: signals entry, waits for ``release``."""

    def __init__(self, table: JobTable, *, before: bool) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.before = before  # True: the app appears only when the submission returns
        self.table = table

    def install(self, s: Session) -> None:
        sched = s.runner._scheduler("fake")
        real = sched.schedule

        def schedule(info: Any) -> str:
            if self.before:
                self.entered.set()
                self.release.wait(5)
                return real(info)
            app = real(info)
            self.entered.set()
            self.release.wait(5)
            return app

        sched.schedule = schedule  # type: ignore[method-assign]


def test_abort_during_a_submission_in_a_worker_thread_cancels_the_app(table: JobTable) -> None:
    """Async task: the attempt is cancelled while the submission still runs in a thread."""
    running(table)
    s = session(table)
    slow = SlowSubmit(table, before=False)
    slow.install(s)
    worker = threading.Thread(target=s.start)
    worker.start()
    assert slow.entered.wait(5)
    threading.Timer(0.1, slow.release.set).start()
    s.abort(asyncio.CancelledError())
    worker.join(5)
    assert [j.state for j in table.jobs.values()] == [AppState.CANCELLED]


def test_abort_after_an_interrupted_submission_finds_the_app_by_name(table: JobTable) -> None:
    """Sync task: a timeout/termination exception lands inside the submission after the app
    exists, so the handle is never known: the app is found by its name and cancelled."""
    running(table)
    s = session(table)
    sched = s.runner._scheduler("fake")
    real = sched.schedule

    def schedule(info: Any) -> str:
        real(info)
        raise KeyboardInterrupt  # stands for TerminationSignal / a sync timeout

    sched.schedule = schedule  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        s.start()
    s.abort(KeyboardInterrupt())
    assert s.handle is None
    assert [j.state for j in table.jobs.values()] == [AppState.CANCELLED]


def test_a_start_that_runs_after_abort_submits_nothing(table: JobTable) -> None:
    s = session(table)
    s.abort(asyncio.CancelledError())
    with pytest.raises(RuntimeError, match="before"):
        s.start()
    assert table.jobs == {}


def test_a_submission_that_outlasts_the_aborts_wait_cancels_its_app(table: JobTable) -> None:
    """Async task: abort() gives up waiting for a slow submission and cannot find the app by
    name yet; when the submission finally returns, the app is cancelled."""
    running(table)
    s = session(table, cancel_timeout=0.05)
    slow = SlowSubmit(table, before=True)
    slow.install(s)
    worker = threading.Thread(target=s.start)
    worker.start()
    assert slow.entered.wait(5)
    s.abort(asyncio.CancelledError())
    assert table.jobs == {} and s.handle is None  # abort() returned without finding it
    slow.release.set()
    worker.join(5)
    assert [j.state for j in table.jobs.values()] == [AppState.CANCELLED]


def test_invalid_arguments_are_the_lifecycles_error() -> None:
    with pytest.raises(InvalidTaskArgumentError, match="poll_interval"):
        validate_args(echo_app(), scheduler="fake", poll_interval=-1)


# -- the label store -----------------------------------------------------------------------------


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
    assert store.read() == ({}, None)


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

        return SimpleNamespace(labels=dict(self.labels), run_count=2)


@pytest.mark.parametrize("script", [["busy", "ok"], ["lost", "busy", "ok"], ["ok"]])
def test_store_put_retries_lost_and_refused_writes(script: list[str]) -> None:
    from torchx_prefect._prefect_io import FlowRunHandleStore

    client = FakeLabelsClient(script)
    store = FlowRunHandleStore(uuid.uuid4(), client_factory=lambda: client)
    assert store.put("torchx.app.x", "local_cwd://s/a", backoff=0.0) is True
    assert store.get("torchx.app.x") == "local_cwd://s/a"
    assert store.read() == ({"torchx.app.x": "local_cwd://s/a"}, 2)
    assert client.updates == len(script)


def test_store_put_gives_up_after_its_attempts(caplog: pytest.LogCaptureFixture) -> None:
    from torchx_prefect._prefect_io import FlowRunHandleStore

    client = FakeLabelsClient(["busy"] * 3)
    store = FlowRunHandleStore(uuid.uuid4(), client_factory=lambda: client)
    with caplog.at_level(logging.WARNING):
        assert store.put("torchx.app.x", "h", attempts=3, backoff=0.0) is False
    assert client.updates == 3 and store.handles() == {}
    assert "after 3 attempts: database is locked" in caplog.text


def test_the_callers_appdef_is_not_changed_by_submitting(table: JobTable) -> None:
    """A retry gets the same AppDef object again: its digest (the identity) must not change."""
    app = echo_app()
    before = call_digest(
        validate_args(app, scheduler="fake", poll_interval=5, unknown_state_timeout=0)
    )
    drive(session(table, app=app))
    (job,) = table.jobs.values()
    assert "TORCHX_JOB_ID" in job.app.roles[0].env  # the submitted copy was filled in
    assert app.roles[0].env == {} and app.name == "echo"
    after = call_digest(
        validate_args(app, scheduler="fake", poll_interval=5, unknown_state_timeout=0)
    )
    assert after == before


def test_the_link_artifact_opens_the_dashboard_when_a_block_configures_one(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any UI URL exists, the link already points at the dashboard's app page; without a
    dashboard it waits for the scheduler's UI URL (as before)."""
    from urllib.parse import quote

    from torchx_prefect import _prefect_io, blocks

    published: list[tuple[str, str]] = []
    monkeypatch.setattr(
        _prefect_io, "publish_link", lambda key, url, desc: published.append((key, url))
    )
    monkeypatch.setattr(_prefect_io, "publish_status", lambda *a: None)
    block = blocks.TorchXScheduler(scheduler="local_cwd", dashboard_url="http://dash:8288/")
    with block.applied():
        s = session(table, create_artifacts=True)
        drive(s)
    assert published == [
        (published[0][0], f"http://dash:8288/app?handle={quote(s.handle, safe='')}")
    ]
    published.clear()
    drive(session(table, create_artifacts=True))  # no dashboard, no UI URL: no link
    assert published == []
    with pytest.raises(ValueError, match="not an absolute http"):
        blocks.TorchXScheduler(scheduler="local_cwd", dashboard_url="dash:8288")
