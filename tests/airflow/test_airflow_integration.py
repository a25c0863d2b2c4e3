"""The provider on a real Airflow 3 (SQLite, ``dag.test()``) running real local apps.

The DAG files live in ``tests/airflow/dags/`` (plus ``examples/airflow/torchx_dag.py``) and are
copied into the session's DAGs folder. Most DAGs run together in one interpreter (fixture
``dag_run``); the crash and SIGTERM tests drive their own processes.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import AirflowEnv, DagRunResult, parse_runs
from processes import app_processes, group_alive

from torchx_airflow.trigger import TorchXTrigger
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

DIGEST = re.compile(r"-[0-9a-f]{10}$")


# -- helpers -----------------------------------------------------------------------------------


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _apps_named(af: AirflowEnv, base: str) -> list[Any]:
    return [a for a in af.apps() if a.name.startswith(base + "-") and DIGEST.search(a.name)]


def _logs(af: AirflowEnv, handle: str, role: str, replica: int = 0) -> str:
    with af.runner() as r:
        return "".join(r.log_lines(handle, role, replica))


# -- the batch of DAGs -------------------------------------------------------------------------


def test_success_with_templated_multi_replica_app(af: AirflowEnv, dag_run: Any) -> None:
    run: DagRunResult = dag_run("tx_success")
    ti = run.ti("train")
    assert ti["state"] == "success" and ti["try_number"] == 1
    result = ti["xcom"]["return_value"]
    handle = ti["xcom"]["app_handle"]
    assert result["app_handle"] == handle and result["state"] == "SUCCEEDED"
    assert [r["state"] for r in result["roles"][0]["replicas"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert ti["xcom"]["ui_url"] == result["ui_url"] and result["ui_url"]
    # the app is named from the task identity (same name on every try)
    (app,) = [a for a in af.apps() if a.app_handle == handle]
    assert app.name.startswith("train-") and DIGEST.search(app.name)
    # Jinja rendered inside the nested AppDef/Role args, on both replicas
    for replica in (0, 1):
        assert f"run={run.report['run_id']} dag=tx_success" in _logs(af, handle, "trainer", replica)
    # replica logs were streamed into the task log while waiting on the worker
    assert f"[trainer/1] run={run.report['run_id']}" in run.output


def test_templated_component_args(af: AirflowEnv, dag_run: Any) -> None:
    ti = dag_run("tx_success").ti("echo_component")
    assert ti["state"] == "success"
    handle = ti["xcom"]["app_handle"]
    assert "hello from tx_success/echo_component" in _logs(af, handle, "echo")


def test_mapped_tasks_get_one_app_each(af: AirflowEnv, dag_run: Any) -> None:
    run = dag_run("tx_success")
    handles = [run.ti(f"mapped[{i}]")["xcom"]["app_handle"] for i in (0, 1)]
    assert {run.ti(f"mapped[{i}]")["state"] for i in (0, 1)} == {"success"}
    names = {a.name for a in af.apps() if a.app_handle in handles}
    assert len(names) == 2  # map_index is part of the task identity
    assert "first" in _logs(af, handles[0], "echo") and "second" in _logs(af, handles[1], "echo")


@pytest.mark.parametrize("mode", ["poke", "reschedule", "deferrable"])
def test_sensor_waits_for_the_app(af: AirflowEnv, dag_run: Any, mode: str) -> None:
    run = dag_run("tx_sensor")
    submit, watch = run.ti(f"submit_{mode}"), run.ti(f"watch_{mode}")
    assert submit["state"] == "success"
    assert submit["xcom"]["return_value"]["state"] in ("SUBMITTED", "PENDING", "RUNNING")
    assert watch["state"] == "success"
    handle = submit["xcom"]["app_handle"]
    assert watch["xcom"]["return_value"]["app_handle"] == handle
    assert watch["xcom"]["return_value"]["state"] == "SUCCEEDED"
    assert (af.work / f"release_watch_{mode}").exists()  # a poke saw the app still running
    (app,) = [a for a in af.apps() if a.app_handle == handle]
    assert app.state == AppState.SUCCEEDED  # the sensor never cancels what it watches


def test_sensor_modes_free_the_worker(af: AirflowEnv, dag_run: Any) -> None:
    out = dag_run("tx_sensor").output
    assert "up_for_reschedule" in out.lower()  # reschedule mode released the worker
    assert "running trigger in line" in out  # deferrable mode waited in the (inline) triggerer


def test_failure_is_retried_by_airflow_and_resubmitted(af: AirflowEnv, dag_run: Any) -> None:
    run = dag_run("tx_failure")
    flaky = run.ti("flaky")
    assert flaky["state"] == "failed" and flaky["try_number"] == 3
    assert (af.work / "flaky_starts").read_text().count("start") == 3
    apps = _apps_named(af, "flaky")
    assert len(apps) == 3 and {a.state for a in apps} == {AppState.FAILED}
    assert len({a.name for a in apps}) == 1  # one deterministic name for all tries
    assert "ended FAILED" in run.output
    assert "boom" in run.output  # replica stderr streamed into the task log


def test_fail_fast_fails_without_retries(af: AirflowEnv, dag_run: Any) -> None:
    fatal = dag_run("tx_failure").ti("fatal")
    assert fatal["state"] == "failed" and fatal["try_number"] == 1
    assert (af.work / "fatal_starts").read_text().count("start") == 1


def test_deferrable_success_gives_every_line_once(af: AirflowEnv, dag_run: Any) -> None:
    run = dag_run("tx_deferrable")
    ok = run.ti("ok")
    assert ok["state"] == "success"
    assert ok["xcom"]["return_value"]["state"] == "SUCCEEDED"
    assert ok["xcom"]["app_handle"] == ok["xcom"]["return_value"]["app_handle"]
    assert "Deferring: the triggerer waits for TorchX app" in run.output
    assert (af.work / "release_ok").exists()
    # every line reaches the log. dag.test() replaces the deferral's kwargs by the event
    # (airflow/sdk/definitions/dag.py), so the lines given before deferring are not known on
    # resume and a tail is printed; a real triggerer keeps them: exactly once is checked on the
    # deployment (test_airflow_deployment.py::test_every_line_of_a_short_app_reaches_the_log_once)
    for i in range(1, 6):
        assert f"[r/0] deferred-line-{i}" in run.output, run.output


def test_deferrable_failure_fails_with_the_structured_error(af: AirflowEnv, dag_run: Any) -> None:
    run = dag_run("tx_deferrable")
    bad = run.ti("bad")
    assert bad["state"] == "failed"
    handle = bad["xcom"]["app_handle"]
    with af.runner() as r:
        status = r.status(handle)
    assert status is not None and status.state == AppState.FAILED
    assert f"TorchX app {handle} ended FAILED" in run.output
    assert "[r/0] about-to-fail" in run.output  # the tail of the failed replica


@pytest.mark.parametrize(
    ("task_id", "name"), [("timeout_worker", "kworker"), ("timeout_deferred", "kdeferred")]
)
def test_execution_timeout_cancels_the_app(
    af: AirflowEnv, dag_run: Any, task_id: str, name: str
) -> None:
    ti = dag_run("tx_kill").ti(task_id)
    assert ti["state"] == "failed"
    (app,) = _apps_named(af, name)
    assert app.state == AppState.CANCELLED
    assert app_processes(app.app_handle) == []
    # the task waited for the replica's shell to start before the timeout (tx_kill.py)
    pid_file = af.work / f"{name}.pid"
    assert pid_file.exists(), f"the app {name} never started before the timeout"
    assert group_alive(int(pid_file.read_text())) == []


def test_example_dag_runs(af: AirflowEnv, dag_run: Any) -> None:
    run = dag_run("torchx_example")
    assert run.report["dag_run_state"] == "success"
    greet, train, report = run.ti("greet"), run.ti("train"), run.ti("report")
    assert {greet["state"], train["state"], report["state"]} == {"success"}
    greeting = f"hello from torchx_example in {run.report['run_id']}"
    assert greeting in _logs(af, greet["xcom"]["app_handle"], "echo")
    handle = train["xcom"]["app_handle"]
    assert report["xcom"]["return_value"]["app_handle"] == handle
    replicas = train["xcom"]["return_value"]["roles"][0]["replicas"]
    assert [r["state"] for r in replicas] == ["SUCCEEDED", "SUCCEEDED"]
    assert "replica 1 of run manual__" in _logs(af, handle, "trainer", 1)


# -- crash, SIGTERM, trigger on_kill -----------------------------------------------------------


def _stored_handle(af: AirflowEnv, dag_id: str) -> str | None:
    con = sqlite3.connect(af.home / "airflow.db", timeout=5)
    try:
        rows = con.execute(
            "SELECT value FROM task_state_store WHERE dag_id = ? AND key = ?",
            (dag_id, "torchx_app_handle"),
        ).fetchall()
    except sqlite3.OperationalError:  # table busy or not there yet
        return None
    finally:
        con.close()
    return rows[0][0].strip('"') if rows else None


class _LineReader:
    """Collects a process's output lines from a thread (so the test can wait for one)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._t.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def join(self) -> None:
        self._t.join(60)


