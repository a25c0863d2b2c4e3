"""The provider on a real Airflow deployment: scheduler (LocalExecutor), dag-processor, triggerer
and api-server of ``scripts/services/airflow``, driven through the REST API as a user drives it.

DAGs: ``tests/airflow/dags/live_dags.py``. The apps run on the local scheduler under the
deployment's ``TORCHX_LOCAL_ROOT``; every test checks that no app it started is left running.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from processes import app_processes
from support.airflow_deployment import AirflowDeployment, no_leftover_apps, wait_until

from torchx_core.specs import AppState

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

#: how long an app may take to react to a cancel (SIGTERM, then SIGKILL after its grace)
CANCEL_TIMEOUT_S = 120
#: how long the triggerer may take to act on a user's clear (a busy machine delays its loop)
TRIGGERER_ACTS_S = 600
#: the deployment's ``[triggerer] on_kill_timeout`` (scripts/services/airflow/env.sh)
ON_KILL_TIMEOUT_S = 120


class Live:
    """One test's view of the deployment: REST calls plus the apps of this test."""

    def __init__(self, dep: AirflowDeployment) -> None:
        self.dep = dep
        self.work = dep.work

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dep, name)

    def runner(self) -> Any:
        from torchx_core.runner import get_runner

        return get_runner()

    def apps(self) -> list[Any]:
        with self.runner() as r:
            return r.list("local_cwd")

    def status(self, handle: str) -> Any:
        with self.runner() as r:
            return r.status(handle)

    def apps_named_like(self, handle: str) -> list[Any]:
        """Every app with the same (deterministic) name as the app ``handle``."""
        apps = self.apps()
        (mine,) = [a for a in apps if a.app_handle == handle]
        return [a for a in apps if a.name == mine.name]

    def starts(self, run_id: str, name: str) -> int:
        path = self.work / f"{run_id}.{name}.starts"
        return path.read_text().count("start") if path.exists() else 0

    def release(self, run_id: str) -> None:
        (self.work / f"{run_id}.release").touch()


@pytest.fixture
def live(airflow_deployment: AirflowDeployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(airflow_deployment.local_root))
    with no_leftover_apps(airflow_deployment):
        yield Live(airflow_deployment)


def _handle(live: Live, dag_id: str, run_id: str, task_id: str = "train") -> str:
    return wait_until(
        lambda: live.xcom(dag_id, run_id, task_id, "app_handle"),
        120,
        f"{dag_id}.{task_id} to push its app_handle",
    )


def _wait_started(live: Live, run_id: str, name: str) -> None:
    wait_until(
        lambda: (live.work / f"{run_id}.{name}.pid").exists(), 120, f"the app {name} to start"
    )


def _wait_cancelled(live: Live, handle: str) -> None:
    wait_until(
        lambda: getattr(live.status(handle), "state", None) == AppState.CANCELLED,
        CANCEL_TIMEOUT_S,
        f"{handle} to be CANCELLED",
    )
    wait_until(
        lambda: app_processes(handle) == [], CANCEL_TIMEOUT_S, f"every process of {handle} to exit"
    )


# -- scenarios ---------------------------------------------------------------------------------


def test_deferrable_success(live: Live) -> None:
    dag = "live_defer_ok"
    run = live.trigger(dag)
    live.wait_deferred(dag, run)
    handle = _handle(live, dag, run)
    live.release(run)
    ti = live.wait_ti(dag, run, "train", {"success", "failed"})
    log = live.task_log(dag, run, "train", 1)
    assert ti["state"] == "success", log
    result = live.xcom(dag, run, "train", "return_value")
    assert result["app_handle"] == handle and result["state"] == "SUCCEEDED"
    assert [a.app_handle for a in live.apps_named_like(handle)] == [handle]
    assert live.starts(run, "deferok") == 1
    assert "Deferring: the triggerer waits for TorchX app" in log
    # every line once: given after resuming (the task deferred at once), no tail after them
    lines = re.findall(r"\[r/0\] (deferok-\S+)", log)
    assert lines == [f"deferok-line-{i}" for i in range(1, 6)] + ["deferok-done"], log


def test_a_deferred_task_shows_the_apps_output_while_it_runs(live: Live) -> None:
    """Issue 35 item 7: the app prints only once the task deferred; the triggerer streams those
    lines into the task's log while the task is still deferred (they came all at once at
    resume, stamped with the resume time), and the resumed task gives none of them again."""
    dag = "live_defer_stream"
    run = live.trigger(dag)
    live.wait_deferred(dag, run)
    _wait_started(live, run, "streamed")
    (live.work / f"{run}.go").touch()  # the app prints now, after the deferral
    wait_until(
        lambda: "[r/0] streamed-live-3" in live.task_log(dag, run, "train", 1),
        120,
        "the app's output in the log of the deferred task",
    )
    assert live.ti(dag, run, "train")["state"] == "deferred"
    live.release(run)
    ti = live.wait_ti(dag, run, "train", {"success", "failed"})
    log = live.task_log(dag, run, "train", 1)
    assert ti["state"] == "success", log
    lines = re.findall(r"\[r/0\] (streamed-\S+)", log)
    assert lines == [f"streamed-live-{i}" for i in (1, 2, 3)] + ["streamed-done"], log


