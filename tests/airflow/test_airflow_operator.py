"""TorchXOperator: submit, wait, outcomes, deferral and validation (real Runners over the shared
fake scheduler, a fake task context; no Airflow run)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from airflow_versions import HAS_TASK_STATE_STORE, TaskDeferred
from support.airflow_fakes import Cluster, FakeStore, FakeTI, make_context

from torchx_airflow import TorchXOperator, TorchXTrigger
from torchx_airflow._airflow import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTimeout,
)
from torchx_airflow._runtime import status_payload
from torchx_airflow.errors import InvalidTaskArgumentError, TorchXAirflowError
from torchx_core.runner.lifecycle import AppFailedError, Observation, Phase, app_name, phase_of
from torchx_core.specs import AppDef, AppState, AppStatus
from torchx_core.specs.errors import TorchXError

FAST = {"poll_interval": 0.001, "stream_logs": False, "scheduler": "fake", "defer_after": 0}
ERROR = '{"message": "exit 3"}'


def _op(cluster: Cluster, app: AppDef | None = None, **kwargs: Any) -> TorchXOperator:
    for k, v in FAST.items():
        kwargs.setdefault(k, v)
    return TorchXOperator(task_id="task", app=app, runner_factory=cluster.factory, **kwargs)


def _ends(cluster: Cluster, final: AppState, after: int = 2, error: str = "") -> None:
    """Submitted apps run for ``after`` status reads, then end ``final`` (with ``error``)."""
    cluster.table.hold = False
    cluster.table.steps = after
    cluster.table.final = final
    if error:
        cluster.on_run = lambda h: setattr(cluster.job(h), "error", error)


def test_success_returns_status_dict_and_pushes_handle_before_waiting(
    cluster: Cluster, app: AppDef
) -> None:
    _ends(cluster, AppState.SUCCEEDED, after=3)
    state_at_push: dict[str, AppState] = {}
    ti = FakeTI(on_push=lambda k, v: state_at_push.setdefault(k, cluster.state(v)))
    store = FakeStore()
    result = _op(cluster, app).execute(make_context(store, ti))
    (handle,) = cluster.handles
    assert result["state"] == "SUCCEEDED" and result["app_handle"] == handle
    assert ti.xcoms["app_handle"] == handle
    if HAS_TASK_STATE_STORE:
        assert store.data["torchx_app_handle"] == handle
    assert state_at_push["app_handle"] == AppState.RUNNING  # pushed before the app ended
    assert cluster.table.closed >= 1  # the Runner was closed
    assert cluster.job(handle).owner == "airflow:dag/task/manual__1/-1#try=1"


def test_app_is_named_from_the_task_identity(cluster: Cluster, app: AppDef) -> None:
    _ends(cluster, AppState.SUCCEEDED, after=1)
    _op(cluster, app).execute(make_context(FakeStore()))
    other = FakeTI()
    other.run_id = "manual__2"
    _op(cluster, app).execute(make_context(FakeStore(), other))
    names = [cluster.job(h).app.name for h in cluster.handles]
    assert names == [
        app_name("train", ("dag", "task", "manual__1", -1)),
        app_name("train", ("dag", "task", "manual__2", -1)),
    ]
    assert app.name == "train"  # the operator's AppDef is not mutated


def test_component_is_materialized_with_its_args(cluster: Cluster) -> None:
    _ends(cluster, AppState.SUCCEEDED, after=1)
    op = TorchXOperator(
        task_id="task",
        component="utils.echo",
        component_args=["--msg", "hi"],
        runner_factory=cluster.factory,
        **FAST,
    )
    op.execute(make_context(FakeStore()))
    (handle,) = cluster.handles
    job = cluster.job(handle)
    assert job.request.roles[0][3] == ["hi"]
    assert job.app.name.startswith("echo-")


def test_failed_app_raises_a_retryable_exception_with_error_and_tail(
    cluster: Cluster, app: AppDef
) -> None:
    _ends(cluster, AppState.FAILED, error=ERROR)
    with pytest.raises(AirflowException) as ei:
        _op(cluster, app).execute(make_context(FakeStore()))
    assert type(ei.value) is AirflowException
    (handle,) = cluster.handles
    text = str(ei.value)
    assert text.startswith(f"TorchX app {handle} ended FAILED: fake FAILED\n")
    assert f"error: {ERROR}" in text and "[r/0] r 0 line 2" in text
    assert isinstance(ei.value.__cause__, AppFailedError)


def test_fail_fast_raises_fail_exception(cluster: Cluster, app: AppDef) -> None:
    _ends(cluster, AppState.FAILED)
    with pytest.raises(AirflowFailException):
        _op(cluster, app, fail_fast=True).execute(make_context(FakeStore()))


@pytest.mark.parametrize(
    ("skip", "raised"), [(False, AirflowFailException), (True, AirflowSkipException)]
)
def test_cancelled_fails_or_skips(cluster: Cluster, app: AppDef, skip: bool, raised: type) -> None:
    _ends(cluster, AppState.CANCELLED)
    with pytest.raises(raised, match="ended CANCELLED"):
        _op(cluster, app, skip_on_cancel=skip).execute(make_context(FakeStore()))


def test_unknown_past_grace_fails_and_cancels_the_owned_app(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.UNKNOWN)
    with pytest.raises(AirflowException, match="stayed UNKNOWN") as ei:
        _op(cluster, app, unknown_state_timeout=0).execute(make_context(FakeStore()))
    assert type(ei.value) is AirflowException
    (handle,) = cluster.handles
    assert cluster.job(handle).cancelled == 1


def test_unknown_then_known_keeps_waiting(cluster: Cluster, app: AppDef) -> None:
    reads = {"n": 0}

    def flip() -> None:
        reads["n"] += 1
        for h in cluster.handles:
            cluster.set_state(h, AppState.UNKNOWN if reads["n"] < 4 else AppState.SUCCEEDED)

    cluster.table.on_describe = flip
    assert _op(cluster, app).execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    assert reads["n"] >= 4


def test_vanished_app_is_a_retryable_failure_after_the_grace(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.table.vanish(h.rsplit("/", 1)[1])
    with pytest.raises(AirflowException, match="vanished") as ei:
        _op(cluster, app, unknown_state_timeout=0).execute(make_context(FakeStore()))
    assert type(ei.value) is AirflowException


def test_an_unreadable_status_is_waited_for_within_the_grace(cluster: Cluster, app: AppDef) -> None:
    _ends(cluster, AppState.SUCCEEDED, after=2)
    errors = [ConnectionError("scheduler unreachable")] * 2

    def flaky() -> None:
        cluster.table._describe_error = errors.pop() if errors and cluster.handles else None

    cluster.table.on_describe = flaky
    assert _op(cluster, app).execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    assert len(cluster.handles) == 1 and errors == []


def test_failure_logs_a_bounded_tail_when_not_streaming(cluster: Cluster, app: AppDef) -> None:
    _ends(cluster, AppState.FAILED)
    cluster.on_run = lambda h: cluster.table.append_log(
        h.rsplit("/", 1)[1], "r", 0, *[f"line {i}" for i in range(100)]
    )
    with pytest.raises(AirflowException) as ei:
        _op(cluster, app, log_tail_lines=3).execute(make_context(FakeStore()))
    tail = str(ei.value).split("log tail:\n", 1)[1].splitlines()
    assert tail == ["[r/0] line 97", "[r/0] line 98", "[r/0] line 99"]


def test_wait_false_returns_after_submission(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    result = _op(cluster, app, wait=False).execute(make_context(FakeStore()))
    assert result["state"] == "RUNNING"


# -- deferrable --------------------------------------------------------------------------------


def test_deferrable_defers_to_the_trigger_after_pushing_the_handle(
    cluster: Cluster, app: AppDef
) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    ti = FakeTI()
    op = _op(cluster, app, deferrable=True, execution_timeout=timedelta(seconds=60))
    with pytest.raises(TaskDeferred) as ei:
        op.execute(make_context(FakeStore(), ti))
    trigger = ei.value.trigger
    assert isinstance(trigger, TorchXTrigger)
    assert trigger.app_handle == ti.xcoms["app_handle"] == cluster.handles[0]
    assert trigger.cancel_on_kill is True and trigger.timeout_at is not None
    assert trigger.owner == "airflow:dag/task/manual__1/-1#try=1"
    assert ei.value.method_name == "execute_complete"
    assert cluster.table.closed >= 1  # no runner held while deferred


def _event(kind: str, state: str | None, handle: str) -> dict[str, Any]:
    """A trigger event: ``kind`` is a TriggerEnd, or "vanished"/"unknown_timeout" (an expired
    observation); ``state`` the status read (None: none)."""
    status = None
    if state not in (None, "VANISHED"):
        error = ERROR if state == "FAILED" else "<NONE>"
        status = AppStatus(
            AppState[state], msg="m", structured_error_msg=error, ui_url="http://dashboard/app"
        )
    expired = kind in ("vanished", "unknown_timeout")
    phase = Phase.VANISHED if kind == "vanished" else Phase.UNKNOWN if expired else None
    obs = None
    if status is not None or expired:
        obs = Observation(phase or phase_of(status), status, expired).to_json()
    end = "observed" if kind in ("terminal", "vanished", "unknown_timeout") else kind
    return {"event": end, "app_handle": handle, "observation": obs, "message": "msg"}


def _legacy_event(kind: str, state: str | None, handle: str) -> dict[str, Any]:
    """The same event as the trigger of the version before fired it (``kind`` as is, the status
    under ``status``): a task deferred before an upgrade resumes with it."""
    new = _event(kind, state, handle)
    obs = Observation.from_json(new["observation"]) if new["observation"] else None
    status = obs.status if obs is not None else None
    payload = None if kind == "error" else status_payload(handle, status)
    return {"event": kind, "app_handle": handle, "status": payload, "message": "msg"}


EVENT_VERSIONS = pytest.mark.parametrize("make_event", [_event, _legacy_event], ids=["now", "old"])


@pytest.mark.parametrize(
    ("kind", "state", "raised", "match"),
    [
        ("terminal", "FAILED", AirflowException, "ended FAILED: m\nerror: "),
        ("terminal", "CANCELLED", AirflowFailException, "ended CANCELLED"),
        ("vanished", "VANISHED", AirflowException, "vanished"),
        ("timeout", "RUNNING", AirflowTaskTimeout, "msg"),
        ("unknown_timeout", "UNKNOWN", AirflowException, "stayed UNKNOWN"),
        ("error", None, AirflowException, "msg"),
    ],
)
@EVENT_VERSIONS
def test_execute_complete_maps_the_event(
    cluster: Cluster,
    app: AppDef,
    kind: str,
    state: str | None,
    raised: type,
    match: str,
    make_event: Any,
) -> None:
    handle = cluster.add("a", AppState.RUNNING)
    with pytest.raises(raised, match=match) as ei:
        _op(cluster, app, deferrable=True).execute_complete(
            make_context(FakeStore()), make_event(kind, state, handle)
        )
    assert type(ei.value) is raised


@EVENT_VERSIONS
def test_execute_complete_success_returns_the_status_with_a_tail(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str], make_event: Any
) -> None:
    handle = cluster.add("a", AppState.SUCCEEDED)
    op = _op(cluster, app, deferrable=True, log_tail_lines=2)
    ctx = make_context(FakeStore())
    result = op.execute_complete(ctx, make_event("terminal", "SUCCEEDED", handle))
    assert result["state"] == "SUCCEEDED" and result["ui_url"] == "http://dashboard/app"
    logged = capfd.readouterr().out
    assert "[r/0] r 0 line 1" in logged and "[r/0] r 0 line 2" in logged
    assert "r 0 line 0" not in logged  # a bounded tail, not the whole log
    assert op.operator_extra_links[0].get_link(op, ti_key=None) == ("http://dashboard/app")


def _streamed(out: str) -> list[str]:
    """The replica lines in the task log, in order (the logger pads them and adds its name)."""
    return re.findall(r"\[r/0\] (.+?)(?:\s{2,}|$)", out, re.MULTILINE)


def test_a_short_app_never_defers(cluster: Cluster, app: AppDef) -> None:
    """Issue 22 item 4: the task watches on the worker for ``defer_after`` seconds first, so an
    app that ends within them never defers (and never meets Airflow's stale-event race)."""
    _ends(cluster, AppState.SUCCEEDED, after=4)
    result = _op(cluster, app, deferrable=True, defer_after=300).execute(make_context(FakeStore()))
    assert result["state"] == "SUCCEEDED"


@EVENT_VERSIONS
def test_a_deferred_task_gives_the_rest_of_the_log_once_when_it_resumes(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str], make_event: Any
) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    op = _op(cluster, app, deferrable=True, defer_after=0.05, stream_logs=True)
    with pytest.raises(TaskDeferred) as ei:
        op.execute(make_context(FakeStore()))
    (handle,) = cluster.handles
    before = _streamed(capfd.readouterr().out)
    assert before == [f"r 0 line {i}" for i in range(3)]  # streamed while watching
    assert ei.value.kwargs == {"log_positions": {"r/0": 3}}
    cluster.table.append_log(handle.rsplit("/", 1)[1], "r", 0, "while deferred")
    cluster.set_state(handle, AppState.SUCCEEDED)
    result = _op(cluster, app, deferrable=True, stream_logs=True).execute_complete(
        make_context(FakeStore()), make_event("terminal", "SUCCEEDED", handle), **ei.value.kwargs
    )
    assert result["state"] == "SUCCEEDED"
    out = capfd.readouterr().out
    assert _streamed(out) == ["while deferred"] and "::group::TorchX logs" not in out


