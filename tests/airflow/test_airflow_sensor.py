"""TorchXSensor unit tests (real Runners over the shared fake scheduler, a fake context)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from airflow.sdk import PokeReturnValue
from airflow_versions import TaskDeferred
from support.airflow_fakes import Cluster, FakeStore, FakeTI, make_context

from torchx_airflow import TorchXSensor, TorchXTrigger
from torchx_airflow._airflow import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
)
from torchx_airflow._runtime import status_payload
from torchx_airflow.errors import InvalidTaskArgumentError
from torchx_airflow.sensor import RESCHEDULE_MIN_S
from torchx_core.runner.lifecycle import Observation, Phase
from torchx_core.specs import AppState, AppStatus


def _sensor(cluster: Cluster, handle: str, **kwargs: Any) -> TorchXSensor:
    return TorchXSensor(task_id="s", app_handle=handle, runner_factory=cluster.factory, **kwargs)


def test_poke_waits_then_returns_the_status(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    s = _sensor(cluster, h)
    assert s.poke(make_context()) is False
    cluster.set_state(h, AppState.SUCCEEDED)
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
    cluster: Cluster, state: AppState, kwargs: dict[str, Any], exc: type[BaseException]
) -> None:
    h = cluster.add("a", state)
    with pytest.raises(exc, match=f"TorchX app {h} ended {state.name}") as ei:
        _sensor(cluster, h, **kwargs).poke(make_context())
    assert type(ei.value) is exc
    assert cluster.job(h).cancelled == 0  # the sensor never cancels what it watches


def test_sensor_never_cancels_even_past_the_unknown_grace(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.UNKNOWN)
    with pytest.raises(AirflowException, match="stayed UNKNOWN"):
        _sensor(cluster, h, unknown_state_timeout=0).poke(make_context())
    assert cluster.job(h).cancelled == 0


def test_vanished_app_fails_retryably_after_the_grace(cluster: Cluster) -> None:
    s = _sensor(cluster, "fake://test/gone", unknown_state_timeout=3600)
    assert s.poke(make_context()) is False  # within the grace: not reported, maybe yet
    with pytest.raises(AirflowException, match="is gone") as ei:
        _sensor(cluster, "fake://test/gone", unknown_state_timeout=0).poke(make_context())
    assert type(ei.value) is AirflowException


def test_unknown_grace_survives_reschedules_through_the_state_store(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.UNKNOWN)
    store = FakeStore()
    s1 = _sensor(cluster, h, mode="reschedule", unknown_state_timeout=3600)
    assert s1.poke(make_context(store)) is False
    since = store.data["torchx_unknown_since"]
    # a new sensor instance (next reschedule) continues the same streak
    s2 = _sensor(cluster, h, mode="reschedule", unknown_state_timeout=3600)
    assert s2.poke(make_context(store)) is False
    assert store.data["torchx_unknown_since"] == since
    store.data["torchx_unknown_since"] = since - 7200  # the streak started two hours ago
    with pytest.raises(AirflowException, match="UNKNOWN"):
        _sensor(cluster, h, mode="reschedule", unknown_state_timeout=3600).poke(make_context(store))


def test_known_state_clears_the_unknown_streak(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.UNKNOWN)
    store = FakeStore()
    s = _sensor(cluster, h, mode="reschedule")
    s.poke(make_context(store))
    assert "torchx_unknown_since" in store.data
    cluster.set_state(h, AppState.RUNNING)
    s.poke(make_context(store))
    assert "torchx_unknown_since" not in store.data


def test_deferrable_pokes_once_then_defers_without_cancel_on_kill(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.RUNNING)
    s = _sensor(cluster, h, deferrable=True, timeout=120, poke_interval=2)
    with pytest.raises(TaskDeferred) as ei:
        s.execute(make_context())
    trigger = ei.value.trigger
    assert isinstance(trigger, TorchXTrigger)
    assert trigger.cancel_on_kill is False and trigger.poll_interval == 2
    assert trigger.timeout_at is not None and trigger.owner is None


def test_deferrable_returns_at_once_when_already_done(cluster: Cluster) -> None:
    h = cluster.add("a", AppState.SUCCEEDED)
    assert _sensor(cluster, h, deferrable=True).execute(make_context())["state"] == "SUCCEEDED"


def test_execute_complete(cluster: Cluster) -> None:
    s = _sensor(cluster, "fake://test/a-1", deferrable=True)
    ok = Observation(Phase.SUCCEEDED, AppStatus(AppState.SUCCEEDED), expired=False)
    event = {"event": "observed", "app_handle": "fake://test/a-1", "observation": ok.to_json()}
    assert s.execute_complete(make_context(), event)["state"] == "SUCCEEDED"
    with pytest.raises(AirflowSensorTimeout):
        s.execute_complete(make_context(), {"event": "timeout", "message": "late"})
    gone = Observation(Phase.VANISHED, None, expired=True).to_json()
    with pytest.raises(AirflowException, match="gone"):
        s.execute_complete(
            make_context(), {"event": "observed", "observation": gone, "message": "gone"}
        )


def test_execute_complete_reads_events_of_the_version_before(cluster: Cluster) -> None:
    """A sensor deferred before an upgrade resumes with the old trigger's event."""
    h = "fake://test/a-1"
    s = _sensor(cluster, h, deferrable=True)
    done = status_payload(h, AppStatus(AppState.SUCCEEDED))
    event = {"event": "terminal", "app_handle": h, "status": done, "message": ""}
    assert s.execute_complete(make_context(), event)["state"] == "SUCCEEDED"
    for kind in ("vanished", "unknown_timeout", "error"):
        old = {"event": kind, "app_handle": h, "status": None, "message": f"{kind}!"}
        with pytest.raises(AirflowException, match=f"{kind}!"):
            s.execute_complete(make_context(), old)
    with pytest.raises(AirflowSensorTimeout, match="late"):
        s.execute_complete(make_context(), {"event": "timeout", "status": done, "message": "late"})