def test_mark_failed_of_a_deferred_task_cancels_the_app(live: Live) -> None:
    dag = "live_mark_failed"
    run = live.trigger(dag)
    live.wait_deferred(dag, run)
    handle = _handle(live, dag, run)
    _wait_started(live, run, "markfailed-forever")
    assert app_processes(handle)
    live.set_ti_state(dag, run, "train", "failed")
    _wait_cancelled(live, handle)
    assert live.ti(dag, run, "train")["state"] == "failed"
    assert len(live.apps_named_like(handle)) == 1


def test_clear_of_a_deferred_task_never_cancels_the_adopted_app(live: Live) -> None:
    """Fault 1: the new try adopts the running app, then the cleared try's trigger runs on_kill
    (``AdoptionAwaitingTrigger`` makes that order certain); on_kill must leave the app alone and
    the re-run finish on it (one app).

    The waits follow the events, not one budget for all of them: first the triggerer acts on the
    clear (as slow as the machine is loaded), then on_kill decides (bounded by the deployment's
    ``[triggerer] on_kill_timeout``). Whatever happens, the app is released and, if still
    running, cancelled before the test ends."""
    dag = "live_clear"
    run = live.trigger(dag)
    first = None
    try:
        live.wait_deferred(dag, run)
        first = _handle(live, dag, run)
        _wait_started(live, run, "cleared")
        live.clear_ti(dag, run, "train")
        # 1. the triggerer cancels the old trigger and invokes its on_kill (its log is try 1's)
        wait_until(
            lambda: "invoking on_kill" in live.task_log(dag, run, "train", 1),
            TRIGGERER_ACTS_S,
            "the triggerer to invoke the old trigger's on_kill",
        )
        # 2. on_kill decides within the triggerer's on_kill_timeout (it waits for the adoption)
        decided = wait_until(
            lambda: (
                (log := live.task_log(dag, run, "train", 1))
                and ("Did not cancel TorchX app" in log or "Cancelled TorchX app" in log)
                and log
            ),
            ON_KILL_TIMEOUT_S + 60,
            "the old trigger's on_kill to decide",
        )
        assert "Did not cancel TorchX app" in decided, decided
        assert "Cancelled TorchX app" not in decided
        second = live.wait_ti(dag, run, "train", {"deferred", "failed", "success"}, min_try=2)
        if second["state"] == "deferred":
            live.wait_deferred(dag, run, try_number=2)
        live.release(run)
        ti = live.wait_ti(dag, run, "train", {"success", "failed"}, min_try=2)
        log = live.task_log(dag, run, "train", ti["try_number"])
        assert ti["state"] == "success", log
        assert "Reattaching to TorchX app" in log
        final = live.xcom(dag, run, "train", "return_value")
        assert final["state"] == "SUCCEEDED" and final["app_handle"] == first
        assert [a.app_handle for a in live.apps_named_like(first)] == [first]
        assert live.starts(run, "cleared") == 1
    finally:
        live.release(run)  # the app ends by itself; cancel it if it is still running
        if first is not None:
            _end_app(live, first)


def _end_app(live: Live, handle: str) -> None:
    """Ends an app a failed test may have left: waits for it to end after the release, else
    cancels it."""
    from torchx_core.specs import is_terminal

    try:
        wait_until(
            lambda: (st := live.status(handle)) is None or is_terminal(st.state),
            60,
            f"{handle} to end after its release",
        )
    except AssertionError:
        with live.runner() as r:
            r.cancel(handle)


def test_sigkill_of_the_task_process_retries_onto_the_same_app(live: Live) -> None:
    dag = "live_sigkill"
    run = live.trigger(dag)
    pid_file = live.work / f"{run}.train.try1.pid"
    wait_until(pid_file.exists, 180, "the first try to start")
    handle = _handle(live, dag, run)
    _wait_started(live, run, "sigkilled")
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    live.wait_ti(dag, run, "train", {"running"}, min_try=2)
    wait_until(
        lambda: "Reconnecting to existing job" in live.task_log(dag, run, "train", 2),
        180,
        "the second try to reattach",
    )
    live.release(run)
    ti = live.wait_ti(dag, run, "train", {"success", "failed"}, min_try=2)
    log = live.task_log(dag, run, "train", 2)
    assert ti["state"] == "success" and ti["try_number"] == 2, log
    assert live.xcom(dag, run, "train", "return_value")["app_handle"] == handle
    assert [a.app_handle for a in live.apps_named_like(handle)] == [handle]
    assert live.starts(run, "sigkilled") == 1