def test_worker_crash_reattaches_without_a_second_submission(af: AirflowEnv) -> None:
    logical = "2024-06-01T00:00:00+00:00"
    starts = af.work / "crash_starts"
    first = af.start_dags("tx_crash", extra=("--logical-date", logical))
    try:
        handle = _wait_for(lambda: _stored_handle(af, "tx_crash"), 300, "the stored handle")
        _wait_for(lambda: starts.exists() and "started" in starts.read_text(), 300, "the app")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-wait
        af.collect(first)
    assert starts.read_text().count("started") == 1

    # The task runs again against the same DagRun (what the retry after a crash does).
    second = af.start(["tasks", "test", "tx_crash", "train", f"manual__{logical}"])
    reader = _LineReader(second)
    try:
        _wait_for(
            lambda: (
                "Reconnecting to existing job" in reader.text()
                or "Submitted TorchX app" in reader.text()
            ),
            300,
            "the second try to attach or submit",
        )
        (af.work / "crash_release").touch()
        second.wait(300)
    finally:
        (af.work / "crash_release").touch()  # let the app finish either way
        if second.poll() is None:  # never leave the task process behind
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
        reader.join()
    out = reader.text()
    assert "Reconnecting to existing job" in out and "Submitted TorchX app" not in out
    assert f"TorchX app {handle} SUCCEEDED" in out
    assert starts.read_text().count("started") == 1
    apps = _apps_named(af, "crashy")
    assert [a.app_handle for a in apps] == [handle]
    assert apps[0].state == AppState.SUCCEEDED