def test_the_trigger_looks_up_no_absent_default_connection(cluster: Cluster, app: AppDef) -> None:
    """Issue 22 item 5: without a ``torchx_default`` connection the trigger gets no connection
    id (no lookup in the triggerer); a named connection is always passed."""
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    with pytest.raises(TaskDeferred) as ei:
        _op(cluster, app, deferrable=True).execute(make_context(FakeStore()))
    assert ei.value.trigger.torchx_conn_id is None
    assert ei.value.trigger.serialize()[1]["torchx_conn_id"] is None


@pytest.mark.parametrize(
    ("permanent", "raised"), [(True, AirflowFailException), (False, AirflowException)]
)
@EVENT_VERSIONS
def test_an_error_event_fails_at_once_only_if_permanent(
    cluster: Cluster, app: AppDef, permanent: bool, raised: type, make_event: Any
) -> None:
    handle = cluster.add("a", AppState.RUNNING)
    event = {**make_event("error", None, handle), "permanent": permanent}
    with pytest.raises(raised, match="msg") as ei:
        _op(cluster, app, deferrable=True).execute_complete(make_context(FakeStore()), event)
    assert type(ei.value) is raised


def test_a_transient_error_is_retried_not_failed_at_once(cluster: Cluster, app: AppDef) -> None:
    """A scheduler briefly unreachable while submitting: Airflow's retries apply."""

    def unreachable(*args: Any, **kwargs: Any) -> str:
        raise ConnectionError("scheduler unreachable")

    runner_factory = cluster.factory

    def factory() -> Any:
        runner = runner_factory()
        runner.schedule = unreachable  # type: ignore[method-assign]
        return runner

    op = TorchXOperator(task_id="task", app=app, runner_factory=factory, **FAST)
    with pytest.raises(ConnectionError):
        op.execute(make_context(FakeStore()))


