"""torchx_prefect tasks on a real Prefect server (``prefect server start``) with real local apps.

Every app runs on the local scheduler under a per-session temporary root; each test checks that
no app process (supervisor, replica or replica child) is left behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect_helpers import (
    artifacts_of,
    flow_run_logs,
    task_runs,
    wait_no_app_processes,
    wait_terminal,
)

from torchx_core.runner import get_runner
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.prefect]

REPO = Path(__file__).resolve().parents[2]


def example_flow(name: str) -> Any:
    """A flow of the example module, imported by module path (the Prefect runner's subprocess
    unpickles the flow by reference, so it must be importable there too)."""
    import importlib

    return getattr(importlib.import_module("examples.prefect.pipeline"), name)


# ---------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture
def local_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private local-scheduler root for one test (TORCHX_LOCAL_ROOT, inherited by the Prefect
    runner's flow processes); any app still running at the end is cancelled."""
    root = tmp_path / "torchx-local"
    root.mkdir()
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(root))
    yield root
    with get_runner() as runner:
        for app in runner.list("local_cwd"):
            if AppState(app.state) not in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED):
                runner.cancel(app.app_handle)


@pytest.fixture
def env(prefect_server: None, local_root: Path) -> Iterator[Path]:
    """A real Prefect API and a local-scheduler root; asserts no app process is left after the
    test."""
    yield local_root
    leftovers = wait_no_app_processes(local_root)
    assert leftovers == [], f"app processes left behind: {leftovers}"


def py_app(name: str, code: str, replicas: int = 1, max_retries: int = 0) -> AppDef:
    return AppDef(
        name=name,
        roles=[
            Role(
                name="worker",
                image=str(REPO),
                entrypoint=sys.executable,
                args=["-u", "-c", code],
                num_replicas=replicas,
                max_retries=max_retries,
            )
        ],
    )


def sleeper(name: str = "sleeper", seconds: int = 300) -> AppDef:
    # the replica also starts a child, to check that whole process groups are stopped
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({seconds})'])\n"
        "print('sleeping', flush=True)\n"
        f"time.sleep({seconds})\n"
    )
    return py_app(name, code)


def apps_named(prefix: str) -> list[Any]:
    with get_runner() as runner:
        return [a for a in runner.list("local_cwd") if a.app_id.startswith(prefix)]


# ---------------------------------------------------------------------------------------------
# success: result, artifacts, logs, labels (sync and async)


def _check_success(state: Any, marker: str) -> None:
    from prefect import get_client

    from torchx_prefect import AppResult

    assert state.is_completed(), state
    result = state.result()
    assert isinstance(result, AppResult)
    assert result.state == AppState.SUCCEEDED and not result.reattached
    assert result.ui_url and result.ui_url.startswith("file://")
    flow_run_id = state.state_details.flow_run_id

    # the replica's output is in the run's logs
    logs = flow_run_logs(flow_run_id, f"[worker/0] {marker}", f"[worker/1] {marker}")
    assert any(f"[worker/0] {marker}" in m for m in logs), logs
    assert any(f"[worker/1] {marker}" in m for m in logs), logs

    # artifacts read back through the Prefect client
    (tr,) = task_runs(flow_run_id)
    arts = {a.key: a for a in artifacts_of(tr.id)}
    status_key = f"torchx-{result.app_name}-status"
    assert status_key in arts and arts[status_key].type == "markdown"
    md = arts[status_key].data
    assert "**State:** SUCCEEDED" in md and result.app_handle in md
    assert md.count("| worker |") == 2
    ui = arts[f"torchx-{result.app_name}-ui"]
    assert ui.type == "markdown" and result.ui_url in ui.data  # link artifacts are markdown

    # the handle was persisted on the flow run before waiting
    with get_client(sync_client=True) as client:
        labels = client.read_flow_run(flow_run_id).labels
    assert result.app_handle in labels.values()