def test_sigterm_runs_on_kill_which_cancels_the_app(af: AirflowEnv) -> None:
    proc = af.start_dags("tx_sigterm")
    pid_files = [af.work / f"sigterm.{i}.pid" for i in (0, 1)]
    try:
        _wait_for(
            lambda: all(p.exists() and p.read_text().strip() for p in pid_files),
            300,
            "both replicas to start",
        )
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # what the supervisor sends on kill
    run = parse_runs(af.collect(proc))["tx_sigterm"]
    assert run.ti("train")["state"] == "failed"
    # (cancelled by handle; or by name if the signal came while run() had not returned yet)
    assert "Task killed: cancelling TorchX app" in run.output or "Task killed while" in run.output
    (app,) = _apps_named(af, "sigterm")
    assert app.state == AppState.CANCELLED
    assert app_processes(app.app_handle) == []
    for p in pid_files:
        assert group_alive(int(p.read_text())) == []


def _run_in_triggerer(handle: str, *, user_action: bool) -> None:
    """Runs a TorchXTrigger on ``handle`` in Airflow's own triggerer loop (``TriggerRunner``,
    rebuilt from ``serialize()`` as the triggerer does), then stops it: as on triggerer shutdown or
    redistribution (the task is cancelled), or as ``cancel_triggers`` does when a user marks the
    deferred task failed/success or clears it (which runs ``on_kill``)."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    runner = TriggerRunner()
    classpath, kwargs = TorchXTrigger(app_handle=handle, poll_interval=0.1).serialize()
    trigger = runner.get_trigger_by_classpath(classpath)(**kwargs)
    trigger.task_instance = None  # type: ignore[assignment]
    polled = threading.Event()
    poll = trigger._lifecycle

    def lifecycle(r: Any) -> Any:  # records the trigger's first status read of the app
        life = poll(r)
        read = life.apoll

        async def apoll(h: str, **kw: Any) -> Any:
            obs = await read(h, **kw)
            polled.set()
            return obs

        life.apoll = apoll
        return life

    trigger._lifecycle = lifecycle  # type: ignore[method-assign]

    async def go() -> None:
        task = asyncio.create_task(runner.run_trigger(1, trigger))
        runner.triggers[1] = {"task": task, "name": "torchx", "events": 0}  # type: ignore[typeddict-item]
        # the trigger is polling the running app (it read its status at least once)
        assert await asyncio.to_thread(polled.wait, 60)
        if user_action:
            runner.to_cancel.append(1)
            await runner.cancel_triggers()
        else:
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert runner.triggers[1]["events"] == 0

    asyncio.run(go())


def test_triggerer_stop_keeps_and_user_kill_cancels_a_real_app(af: AirflowEnv) -> None:
    pid_file = af.work / "trigger.pid"
    app = AppDef(
        name="trigger-kill",
        roles=[
            Role(
                name="r",
                image=str(af.work),
                entrypoint="sh",
                args=["-c", f"echo $$$$ > {pid_file}; sleep 300 & wait"],
            )
        ],
    )
    with af.runner() as r:
        handle = r.run(app, "local_cwd")
        _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 60, "the app")
        assert app_processes(handle)  # the scan below sees the app's processes

        _run_in_triggerer(handle, user_action=False)  # run() cancelled, cleanup() ran
        status = r.status(handle)
        assert status is not None and status.state == AppState.RUNNING

        _run_in_triggerer(handle, user_action=True)  # a user killed the deferred task
        status = r.status(handle)
        assert status is not None and status.state == AppState.CANCELLED
    assert group_alive(int(pid_file.read_text())) == []
    assert app_processes(handle) == []


def test_airflow_lists_the_provider(af: AirflowEnv) -> None:
    import json

    airflow_bin = str(Path(sys.executable).with_name("airflow"))
    out = subprocess.run(
        [airflow_bin, "providers", "list", "-o", "json"],
        env=af.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    providers = json.loads(out[out.index("[") :])
    ours = [p for p in providers if p["package_name"] == "torchx-suite"]
    assert len(ours) == 1 and "TorchX" in ours[0]["description"]