@pytest.mark.parametrize(
    ("task_id", "name"),
    [
        ("on_worker", "timeout-worker-forever"),
        ("deferred", "timeout-deferred-forever"),
    ],
)
def test_execution_timeout_cancels_the_app(live: Live, task_id: str, name: str) -> None:
    dag = "live_timeout"
    run = live.trigger(dag)
    handle = _handle(live, dag, run, task_id)
    _wait_started(live, run, name)
    ti = live.wait_ti(dag, run, task_id, {"success", "failed"})
    assert ti["state"] == "failed"
    _wait_cancelled(live, handle)
    assert len(live.apps_named_like(handle)) == 1


# -- issue 22: logs, short deferrable apps, configuration errors ------------------------------


def _replica_lines(log: str, prefix: str) -> list[str]:
    """The ``[r/0] <prefix>-NNN`` lines of a task log, in order."""
    return re.findall(rf"\[r/0\] ({re.escape(prefix)}-\d{{3}})\b", log)


def test_every_line_of_a_short_app_reaches_the_log_once(live: Live) -> None:
    """Item 1: an app printing 100 numbered lines and exiting at once, on a worker and under a
    deferrable task; and one deferred half-way (lines streamed, then the rest after resuming)."""
    dag = "live_hundred"
    run = live.trigger(dag)
    live.wait_deferred(dag, run, "split")
    live.release(run)
    expected = {
        "on_worker": "hundred-worker",
        "deferrable": "hundred-defer",
        "split": "hundred-split",
    }
    for task, prefix in expected.items():
        ti = live.wait_ti(dag, run, task, {"success", "failed"})
        log = live.task_log(dag, run, task, 1)
        assert ti["state"] == "success", log
        assert _replica_lines(log, prefix) == [f"{prefix}-{i:03d}" for i in range(100)], log
    assert "Deferring" not in live.task_log(dag, run, "deferrable", 1)  # it ended first


def test_a_short_deferrable_app_succeeds_without_deferring(live: Live) -> None:
    """Item 4: a 2 s app under a deferrable task ends within ``defer_after``: SUCCESS."""
    dag = "live_short_deferrable"
    run = live.trigger(dag)
    ti = live.wait_ti(dag, run, "train", {"success", "failed"})
    log = live.task_log(dag, run, "train", 1)
    assert ti["state"] == "success" and ti["try_number"] == 1, log
    assert "[r/0] short2s-done" in log and "Deferring" not in log


def test_configuration_errors_fail_the_first_try_without_retrying(live: Live) -> None:
    """Item 3 (and item 2 with `airflow connections test`): retries=1, yet one try each."""
    live.cli("connections", "delete", "torchx_badcfg", check=False)
    live.cli(
        "connections",
        "add",
        "torchx_badcfg",
        "--conn-type",
        "torchx",
        "--conn-extra",
        json.dumps({"scheduler": "local_cwd", "cfg": {"grace_period": "soon"}}),
    )
    tested = live.cli("connections", "test", "torchx_badcfg", check=False)
    out = tested.stdout + tested.stderr
    assert "grace_period, must be of type: float, but was: 'soon'" in out, out
    dag = "live_bad_config"
    run = live.trigger(dag)
    says = {
        "bad_option": "unknown run option 'grace_periodd'",
        "bad_conn_option": "connection 'torchx_badcfg' (scheduler 'local_cwd'",
        "missing_conn": "no connection 'torchx_absent'",
    }
    for task, text in says.items():
        ti = live.wait_ti(dag, run, task, {"failed", "up_for_retry", "success"})
        log = live.task_log(dag, run, task, 1)
        assert ti["state"] == "failed" and ti["try_number"] == 1, (ti, log)
        assert "AirflowFailException" in log and text in log, log


# -- issue 35: the sensor in reschedule mode ---------------------------------------------------


def test_a_reschedule_mode_sensor_with_a_short_poke_interval_succeeds(live: Live) -> None:
    """Item 8: ``poke_interval=5`` in reschedule mode; three pokes see the app running (each
    one a reschedule, where Airflow 3.3's stale-event race failed the sensor), then it ends."""
    dag = "live_sensor_reschedule"
    run = live.trigger(dag)
    handle = _handle(live, dag, run, "submit")

    def pokes() -> int:
        return live.task_log(dag, run, "watch", 1).count(f"TorchX app {handle} is RUNNING")

    def three_pokes_or_ended() -> bool:
        return pokes() >= 3 or live.ti(dag, run, "watch")["state"] in ("success", "failed")

    wait_until(three_pokes_or_ended, 600, "three pokes of the sensor")
    state = live.ti(dag, run, "watch")["state"]
    assert state not in ("success", "failed"), live.task_log(dag, run, "watch", 1)
    live.release(run)
    ti = live.wait_ti(dag, run, "watch", {"success", "failed"}, timeout=600)
    log = live.task_log(dag, run, "watch", 1)
    assert ti["state"] == "success" and ti["try_number"] == 1, log
    assert live.xcom(dag, run, "watch", "return_value")["state"] == "SUCCEEDED"