def test_sync_task_success_result_artifacts_and_logs(env: Path) -> None:
    from prefect import flow

    from torchx_prefect import run_app_sync

    marker = f"hello-{uuid.uuid4().hex[:8]}"

    @flow
    def f() -> Any:
        return run_app_sync(py_app("hello", f"print('{marker}')", replicas=2), poll_interval=0.2)

    _check_success(f(return_state=True), marker)


def test_async_task_success_result_artifacts_and_logs(env: Path) -> None:
    from prefect import flow

    from torchx_prefect import run_app

    marker = f"hello-async-{uuid.uuid4().hex[:8]}"

    @flow
    async def f() -> Any:
        return await run_app(py_app("hello", f"print('{marker}')", replicas=2), poll_interval=0.2)

    _check_success(asyncio.run(f(return_state=True)), marker)


def test_with_a_dashboard_the_status_artifact_links_the_dashboard(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status table's "UI:" line opens the app's dashboard page, like the link artifact (it
    showed the scheduler's ``file://`` URL)."""
    from urllib.parse import quote

    from prefect import flow

    from torchx_prefect import run_app_sync

    monkeypatch.setenv("TORCHX_DASHBOARD_URL", "http://127.0.0.1:8288/")

    @flow
    def f() -> Any:
        return run_app_sync(py_app("dash", "print('hi')"), poll_interval=0.2)

    state = f(return_state=True)
    result = state.result()
    page = f"http://127.0.0.1:8288/app?handle={quote(result.app_handle, safe='')}"
    (tr,) = task_runs(state.state_details.flow_run_id)
    arts = {a.key: a for a in artifacts_of(tr.id)}
    md = arts[f"torchx-{result.app_name}-status"].data
    (ui_line,) = [line for line in md.splitlines() if line.startswith("**UI:**")]
    assert ui_line == f"**UI:** [{page}]({page})"
    assert page in arts[f"torchx-{result.app_name}-ui"].data


@pytest.mark.parametrize("app_args", [["--msg", "ARG"], {"msg": "ARG"}])
def test_component_by_name_with_cli_or_dict_args(env: Path, app_args: Any) -> None:
    from prefect import flow

    from torchx_prefect import run_app_sync

    tag = f"comp-{uuid.uuid4().hex[:8]}"
    args = (
        [tag if a == "ARG" else a for a in app_args] if isinstance(app_args, list) else {"msg": tag}
    )

    @flow
    def f() -> Any:
        return run_app_sync("utils.echo", args, poll_interval=0.2)

    state = f(return_state=True)
    assert state.is_completed(), state
    result = state.result()
    assert result.app_name.startswith("echo-") and result.state == AppState.SUCCEEDED
    with get_runner() as runner:
        assert [ln.strip() for ln in runner.log_lines(result.app_handle, "echo", 0)] == [tag]
    logs = flow_run_logs(state.state_details.flow_run_id, f"[echo/0] {tag}")
    assert any(f"[echo/0] {tag}" in m for m in logs), logs


def test_workspace_and_cfg_reach_the_scheduler(env: Path, tmp_path: Path) -> None:
    """The app reads a file that exists only in the workspace, and runs in the workspace's copy
    inside its app directory, which the ``log_dir`` run option (cfg) puts under
    ``log_dir/<session>``."""
    from prefect import flow

    from torchx_prefect import run_app_sync

    project, log_dir = tmp_path / "project", tmp_path / "logs"
    project.mkdir()
    tag = f"ws-{uuid.uuid4().hex[:8]}"
    (project / "data.txt").write_text(f"{tag}\n")
    code = "import os; print(open('data.txt').read().strip(), os.getcwd())"

    @flow
    def f() -> Any:
        return run_app_sync(
            "utils.python",
            ["-c", code],
            workspace=str(project),
            cfg={"log_dir": str(log_dir)},
            poll_interval=0.2,
        )

    state = f(return_state=True)
    assert state.is_completed(), state
    result = state.result()
    with get_runner() as runner:
        (line,) = [ln.strip() for ln in runner.log_lines(result.app_handle, "python", 0)]
    text, cwd = line.split(" ", 1)
    assert text == tag
    session, app_id = result.app_handle.split("://", 1)[1].split("/")
    # a copy of the workspace in the app's dir, which is {log_dir}/{session}/{app_id} (TorchX's)
    assert Path(cwd).parent == log_dir / session / app_id


@pytest.mark.filterwarnings("ignore:Logger 'prefect.task_runs' attempted to send logs")
def test_task_called_outside_a_flow(env: Path) -> None:
    from torchx_prefect import run_app_sync

    state = run_app_sync(
        py_app("standalone", "print('alone')"), poll_interval=0.2, return_state=True
    )
    assert state.is_completed(), state
    assert state.result().state == AppState.SUCCEEDED


def test_concurrent_tasks_record_every_app_on_the_flow_run(env: Path) -> None:
    from prefect import flow, get_client

    from torchx_prefect import run_app_sync

    @flow
    def f() -> Any:
        futures = [
            run_app_sync.submit(py_app(f"para{i}", f"print('para {i}')"), poll_interval=0.2)
            for i in range(3)
        ]
        return [fut.result() for fut in futures]

    state = f(return_state=True)
    results = state.result()
    handles = {r.app_handle for r in results}
    assert len(handles) == 3 and {r.state for r in results} == {AppState.SUCCEEDED}
    with get_client(sync_client=True) as client:
        labels = client.read_flow_run(state.state_details.flow_run_id).labels
    assert {v for k, v in labels.items() if k.startswith("torchx.app.")} == handles


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_every_line_of_a_short_app_reaches_the_flow_run_logs_once(env: Path, flavour: str) -> None:
    """An app that prints 100 numbered lines and exits at once (it ends before the first status
    read): each line is in the flow run's logs on the server exactly once."""
    from prefect import flow

    from torchx_prefect import run_app, run_app_sync

    app = py_app(f"burst{flavour}", "for i in range(1, 101): print(f'burst line {i} of 100')")
    if flavour == "sync":

        @flow
        def f() -> Any:
            return run_app_sync(app, poll_interval=2.0)

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            return await run_app(app, poll_interval=2.0)

        state = asyncio.run(f(return_state=True))
    assert state.is_completed(), state
    wanted = [f"[worker/0] burst line {i} of 100" for i in range(1, 101)]
    logs = flow_run_logs(state.state_details.flow_run_id, *wanted)
    counts = {w: sum(m.endswith(w) for m in logs) for w in wanted}
    assert {w: n for w, n in counts.items() if n != 1} == {}


# ---------------------------------------------------------------------------------------------
# failure: typed error, log tail, retries submit a new app each time


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_failed_app_fails_the_task_and_retries_resubmit(env: Path, flavour: str) -> None:
    from prefect import flow

    from torchx_prefect import AppFailedError, run_app, run_app_sync

    name = f"boom{flavour}"
    app = py_app(name, "import sys; print('about to fail', flush=True); sys.exit(3)")

    if flavour == "sync":

        @flow
        def f() -> Any:
            return run_app_sync.with_options(retries=1)(app, poll_interval=0.2, log_tail_lines=5)

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            return await run_app.with_options(retries=1)(app, poll_interval=0.2, log_tail_lines=5)

        state = asyncio.run(f(return_state=True))

    assert state.is_failed()
    with pytest.raises(AppFailedError) as info:
        state.result()
    err = info.value
    assert err.status is not None and err.status.state == AppState.FAILED
    assert "exit" in str(err) and "code 3" in str(err)
    assert "[worker/0] about to fail" in err.log_tail
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.state.is_failed() and tr.run_count == 2
    # one retry = a second, fresh submission (the first app had ended); both failed
    apps = apps_named(err.app_handle.split("/")[-1].rsplit("-", 1)[0])
    assert len(apps) == 2 and {AppState(a.state) for a in apps} == {AppState.FAILED}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_invalid_arguments_are_not_retried(env: Path, flavour: str) -> None:
    from prefect import flow

    from torchx_prefect import InvalidTaskArgumentError, run_app, run_app_sync

    if flavour == "sync":

        @flow
        def f() -> Any:
            return run_app_sync.with_options(retries=2)(py_app("x", "pass"), poll_interval=-1)

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            return await run_app.with_options(retries=2)(py_app("x", "pass"), poll_interval=-1)

        state = asyncio.run(f(return_state=True))
    with pytest.raises(InvalidTaskArgumentError, match="poll_interval"):
        state.result()
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.run_count == 1


PERMANENT_CASES = {
    # name: (app, app_args, cfg, error class name, words of its message)
    "component_not_found": (
        "no_such.component",
        None,
        None,
        "ComponentNotFoundException",
        "no_such.component",
    ),
    "component_argument": (
        "utils.echo",
        {"bogus_arg": 1},
        None,
        "ComponentArgumentError",
        "bogus_arg",
    ),
    "run_option_type": (
        "utils.echo",
        None,
        {"grace_period": "soon"},
        "InvalidRunConfigException",
        "grace_period",
    ),
    # a misspelt run option is refused (with the close match), not run with the default
    "run_option_misspelt": (
        "utils.echo",
        None,
        {"grace_periodd": 1.0},
        "InvalidRunConfigException",
        "Did you mean: 'grace_period'?",
    ),
    "run_option_unknown": (
        "utils.echo",
        None,
        {"bogus_key": 1},
        "InvalidRunConfigException",
        "unknown run option 'bogus_key'",
    ),
}


@pytest.mark.parametrize("case", sorted(PERMANENT_CASES))
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_permanent_errors_run_once_despite_retries(env: Path, flavour: str, case: str) -> None:
    """Errors a retry cannot fix (is_permanent_error) end the task on its first attempt; no app
    is submitted."""
    from prefect import flow

    from torchx_prefect import run_app, run_app_sync

    app, app_args, cfg, error, words = PERMANENT_CASES[case]
    if flavour == "sync":

        @flow
        def f() -> Any:
            return run_app_sync.with_options(retries=2, retry_delay_seconds=0)(
                app, app_args, cfg=cfg, poll_interval=0.2
            )

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            return await run_app.with_options(retries=2, retry_delay_seconds=0)(
                app, app_args, cfg=cfg, poll_interval=0.2
            )

        state = asyncio.run(f(return_state=True))
    assert state.is_failed()
    with pytest.raises(Exception) as info:  # the class is checked by name below
        state.result()
    assert type(info.value).__name__ == error and words in str(info.value)
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.state.is_failed() and tr.run_count == 1
    assert apps_named("echo") == []


# ---------------------------------------------------------------------------------------------
# a retried task reattaches to the app that is still running


class BlipOnce:
    """Wraps a real Runner; the first submission fails after the app was created (a scheduler
    API blip: the request reached the scheduler, the answer was lost).

    The app waits for ``release`` to exist, and the file is created only when the scheduler's
    apps are listed after that failure (the retry looking for its app), so the app is still
    running when the retry looks for it however slow the machine is. With ``written``, that
    listing first waits (bounded) until the app's log holds that line, so the retry attaches
    to an app whose early lines are already written.
    """

    def __init__(
        self, runner: Any, blips: list[str], release: Path, written: str | None = None
    ) -> None:
        self._runner = runner
        self._blips = blips
        self._release = release
        self._written = written

    def run(self, *args: Any, **kwargs: Any) -> str:
        handle = self._runner.run(*args, **kwargs)
        if not self._blips:
            self._blips.append(handle)
            raise ConnectionError(f"scheduler API blip after {handle} was created")
        return handle

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self._released(self._runner.list(*args, **kwargs))

    def shared_list(self, *args: Any, **kwargs: Any) -> Any:
        """The lifecycle looks its app up through the shared list read..."""
        return self._released(self._runner.shared_list(*args, **kwargs))

    def list_named(self, *args: Any, **kwargs: Any) -> Any:
        """...or, where the scheduler finds apps by name without listing all, by name."""
        return self._released(self._runner.list_named(*args, **kwargs))

    def _released(self, rows: Any) -> Any:
        if self._blips:
            self._wait_for_log(self._blips[0])
            self._release.touch()
        return rows

    def _wait_for_log(self, handle: str) -> None:
        deadline = time.monotonic() + 120
        while self._written is not None and time.monotonic() < deadline:
            if any(self._written in line for line in self._runner.log_lines(handle, "worker", 0)):
                return
            time.sleep(0.1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_retry_reattaches_instead_of_submitting_twice(
    env: Path, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import flow

    from torchx_prefect import _session, run_app, run_app_sync

    blips: list[str] = []
    release = env / f"release-{flavour}"
    name = f"reattach{flavour}"
    last_early = f"early line 5 of 5 ({name})"
    monkeypatch.setattr(
        _session, "new_runner", lambda: BlipOnce(get_runner(), blips, release, last_early)
    )
    app = py_app(
        name,
        "import os, time\n"
        # written before the retry reattaches (the app waits for it): issue 22, every line once
        f"for i in range(1, 6): print(f'early line {{i}} of 5 ({name})', flush=True)\n"
        "deadline = time.monotonic() + 300\n"
        f"while not os.path.exists({str(release)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print('finished once', flush=True)\n",
    )

    if flavour == "sync":

        @flow
        def f() -> Any:
            return run_app_sync.with_options(retries=1)(app, poll_interval=0.2)

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            return await run_app.with_options(retries=1)(app, poll_interval=0.2)

        state = asyncio.run(f(return_state=True))

    assert state.is_completed(), state
    # the retry looked its app up (which released it): it did not wait out the app's deadline
    assert release.exists()
    result = state.result()
    assert result.reattached and result.state == AppState.SUCCEEDED
    assert [a.app_handle for a in apps_named(name)] == [result.app_handle]
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.run_count == 2
    logs = flow_run_logs(
        state.state_details.flow_run_id, "for the retry", "Reattached to running TorchX app"
    )
    assert any("for the retry" in m for m in logs), logs
    assert any("Reattached to running TorchX app" in m for m in logs), logs
    # the reattaching attempt streams the app's log from its start: every line, once
    wanted = [f"[worker/0] early line {i} of 5 ({name})" for i in range(1, 6)]
    wanted.append("[worker/0] finished once")
    logs = flow_run_logs(state.state_details.flow_run_id, *wanted)
    counts = {w: sum(m.endswith(w) for m in logs) for w in wanted}
    assert {w: n for w, n in counts.items() if n != 1} == {}, logs


# ---------------------------------------------------------------------------------------------
# stopping: task timeout, app cancelled from outside, flow cancellation


TASK_TIMEOUT = 20
"""Task timeout of the timeout tests: long enough for the task to submit its app on a loaded
2-core machine (reading the Prefect API and starting the supervisor can take seconds)."""


@pytest.mark.parametrize("flavour", ["sync", "sync-submitted", "async"])
def test_task_timeout_cancels_the_app(env: Path, flavour: str) -> None:
    from prefect import flow

    from torchx_prefect import run_app, run_app_sync

    name = f"timeout{flavour.replace('-', '')}"
    if flavour == "sync":

        @flow
        def f() -> Any:
            task = run_app_sync.with_options(timeout_seconds=TASK_TIMEOUT)
            return task(sleeper(name), poll_interval=0.2)

        state = f(return_state=True)
    elif flavour == "sync-submitted":  # runs in a worker thread of the task runner

        @flow
        def f() -> Any:  # type: ignore[misc]
            task = run_app_sync.with_options(timeout_seconds=TASK_TIMEOUT)
            return task.submit(sleeper(name), poll_interval=0.2).result()

        state = f(return_state=True)
    else:

        @flow
        async def f() -> Any:  # type: ignore[misc]
            task = run_app.with_options(timeout_seconds=TASK_TIMEOUT)
            return await task(sleeper(name), poll_interval=0.2)

        state = asyncio.run(f(return_state=True))

    assert state.is_failed()
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.state.name == "TimedOut"
    apps = apps_named(name)
    assert len(apps) == 1, (
        f"expected one app submitted before the {TASK_TIMEOUT}s timeout, found {apps}"
    )
    (app,) = apps
    # the task's cleanup asked for the cancel (bounded by cancel_timeout); nothing else cancels it
    assert wait_terminal(app.app_handle) == AppState.CANCELLED
    assert wait_no_app_processes(env) == []


def test_app_cancelled_outside_gives_a_cancelled_task(env: Path) -> None:
    from prefect import flow

    from torchx_prefect import run_app_sync

    name = "extcancel"

    def cancel_when_running() -> None:
        deadline = time.monotonic() + 120
        with get_runner() as runner:
            while time.monotonic() < deadline:
                apps = [a for a in runner.list("local_cwd") if a.app_id.startswith(name)]
                if apps and AppState(apps[0].state) == AppState.RUNNING:
                    runner.cancel(apps[0].app_handle)
                    return
                time.sleep(0.1)

    canceller = threading.Thread(target=cancel_when_running, daemon=True)
    canceller.start()

    @flow
    def f() -> Any:
        return run_app_sync(sleeper(name), poll_interval=0.2)

    state = f(return_state=True)
    canceller.join(10)
    assert state.is_cancelled(), state
    (tr,) = task_runs(state.state_details.flow_run_id)
    assert tr.state.is_cancelled() and tr.run_count == 1
    arts = {a.key.rsplit("-", 1)[-1]: a for a in artifacts_of(tr.id)}
    assert set(arts) == {"ui", "status"}
    assert "**State:** CANCELLED" in arts["status"].data
    assert arts["ui"].created <= arts["status"].created  # the link is published while running


@pytest.mark.filterwarnings("ignore:Runner.execute_flow_run has been deprecated")
@pytest.mark.parametrize(
    ("flow_name", "how"),
    [
        ("torchx_pipeline", "cancel"),
        ("torchx_pipeline_async", "cancel"),
        ("torchx_pipeline", "kill"),
    ],
)
def test_flow_cancellation_or_crash_cancels_the_app(env: Path, flow_name: str, how: str) -> None:
    """A deployed flow run executed by the Prefect runner (in a subprocess) is either cancelled
    through the API (the runner stops it: the task's cleanup and the on_cancellation hook cancel
    the app) or its process is SIGKILLed (no cleanup runs in it: the runner reports it Crashed and
    the on_crashed hook cancels the app)."""
    import signal
    from functools import partial

    import anyio
    from prefect import get_client
    from prefect.runner import Runner
    from prefect.states import Cancelling

    flow_obj = example_flow(flow_name)
    tag = uuid.uuid4().hex[:8]

    async def scenario() -> tuple[Any, str]:
        runner = Runner(query_seconds=1)
        async with runner, get_client() as client:
            deployment_id = await runner.aadd_flow(flow_obj, name=f"{how}-{tag}")
            fr = await client.create_flow_run_from_deployment(
                deployment_id,
                parameters={"message": tag, "train_seconds": 600, "poll_interval": 0.3},
            )
            with anyio.fail_after(300):
                async with anyio.create_task_group() as tg:
                    pid = await tg.start(partial(runner.execute_flow_run, fr.id))
                    handle = await _wait_for_running_app(client, fr.id, "train")
                    if how == "cancel":
                        await client.set_flow_run_state(fr.id, Cancelling(), force=True)
                    else:
                        os.kill(pid, signal.SIGKILL)
            final = await _wait_for_final_state(client, fr.id)
            return final, handle

    final, handle = asyncio.run(scenario())
    if how == "cancel":
        assert final.is_cancelled(), final
    else:
        assert final.is_crashed(), final
    assert wait_terminal(handle) == AppState.CANCELLED
    assert wait_no_app_processes(env) == []


async def _wait_for_running_app(client: Any, flow_run_id: Any, step: str) -> str:
    with get_runner() as runner:
        for _ in range(1200):
            run = await client.read_flow_run(flow_run_id)
            handles = [
                v for k, v in run.labels.items() if k.startswith("torchx.app.") and step in v
            ]
            if handles:
                status = await asyncio.to_thread(runner.status, handles[0])
                if status is not None and status.state == AppState.RUNNING:
                    return handles[0]
            await asyncio.sleep(0.25)
    raise AssertionError(f"no running {step!r} app recorded on flow run {flow_run_id}")


async def _wait_for_final_state(client: Any, flow_run_id: Any, timeout: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        run = await client.read_flow_run(flow_run_id)
        if (run.state is not None and run.state.is_final()) or time.monotonic() > deadline:
            return run.state
        await asyncio.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# the flow hook on its own, and the example


def test_cancel_flow_apps_hook_cancels_recorded_apps(env: Path) -> None:
    from types import SimpleNamespace

    from prefect import flow, get_client

    from torchx_prefect import cancel_flow_apps

    @flow
    def record() -> Any:
        from prefect.runtime import flow_run

        with get_runner() as runner:
            handle = runner.run(sleeper("hooked"), "local_cwd")
        with get_client(sync_client=True) as client:
            client.update_flow_run_labels(flow_run.id, {"torchx.app.manual": handle})
        return handle

    state = record(return_state=True)
    handle = state.result()
    flow_run = SimpleNamespace(id=state.state_details.flow_run_id, labels={})
    assert cancel_flow_apps(None, flow_run, state) == [handle]
    assert wait_terminal(handle) == AppState.CANCELLED
    # idempotent: the app is already cancelled
    assert cancel_flow_apps(None, flow_run, state) == [handle]


@pytest.mark.parametrize("flow_name", ["torchx_pipeline", "torchx_pipeline_async"])
def test_example_pipeline_runs_end_to_end(env: Path, flow_name: str) -> None:
    pipeline = example_flow(flow_name)
    tag = uuid.uuid4().hex[:8]
    call = pipeline(message=tag, train_seconds=0.5, poll_interval=0.2, return_state=True)
    state = asyncio.run(call) if asyncio.iscoroutine(call) else call
    assert state.is_completed(), state
    out = state.result()
    assert out["state"] == "SUCCEEDED"
    with get_runner() as runner:
        for key in ("prepare", "train"):
            st = runner.status(out[key])
            assert st is not None and st.state == AppState.SUCCEEDED
    prepared, trained = f"[prepare/0] preparing data for {tag}", f"[train/1] replica 1 done: {tag}"
    logs = flow_run_logs(state.state_details.flow_run_id, prepared, trained)
    assert any(prepared in m for m in logs), logs
    assert any(trained in m for m in logs), logs


def test_example_script_runs_from_the_command_line(env: Path) -> None:
    """``python examples/prefect/pipeline.py`` as documented, against the test's Prefect API."""
    import ast
    import subprocess

    from prefect.settings import PREFECT_API_URL

    tag = uuid.uuid4().hex[:8]
    proc_env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    proc = subprocess.run(
        [
            sys.executable,
            "examples/prefect/pipeline.py",
            "--message",
            tag,
            "--train-seconds",
            "0.4",
        ],
        check=False,
        cwd=REPO,
        env=proc_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert out["state"] == "SUCCEEDED"
    with get_runner() as runner:
        for key in ("prepare", "train"):
            st = runner.status(out[key])
            assert st is not None and st.state == AppState.SUCCEEDED
        assert f"preparing data for {tag}" in "".join(
            runner.log_lines(out["prepare"], "prepare", 0)
        )
