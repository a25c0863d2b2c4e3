"""torchx_prefect on a real Prefect deployment: a ``prefect server`` and flows served by a
``prefect.serve`` runner in a background process, each flow run in its own process.

Scenarios (issue 13): cancelling a flow run through the API cancels its app; a task timeout
cancels its app; a flow-run process SIGKILLed while its apps run, then re-run, reattaches to
those apps (two calls with the same AppDef stay two apps, and no third is submitted). Each test
checks that no app process is left behind.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prefect_fixtures import PrefectAPI, ServedProcess, wait_for_deployment
from prefect_helpers import (
    artifacts_of,
    flow_run_logs,
    task_runs,
    wait_no_app_processes,
    wait_terminal,
)

from torchx_core.runner import get_runner
from torchx_core.specs import AppState, is_terminal

pytestmark = [pytest.mark.integration, pytest.mark.prefect]

HERE = Path(__file__).resolve().parent
WAIT = 300.0
"""Bound of every wait on the deployment (generous: 2 loaded cores)."""


@dataclass
class Deployment:
    """The served flows (``served_flows.py``) and the local-scheduler root their apps run under."""

    served: ServedProcess
    root: Path
    ids: dict[str, Any]

    def run(self, flow_name: str, **parameters: Any) -> Any:
        """Creates a flow run of ``<flow_name>/served``; returns its id."""
        from prefect import get_client

        with get_client(sync_client=True) as client:
            return client.create_flow_run_from_deployment(
                self.ids[flow_name], parameters=parameters
            ).id


@pytest.fixture(scope="module")
def deployment(
    prefect_server: PrefectAPI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """``served_flows.py`` served in the background (stopped by PID at the end)."""
    import served_flows

    work = tmp_path_factory.mktemp("prefect-served")
    root = work / "torchx-local"
    root.mkdir()
    env = {
        **os.environ,
        **prefect_server.env,
        "TORCHX_LOCAL_ROOT": str(root),
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    served = ServedProcess(HERE / "served_flows.py", env, work / "serve.log").start()
    try:
        ids = {
            f.name: wait_for_deployment(served, f"{f.name}/{served_flows.DEPLOYMENT}").id
            for f in served_flows.FLOWS
        }
        yield Deployment(served, root, ids)
    finally:
        served.stop()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TORCHX_LOCAL_ROOT", str(root))
            with get_runner() as runner:
                for app in runner.list("local_cwd"):  # any app a failed test left running
                    if not is_terminal(app.state):
                        runner.cancel(app.app_handle)


@pytest.fixture
def served(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    """The deployment, with this process reading apps under its local-scheduler root; asserts
    the test left no app process behind."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(deployment.root))
    yield deployment
    assert wait_no_app_processes(deployment.root) == []
    assert deployment.served.alive(), deployment.served.output()


# ---------------------------------------------------------------------------------------------
# helpers


def read_flow_run(flow_run_id: Any) -> Any:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id)


def wait_flow_state(flow_run_id: Any, done: Any, what: str, timeout: float = WAIT) -> Any:
    """Waits (bounded) until ``done(state)`` holds for the flow run's state; returns the run."""
    deadline = time.monotonic() + timeout
    while True:
        run = read_flow_run(flow_run_id)
        if run.state is not None and done(run.state):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"flow run {flow_run_id} not {what} after {timeout}s: {run.state}")
        time.sleep(0.3)


def apps_named(prefix: str) -> list[Any]:
    with get_runner() as runner:
        return [a for a in runner.list("local_cwd") if a.app_id.startswith(prefix)]


def wait_running_apps(prefix: str, count: int, timeout: float = WAIT) -> list[Any]:
    """Waits (bounded) until exactly ``count`` apps named ``prefix*`` exist and all RUN."""
    deadline = time.monotonic() + timeout
    while True:
        apps = apps_named(prefix)
        if len(apps) == count and all(AppState(a.state) == AppState.RUNNING for a in apps):
            return apps
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} running {prefix}* apps, found {apps}")
        time.sleep(0.3)


def wait_pid(pid_file: Path, timeout: float = WAIT) -> int:
    deadline = time.monotonic() + timeout
    while not pid_file.exists() or not pid_file.read_text().strip():
        if time.monotonic() > deadline:
            raise AssertionError(f"the flow run never wrote {pid_file}")
        time.sleep(0.2)
    return int(pid_file.read_text())


