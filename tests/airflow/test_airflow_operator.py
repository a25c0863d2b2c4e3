"""TorchXOperator unit tests with a fake Runner and a fake task context (no Airflow run)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTimeout,
    TaskDeferred,
)
from airflow_fakes import FakeRunner, FakeStore, FakeTI, make_context

from torchx_airflow import TorchXOperator, TorchXTrigger
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_core.specs import AppDef, AppState

FAST = {"poll_interval": 0.001, "stream_logs": False}


def _op(runner: FakeRunner, app: AppDef | None = None, **kwargs: Any) -> TorchXOperator:
    for k, v in FAST.items():
        kwargs.setdefault(k, v)
    if app is None and "component" not in kwargs:
        raise ValueError("test bug: give app or component")
    return TorchXOperator(task_id="task", app=app, runner_factory=lambda: runner, **kwargs)


def test_success_returns_status_dict_and_pushes_handle_before_waiting(app: AppDef) -> None:
    r = FakeRunner([AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED], ui_url="http://ui/x")
    pushed_while: list[tuple[str, int]] = []
    ti = FakeTI(on_push=lambda k, v: pushed_while.append((k, r.count("status"))))
    store = FakeStore()
    result = _op(r, app).execute(make_context(store, ti))
    assert result["state"] == "SUCCEEDED"
    handle = result["app_handle"]
    assert ti.xcoms["app_handle"] == handle
    assert ti.xcoms["ui_url"] == "http://ui/x"
    assert store.data["torchx_app_handle"] == handle
    # the handle went to XCom before the app finished (first status read)
    assert dict(pushed_while)["app_handle"] <= 1
    assert r.count("run") == 1
    assert r.closed >= 1


def test_app_is_named_from_the_task_identity(app: AppDef) -> None:
    r1, r2 = FakeRunner([AppState.SUCCEEDED]), FakeRunner([AppState.SUCCEEDED])
    _op(r1, app).execute(make_context(FakeStore()))
    _op(r2, app).execute(make_context(FakeStore()))
    names = [fa.app.name for fa in [*r1.apps.values(), *r2.apps.values()]]
    assert names[0] == names[1] and names[0].startswith("train-")
    other = FakeTI()
    other.run_id = "manual__2"
    r3 = FakeRunner([AppState.SUCCEEDED])
    _op(r3, app).execute(make_context(FakeStore(), other))
    assert next(iter(r3.apps.values())).app.name != names[0]
    assert app.name == "train"  # the operator's AppDef is not mutated


def test_component_is_materialized_with_its_args() -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    op = TorchXOperator(
        task_id="task",
        component="utils.echo",
        component_args=["--msg", "hi"],
        runner_factory=lambda: r,
        **FAST,
    )
    op.execute(make_context(FakeStore()))
    (fa,) = r.apps.values()
    assert fa.app.roles[0].args == ["--msg", "hi"]
    assert fa.app.name.startswith("echo-")


def test_failed_app_raises_retryable_exception_with_error(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING, AppState.FAILED])
    with pytest.raises(AirflowException) as ei:
        _op(r, app).execute(make_context(FakeStore()))
    assert type(ei.value) is AirflowException
    assert "FAILED" in str(ei.value) and "fake msg" in str(ei.value)


def test_fail_fast_raises_fail_exception(app: AppDef) -> None:
    r = FakeRunner([AppState.FAILED])
    with pytest.raises(AirflowFailException):
        _op(r, app, fail_fast=True).execute(make_context(FakeStore()))


def test_cancelled_fails_or_skips(app: AppDef) -> None:
    with pytest.raises(AirflowFailException):
        _op(FakeRunner([AppState.CANCELLED]), app).execute(make_context(FakeStore()))
    with pytest.raises(AirflowSkipException):
        _op(FakeRunner([AppState.CANCELLED]), app, skip_on_cancel=True).execute(
            make_context(FakeStore())
        )


def test_unknown_past_grace_fails(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING, AppState.UNKNOWN])
    with pytest.raises(AirflowException, match="UNKNOWN"):
        _op(r, app, unknown_state_timeout=0).execute(make_context(FakeStore()))


def test_unknown_then_known_keeps_waiting(app: AppDef) -> None:
    r = FakeRunner([AppState.UNKNOWN, AppState.UNKNOWN, AppState.RUNNING, AppState.SUCCEEDED])
    assert _op(r, app).execute(make_context(FakeStore()))["state"] == "SUCCEEDED"


def test_vanished_app_is_a_retryable_failure_after_the_grace(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING])
    op = _op(r, app, unknown_state_timeout=0)
    r.status_hook = lambda h: r.apps.pop(h, None) if r.count("status") > 2 else None
    with pytest.raises(AirflowException, match="gone") as ei:
        op.execute(make_context(FakeStore()))
    assert type(ei.value) is AirflowException


def test_an_app_missing_briefly_is_waited_for(app: AppDef) -> None:
    """A scheduler may not report an app for a moment: within the grace it is not a failure."""
    r = FakeRunner([AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    r.missing_on = {2, 3}
    assert _op(r, app).execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    assert r.count("run") == 1


def test_retry_resubmits_a_vanished_app_instead_of_waiting_for_it(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    store = FakeStore()
    store.set("torchx_app_handle", "local_cwd://torchx/gone-1")
    result = _op(r, app).execute(make_context(store))
    assert r.count("run") == 1 and result["app_handle"] != "local_cwd://torchx/gone-1"


def test_failure_logs_a_bounded_tail_when_not_streaming(app: AppDef, caplog: Any) -> None:
    r = FakeRunner([AppState.FAILED], logs={("r", 0): [f"line {i}\n" for i in range(100)]})
    with pytest.raises(AirflowException):
        _op(r, app, log_tail_lines=3).execute(make_context(FakeStore()))
    assert r.count("log_lines") == 1


# -- crash safety ------------------------------------------------------------------------------


def test_retry_reattaches_to_a_running_app(app: AppDef) -> None:
    r = FakeRunner()
    running = r.add_app("train-x", [AppState.RUNNING, AppState.SUCCEEDED])
    store = FakeStore()
    store.set("torchx_app_handle", running)
    result = _op(r, app).execute(make_context(store))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert r.count("run") == 0


def test_retry_after_success_returns_without_resubmitting(app: AppDef) -> None:
    r = FakeRunner()
    done = r.add_app("train-x", [AppState.SUCCEEDED])
    store = FakeStore()
    store.set("torchx_app_handle", done)
    ti = FakeTI()
    result = _op(r, app).execute(make_context(store, ti))
    assert result["state"] == "SUCCEEDED" and r.count("run") == 0
    assert ti.xcoms["app_handle"] == done


def test_retry_after_failure_resubmits(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    failed = r.add_app("train-x", [AppState.FAILED])
    store = FakeStore()
    store.set("torchx_app_handle", failed)
    result = _op(r, app).execute(make_context(store))
    assert r.count("run") == 1 and result["app_handle"] != failed
    assert store.data["torchx_app_handle"] == result["app_handle"]


def test_without_state_store_the_app_is_found_by_name(app: AppDef) -> None:
    """Airflow < 3.3 (no task_state_store): a retry finds the first try's app by its name."""
    r = FakeRunner([AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    first = _op(r, app, wait=False).execute(make_context(None))
    assert r.count("run") == 1
    second = _op(r, app).execute(make_context(None))
    assert second["app_handle"] == first["app_handle"]
    assert r.count("run") == 1


def test_without_state_store_a_failed_app_is_resubmitted(app: AppDef) -> None:
    r = FakeRunner([AppState.FAILED])
    with pytest.raises(AirflowException):
        _op(r, app).execute(make_context(None))
    r.script = [AppState.SUCCEEDED]
    assert _op(r, app).execute(make_context(None))["state"] == "SUCCEEDED"
    assert r.count("run") == 2


def test_wait_false_returns_after_submission(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING])
    result = _op(r, app, wait=False).execute(make_context(FakeStore()))
    assert result["state"] == "RUNNING"


# -- deferrable --------------------------------------------------------------------------------


def test_deferrable_defers_to_the_trigger_after_pushing_the_handle(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING])
    ti = FakeTI()
    op = _op(r, app, deferrable=True, execution_timeout=timedelta(seconds=60))
    with pytest.raises(TaskDeferred) as ei:
        op.execute(make_context(FakeStore(), ti))
    trigger = ei.value.trigger
    assert isinstance(trigger, TorchXTrigger)
    assert trigger.app_handle == ti.xcoms["app_handle"]
    assert trigger.cancel_on_kill is True and trigger.timeout_at is not None
    assert ei.value.method_name == "execute_complete"
    assert r.closed >= 1  # no runner held while deferred