def test_bad_arguments() -> None:
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXSensor(task_id="s", app_handle="", fail_fast="nope", unknown_state_timeout=-1)
    msg = str(ei.value)
    assert "app_handle" in msg and "fail_fast" in msg and "unknown_state_timeout" in msg
    with pytest.raises(InvalidTaskArgumentError, match="exclusive"):
        TorchXSensor(task_id="s", app_handle="x://y/z", deferrable=True, mode="reschedule")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, True, "soon"])
def test_unknown_state_timeout_is_refused_at_construction_as_the_operator_refuses_it(
    value: object,
) -> None:
    # issue 32: nan was accepted and the sensor failed at its first poke naming unknown_timeout
    with pytest.raises(InvalidTaskArgumentError) as ei:
        TorchXSensor(task_id="s", app_handle="x://y/z", unknown_state_timeout=value)  # type: ignore[arg-type]
    assert "unknown_state_timeout must be a finite number of seconds >= 0" in str(ei.value)


def test_a_handle_that_rendered_to_garbage_fails_at_once(cluster: Cluster) -> None:
    """``xcom_pull`` found nothing: the template rendered "None" (retrying cannot fix it)."""
    s = _sensor(cluster, "{{ ti.xcom_pull(task_ids='nope', key='app_handle') }}")
    s.app_handle = "None"  # what Airflow's rendering leaves
    with pytest.raises(AirflowFailException, match=r"'None'.*scheduler_backend"):
        s.poke(make_context())
    assert cluster.runners == []  # no scheduler was asked


def test_a_literal_malformed_handle_is_rejected_at_construction() -> None:
    with pytest.raises(InvalidTaskArgumentError, match=r"app_handle.*'train-1'"):
        TorchXSensor(task_id="s", app_handle="train-1")


class _ReschedulingTI(FakeTI):
    """A task instance in reschedule mode, never rescheduled before."""

    def get_first_reschedule_date(self, context: Any) -> None:
        return None


@pytest.mark.parametrize(("poke_interval", "at_least"), [(5, RESCHEDULE_MIN_S), (120, 120)])
def test_reschedule_mode_asks_for_no_poke_sooner_than_the_floor(
    cluster: Cluster, poke_interval: float, at_least: float
) -> None:
    """Issue 35 item 8: a short poke_interval in reschedule mode meets Airflow 3.3's stale-event
    race; the sensor asks for its next poke RESCHEDULE_MIN_S away at the earliest (a longer
    poke_interval is kept)."""
    h = cluster.add("a", AppState.RUNNING)
    s = _sensor(cluster, h, mode="reschedule", poke_interval=poke_interval, timeout=3600)
    before = datetime.now(timezone.utc)
    with pytest.raises(AirflowRescheduleException) as ei:
        s.execute(make_context(FakeStore(), _ReschedulingTI()))
    gap = (ei.value.reschedule_date - before).total_seconds()
    assert at_least <= gap < at_least + 60