def wait_gone(pid: int, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        stat = (
            Path(f"/proc/{pid}/stat").read_text(errors="replace")
            if Path(f"/proc/{pid}/stat").exists()
            else ""
        )
        if stat and stat.rsplit(")", 1)[1].split()[0] == "Z":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still alive after {timeout}s")
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# scenarios


@pytest.mark.parametrize("flow_name", ["torchx-sleeper", "torchx-sleeper-async"])
def test_cancel_flow_run_from_the_api_cancels_the_app(
    served: Deployment, tmp_path: Path, flow_name: str
) -> None:
    from prefect import get_client
    from prefect.states import Cancelling

    name = f"cancel{uuid.uuid4().hex[:6]}"
    fr_id = served.run(flow_name, name=name, pid_file=str(tmp_path / "pid"))
    (app,) = wait_running_apps(name, 1)
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(fr_id, Cancelling(), force=True)
    run = wait_flow_state(fr_id, lambda s: s.is_final(), "final")
    assert run.state.is_cancelled(), run.state
    assert wait_terminal(app.app_handle) == AppState.CANCELLED
    assert [AppState(a.state) for a in apps_named(name)] == [AppState.CANCELLED]


def test_task_timeout_cancels_the_app(served: Deployment, tmp_path: Path) -> None:
    name = f"timeout{uuid.uuid4().hex[:6]}"
    fr_id = served.run(
        "torchx-sleeper", name=name, pid_file=str(tmp_path / "pid"), timeout_seconds=25
    )
    run = wait_flow_state(fr_id, lambda s: s.is_final(), "final")
    assert run.state.is_failed(), run.state
    (tr,) = task_runs(fr_id)
    assert tr.state.name == "TimedOut", tr.state
    (app,) = apps_named(name)  # submitted before the timeout, then cancelled by the task
    assert wait_terminal(app.app_handle) == AppState.CANCELLED


@pytest.mark.parametrize("flow_name", ["torchx-twin-waiters", "torchx-twin-waiters-async"])
def test_rerun_after_sigkill_reattaches_to_the_running_apps(
    served: Deployment, tmp_path: Path, flow_name: str
) -> None:
    """Fault 2 of issue 13. Two calls of the task with the same AppDef run two apps; the
    flow-run process is SIGKILLed (no hook, no cleanup runs in it) and Prefect marks the run
    Crashed, the apps keep running; the flow run is re-run (what the UI's "Retry" does: an
    AwaitingRetry state); the re-run reattaches to both apps, submits none, logs each app's
    lines from the start once (issue 22: also what the app printed before the reattach), and
    completes when the apps finish."""
    from prefect import get_client
    from prefect.states import AwaitingRetry

    name = f"rerun{uuid.uuid4().hex[:6]}"
    release, pid_file = tmp_path / "release", tmp_path / "pid"
    fr_id = served.run(flow_name, name=name, release=str(release), pid_file=str(pid_file))
    first = wait_running_apps(name, 2)
    # both apps have printed their first line (each app's log file is on disk)
    with get_runner() as runner:
        for app in first:
            deadline = time.monotonic() + WAIT
            while "before release" not in "".join(runner.log_lines(app.app_handle, "worker", 0)):
                assert time.monotonic() < deadline, f"{app.app_handle} printed nothing"
                time.sleep(0.2)

    pid = wait_pid(pid_file)
    pid_file.unlink()
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid)
    crashed = wait_flow_state(fr_id, lambda s: s.is_final(), "final after the SIGKILL")
    assert crashed.state.is_crashed(), crashed.state
    first_task_runs = {tr.id for tr in task_runs(fr_id)}
    assert [AppState(a.state) for a in apps_named(name)] == [AppState.RUNNING] * 2

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(fr_id, AwaitingRetry(), force=True)
    wait_pid(pid_file)  # the re-run started in a new flow-run process
    # each of the re-run's task runs has attached and follows its app's log: it published the
    # app's UI link (on its first status read, after the log follower started)
    deadline = time.monotonic() + WAIT
    while (
        len(
            [
                tr
                for tr in task_runs(fr_id)
                if tr.id not in first_task_runs
                and any(a.key.endswith("-ui") for a in artifacts_of(tr.id))
            ]
        )
        < 2
    ):
        assert time.monotonic() < deadline, "the re-run's two task runs never followed their apps"
        time.sleep(0.3)
    assert len(apps_named(name)) == 2, f"the re-run submitted again: {apps_named(name)}"
    release.touch()

    run = wait_flow_state(fr_id, lambda s: s.is_final(), "final after the re-run")
    assert run.state.is_completed(), run.state
    apps = apps_named(name)
    assert sorted(AppState(a.state) for a in apps) == [AppState.SUCCEEDED] * 2, apps
    assert {a.app_handle for a in apps} == {a.app_handle for a in first}

    rerun_task_runs = [tr for tr in task_runs(fr_id) if tr.id not in first_task_runs]
    assert len(rerun_task_runs) == 2 and all(tr.state.is_completed() for tr in rerun_task_runs)
    logs = flow_run_logs(fr_id, "[worker/0] after release", "Reattached", "early line 5 of 5")
    rerun_logs = [m for m, tr in logs_by_task_run(fr_id) if tr in {t.id for t in rerun_task_runs}]
    assert sum("Reattached" in m for m in rerun_logs) == 2, rerun_logs
    # each re-run task run logs its app's lines from the start, each once: the early numbered
    # lines printed before the SIGKILL too
    wanted = [f"[worker/0] early line {i} of 5" for i in range(1, 6)]
    wanted += ["[worker/0] before release", "[worker/0] after release"]
    for tr in rerun_task_runs:
        mine = [m for m, t in logs_by_task_run(fr_id) if t == tr.id]
        counts = {w: sum(m.endswith(w) for m in mine) for w in wanted}
        assert counts == dict.fromkeys(wanted, 1), mine
    assert logs  # the run's logs were read


def logs_by_task_run(flow_run_id: Any) -> list[tuple[str, Any]]:
    """(message, task_run_id) of every log of the flow run."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [(log.message, log.task_run_id) for log in logs]