# -- validation --------------------------------------------------------------------------------


def test_every_bad_argument_is_reported_at_once(app: AppDef) -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXOperator(
            task_id="t",
            app=app,
            component="utils.echo",
            component_args="--msg hi",
            scheduler="",
            cfg=["x"],
            poll_interval=0,
            log_tail_lines=-1,
            unknown_state_timeout=-5,
            wait="maybe",
        )
    msg = str(ei.value)
    for needle in (
        "exactly one of app=",
        "component_args",
        "scheduler",
        "cfg",
        "poll_interval",
        "log_tail_lines",
        "unknown_state_timeout",
        "wait must be True or False",
    ):
        assert needle in msg
    err = ei.value
    assert isinstance(err, ValueError) and isinstance(err, TypeError)
    assert isinstance(err, TorchXAirflowError) and isinstance(err, TorchXError)


def test_neither_app_nor_component_is_an_error() -> None:
    with pytest.raises(InvalidTaskArgumentError, match="exactly one"):
        TorchXOperator(task_id="t")


def test_app_must_be_an_appdef() -> None:
    with pytest.raises(InvalidTaskArgumentError, match="AppDef"):
        TorchXOperator(task_id="t", app={"name": "x"})


def test_deferrable_without_wait_is_contradictory(app: AppDef) -> None:
    with pytest.raises(InvalidTaskArgumentError, match="deferrable=True needs wait=True"):
        TorchXOperator(task_id="t", app=app, wait=False, deferrable=True)