def _event(kind: str, state: str | None, handle: str = "local_cwd://torchx/a-1") -> dict[str, Any]:
    status = None
    if state is not None:
        status = {
            "app_handle": handle,
            "state": state,
            "num_restarts": 0,
            "msg": "m",
            "structured_error_msg": '{"message": "boom"}' if state == "FAILED" else "<NONE>",
            "ui_url": None,
            "roles": [],
        }
    return {"event": kind, "app_handle": handle, "status": status, "message": "msg"}


def test_execute_complete_maps_the_event(app: AppDef) -> None:
    r = FakeRunner()
    op = _op(r, app, deferrable=True)
    ctx = make_context(FakeStore())
    assert op.execute_complete(ctx, _event("terminal", "SUCCEEDED"))["state"] == "SUCCEEDED"
    with pytest.raises(AirflowException, match="FAILED"):
        op.execute_complete(ctx, _event("terminal", "FAILED"))
    with pytest.raises(AirflowFailException):
        op.execute_complete(ctx, _event("terminal", "CANCELLED"))
    with pytest.raises(AirflowException, match="gone"):
        op.execute_complete(ctx, _event("vanished", "VANISHED"))
    with pytest.raises(AirflowTaskTimeout):
        op.execute_complete(ctx, _event("timeout", "RUNNING"))
    with pytest.raises(AirflowException):
        op.execute_complete(ctx, _event("unknown_timeout", "UNKNOWN"))


# -- kill --------------------------------------------------------------------------------------


def test_on_kill_cancels_the_app(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING])
    op = _op(r, app, wait=False)
    handle = op.execute(make_context(FakeStore()))["app_handle"]
    op.on_kill()
    assert ("cancel", handle) in r.calls


def test_on_kill_respects_cancel_on_kill(app: AppDef) -> None:
    r = FakeRunner([AppState.RUNNING])
    op = _op(r, app, wait=False, cancel_on_kill=False)
    op.execute(make_context(FakeStore()))
    op.on_kill()
    assert r.count("cancel") == 0


def test_on_kill_before_submission_does_nothing(app: AppDef) -> None:
    r = FakeRunner()
    _op(r, app).on_kill()
    assert r.calls == []


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
            wait="yes",
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
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, TypeError)


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
