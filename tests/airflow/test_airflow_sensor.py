"""TorchXSensor unit tests (fake Runner, fake context)."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import PokeReturnValue
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferred,
)
from airflow_fakes import FakeRunner, FakeStore, make_context

from torchx_airflow import TorchXSensor, TorchXTrigger
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_core.specs import AppState


def _sensor(r: FakeRunner, handle: str, **kwargs: Any) -> TorchXSensor:
    return TorchXSensor(task_id="s", app_handle=handle, runner_factory=lambda: r, **kwargs)


def test_poke_waits_then_returns_the_status() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING, AppState.SUCCEEDED])
    s = _sensor(r, h)
    assert s.poke(make_context()) is False
    done = s.poke(make_context())
    assert isinstance(done, PokeReturnValue) and done.is_done
    assert done.xcom_value["state"] == "SUCCEEDED" and done.xcom_value["app_handle"] == h


@pytest.mark.parametrize(
    ("state", "kwargs", "exc"),
    [
        (AppState.FAILED, {}, AirflowException),
        (AppState.FAILED, {"fail_fast": True}, AirflowFailException),
        (AppState.CANCELLED, {}, AirflowFailException),
        (AppState.CANCELLED, {"skip_on_cancel": True}, AirflowSkipException),
    ],
)
def test_poke_raises_per_state_table(
    state: AppState, kwargs: dict[str, Any], exc: type[BaseException]
) -> None:
    r = FakeRunner()
    h = r.add_app("a", [state])
    with pytest.raises(exc) as ei:
        _sensor(r, h, **kwargs).poke(make_context())
    assert type(ei.value) is exc


def test_sensor_never_cancels() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.FAILED])
    with pytest.raises(AirflowException):
        _sensor(r, h).poke(make_context())
    assert r.count("cancel") == 0


def test_vanished_app_fails_retryably_after_the_grace() -> None:
    r = FakeRunner()
    s = _sensor(r, "local_cwd://torchx/gone", unknown_state_timeout=3600)
    assert s.poke(make_context()) is False  # within the grace: not reported, maybe yet
    with pytest.raises(AirflowException, match="VANISHED") as ei:
        _sensor(r, "local_cwd://torchx/gone", unknown_state_timeout=0).poke(make_context())
    assert type(ei.value) is AirflowException


def test_unknown_grace_survives_reschedules_through_the_state_store() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.UNKNOWN])
    store = FakeStore()
    s1 = _sensor(r, h, mode="reschedule", unknown_state_timeout=3600)
    assert s1.poke(make_context(store)) is False
    since = store.data["torchx_unknown_since"]
    # a new sensor instance (next reschedule) continues the same streak
    s2 = _sensor(r, h, mode="reschedule", unknown_state_timeout=3600)
    assert s2.poke(make_context(store)) is False
    assert store.data["torchx_unknown_since"] == since
    store.data["torchx_unknown_since"] = since - 7200  # the streak started two hours ago
    with pytest.raises(AirflowException, match="UNKNOWN"):
        _sensor(r, h, mode="reschedule", unknown_state_timeout=3600).poke(make_context(store))


def test_known_state_clears_the_unknown_streak() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.UNKNOWN, AppState.RUNNING])
    store = FakeStore()
    s = _sensor(r, h, mode="reschedule")
    s.poke(make_context(store))
    assert "torchx_unknown_since" in store.data
    s.poke(make_context(store))
    assert "torchx_unknown_since" not in store.data


def test_deferrable_pokes_once_then_defers_without_cancel_on_kill() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.RUNNING])
    s = _sensor(r, h, deferrable=True, timeout=120, poke_interval=2)
    with pytest.raises(TaskDeferred) as ei:
        s.execute(make_context())
    trigger = ei.value.trigger
    assert isinstance(trigger, TorchXTrigger)
    assert trigger.cancel_on_kill is False and trigger.poll_interval == 2
    assert trigger.timeout_at is not None


def test_deferrable_returns_at_once_when_already_done() -> None:
    r = FakeRunner()
    h = r.add_app("a", [AppState.SUCCEEDED])
    assert _sensor(r, h, deferrable=True).execute(make_context())["state"] == "SUCCEEDED"


def test_execute_complete() -> None:
    r = FakeRunner()
    s = _sensor(r, "local_cwd://torchx/a-1", deferrable=True)
    ok = {"state": "SUCCEEDED", "num_restarts": 0, "msg": "", "ui_url": None, "roles": []}
    ok["structured_error_msg"] = "<NONE>"
    event = {"event": "terminal", "app_handle": "local_cwd://torchx/a-1", "status": ok}
    assert s.execute_complete(make_context(), event)["state"] == "SUCCEEDED"
    with pytest.raises(AirflowSensorTimeout):
        s.execute_complete(make_context(), {"event": "timeout", "message": "late"})


def test_bad_arguments() -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXSensor(task_id="s", app_handle="", fail_fast="no", unknown_state_timeout=-1)
    msg = str(ei.value)
    assert "app_handle" in msg and "fail_fast" in msg and "unknown_state_timeout" in msg
    with pytest.raises(InvalidTaskArgumentError, match="exclusive"):
        TorchXSensor(task_id="s", app_handle="x://y/z", deferrable=True, mode="reschedule")


def test_a_handle_that_rendered_to_garbage_fails_at_once() -> None:
    """``xcom_pull`` found nothing: the template rendered "None" (retrying cannot fix it)."""
    r = FakeRunner()
    s = _sensor(r, "{{ ti.xcom_pull(task_ids='nope', key='app_handle') }}")
    s.app_handle = "None"  # what Airflow's rendering leaves
    with pytest.raises(AirflowFailException, match="'None'.*scheduler_backend"):
        s.poke(make_context())
    assert r.count("status") == 0


def test_a_literal_malformed_handle_is_rejected_at_construction() -> None:
    with pytest.raises(InvalidTaskArgumentError, match="app_handle.*'train-1'"):
        TorchXSensor(task_id="s", app_handle="train-1")