def test_unknown_kwarg_is_rejected_by_airflow(app: AppDef) -> None:
    with pytest.raises(TypeError):
        TorchXOperator(task_id="t", app=app, poll_intervall=3)


def test_deferrable_defaults_from_airflow_config(app: AppDef, monkeypatch: Any) -> None:
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert TorchXOperator(task_id="t", app=app).deferrable is True
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert TorchXOperator(task_id="t", app=app).deferrable is False


def test_fallback_mixin_submits_polls_and_returns() -> None:
    """The stand-in used when Airflow has no ResumableJobMixin (< 3.3 without common-compat)."""
    from torchx_airflow._resumable_fallback import ResumableJobMixin

    calls: list[str] = []

    class Base:
        def __init__(self, **kwargs: Any) -> None:
            calls.append(f"base:{sorted(kwargs)}")

    class Job(ResumableJobMixin, Base):
        def submit_job(self, context: Any) -> str:
            calls.append("submit")
            return "h"

        def poll_until_complete(self, external_id: Any, context: Any) -> None:
            calls.append(f"poll:{external_id}")

        def get_job_result(self, external_id: Any, context: Any) -> str:
            calls.append(f"result:{external_id}")
            return "done"

    job = Job(durable=True, task_id="t")
    assert job.durable is True
    assert job.execute_resumable({}) == "done"
    assert calls == ["base:['task_id']", "submit", "poll:h", "result:h"]
