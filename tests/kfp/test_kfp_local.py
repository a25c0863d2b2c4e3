"""Real runs: kfp.local pipelines whose launcher steps start real apps on the local scheduler."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kfp import dsl
from kfp_helpers import (
    pid_alive,
    processes_in_session,
    python_app,
    read_pids,
    step_processes,
    step_wrappers,
    wait_until,
)

from torchx_core import specs
from torchx_core.runner import get_runner
from torchx_core.specs import AppState
from torchx_kfp import launch

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.local]

# argv: <dir> <replica id> <sleep seconds> <exit code>. Writes its pid (and $UPSTREAM) to <dir>.
REPLICA_CODE = textwrap.dedent(
    """
    import os, sys, time
    d, k, sleep, code = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    with open(os.path.join(d, k + ".upstream"), "w") as f:
        f.write(os.environ.get("UPSTREAM", ""))
    with open(os.path.join(d, k + ".pid"), "w") as f:
        f.write(str(os.getpid()))
    print("replica", k, "started", flush=True)
    time.sleep(sleep)
    print("replica", k, "exiting with", code, flush=True)
    sys.exit(code)
    """
)


def make_app(
    name: str, out_dir: Path, replicas: int = 2, sleep: float = 0.2, exit_code: int = 0
) -> specs.AppDef:
    out_dir.mkdir(parents=True, exist_ok=True)
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="worker",
                image=str(out_dir),
                entrypoint=sys.executable,
                args=[
                    "-c",
                    REPLICA_CODE,
                    str(out_dir),
                    specs.macros.replica_id,
                    str(sleep),
                    str(exit_code),
                ],
                num_replicas=replicas,
            )
        ],
    )


def app_state(handle: str) -> AppState:
    with get_runner() as runner:
        status = runner.status(handle)
    assert status is not None, f"{handle} vanished"
    return status.state


def apps_named(prefix: str) -> dict[str, AppState]:
    with get_runner() as runner:
        return {
            a.app_handle: a.state for a in runner.list("local_cwd") if a.name.startswith(prefix)
        }


def test_launcher_step_runs_an_app_to_success(
    kfp_local: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app = make_app("kfpok", tmp_path / "ok")

    @dsl.pipeline(name="kfp-success")
    def pipeline() -> str:
        return launch(app, wait_interval=0.1).outputs["app_handle"]

    handle = pipeline().output
    assert handle.startswith("local_cwd://")
    assert re.search(r"/kfpok-[0-9a-f]{10}-", handle)  # named from the step's identity
    assert app_state(handle) == AppState.SUCCEEDED
    pids = read_pids(tmp_path / "ok")
    assert len(pids) == 2
    assert not any(pid_alive(p) for p in pids)
    out = capfd.readouterr().out
    # replica logs streamed into the step log, prefixed by role/replica
    assert "[worker/0] replica 0 started" in out
    assert "[worker/1] replica 1 exiting with 0" in out


def test_every_line_of_a_short_app_reaches_the_step_log_once(
    kfp_local: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """An app that prints 100 numbered lines and exits at once (before the first status read):
    each line is in the launcher step's output under kfp.local exactly once."""
    code = "for i in range(1, 101): print(f'burst line {i} of 100')"
    app = specs.AppDef(
        name="kfpburst",
        roles=[
            specs.Role(
                name="worker", image=str(tmp_path), entrypoint=sys.executable, args=["-c", code]
            )
        ],
    )

    @dsl.pipeline(name="kfp-burst")
    def pipeline() -> str:
        return launch(app, wait_interval=2.0).outputs["app_handle"]

    handle = pipeline().output
    assert app_state(handle) == AppState.SUCCEEDED
    out = capfd.readouterr().out.splitlines()
    counts = {
        i: sum(line.endswith(f"[worker/0] burst line {i} of 100") for line in out)
        for i in range(1, 101)
    }
    assert {i: n for i, n in counts.items() if n != 1} == {}


def test_ui_url_output_is_the_dashboard_page_when_the_launcher_is_given_one(
    kfp_local: Path, tmp_path: Path
) -> None:
    from urllib.parse import quote

    app = make_app("kfpdash", tmp_path / "dash", replicas=1)

    @dsl.pipeline(name="kfp-dashboard-link")
    def pipeline() -> str:
        return launch(app, wait_interval=0.1, dashboard_url="http://ml-host:8288").outputs["ui_url"]

    ui_url = pipeline().output
    with get_runner() as runner:
        (handle,) = [a.app_handle for a in runner.list("local_cwd") if a.name.startswith("kfpdash")]
    app_id = handle.rsplit("/", 1)[1]
    assert ui_url.startswith("http://ml-host:8288/app?handle=local_cwd%3A%2F%2F")
    assert ui_url.endswith(quote("/" + app_id, safe=""))


def test_failed_app_fails_the_step(
    kfp_local: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app = make_app("kfpfail", tmp_path / "fail", replicas=1, exit_code=3)

    @dsl.pipeline(name="kfp-failure")
    def pipeline() -> None:
        launch(app, wait_interval=0.1)

    failed = r"finished with status \S*FAILURE.*Inner task failed.*torchx-launcher"
    with pytest.raises(RuntimeError, match=failed):
        pipeline()
    states = apps_named("kfpfail-")
    assert list(states.values()) == [AppState.FAILED]
    (handle,) = states
    # the step failed with the app's structured error, and streamed the replica's log first
    out = capfd.readouterr().out
    assert f"AppFailedError: app {handle} ended FAILED" in out
    assert '"exit_code": 3' in out
    assert "[worker/0] replica 0 exiting with 3" in out
    assert not any(pid_alive(p) for p in read_pids(tmp_path / "fail"))


def test_two_steps_pass_the_handle_along(kfp_local: Path, tmp_path: Path) -> None:
    first_app = make_app("kfpfirst", tmp_path / "first")
    second_app = make_app("kfpsecond", tmp_path / "second", replicas=1)

    @dsl.pipeline(name="kfp-two-steps")
    def pipeline() -> str:
        first = launch(first_app, wait_interval=0.1)
        second = launch(
            second_app, wait_interval=0.1, env={"UPSTREAM": first.outputs["app_handle"]}
        )
        return second.outputs["state"]

    assert pipeline().output == "SUCCEEDED"
    (first_handle,) = apps_named("kfpfirst-")
    assert (tmp_path / "second" / "0.upstream").read_text() == first_handle
    assert app_state(first_handle) == AppState.SUCCEEDED
    (second_handle,) = apps_named("kfpsecond-")
    assert app_state(second_handle) == AppState.SUCCEEDED


def test_parallel_for_iterations_launch_one_app_each(kfp_local: Path, tmp_path: Path) -> None:
    """Iterations of a ``dsl.ParallelFor`` share the task name; each must still get its own
    app (not reattach to a sibling's)."""
    out_dir = tmp_path / "loop"
    out_dir.mkdir()
    write_item = "import os, sys; open(os.path.join(sys.argv[1], os.environ['ITEM']), 'w').close()"
    app = python_app("kfploop", out_dir, write_item)

    @dsl.pipeline(name="kfp-loop")
    def pipeline() -> None:
        with dsl.ParallelFor(["a", "b", "c"], parallelism=1) as item:
            launch(app, wait_interval=0.1, env={"ITEM": item})

    pipeline()
    states = apps_named("kfploop-")
    assert sorted(states.values()) == [AppState.SUCCEEDED] * 3
    assert sorted(p.name for p in out_dir.iterdir()) == ["a", "b", "c"]


def test_parallel_for_over_one_identical_app_launches_distinct_apps(
    kfp_local: Path, tmp_path: Path
) -> None:
    """Every iteration launches the very same AppDef (the loop item is not used): they are
    still three apps, told apart by ``dsl.PIPELINE_TASK_ID_PLACEHOLDER`` (issue 13, fault 3).

    Under kfp.local that placeholder is a random id drawn for each task execution (kfp 2.16
    ``kfp/local/placeholder_utils.py``); a KFP backend resolves it in the driver (see
    ``torchx_kfp.launcher``).
    """
    out_dir = tmp_path / "same"
    out_dir.mkdir()
    write_pid = "import os, sys; open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close()"
    app = python_app("kfpsame", out_dir, write_pid)

    @dsl.pipeline(name="kfp-same-loop")
    def pipeline() -> None:
        with dsl.ParallelFor(["a", "b", "c"], parallelism=1):
            launch(app, wait_interval=0.1)

    pipeline()
    states = apps_named("kfpsame-")
    assert sorted(states.values()) == [AppState.SUCCEEDED] * 3
    assert len(list(out_dir.iterdir())) == 3  # three apps ran, none reattached to a sibling


def test_retried_step_reattaches_instead_of_resubmitting(local_apps: Path, tmp_path: Path) -> None:
    from torchx_kfp.launcher import torchx_launcher

    app_json = json.dumps(make_app("kfpretry", tmp_path / "retry", replicas=1).to_dict())
    first = torchx_launcher(
        app_json=app_json, job_id="job-42", task_name="train", wait_interval=0.1
    )
    again = torchx_launcher(
        app_json=app_json, job_id="job-42", task_name="train", wait_interval=0.1
    )
    assert again.app_handle == first.app_handle
    assert len(apps_named("kfpretry-")) == 1
    other_run = torchx_launcher(
        app_json=app_json, job_id="job-43", task_name="train", wait_interval=0.1
    )
    assert other_run.app_handle != first.app_handle
    # a retry of one ParallelFor iteration keeps its task id, so it reattaches; a sibling
    # iteration (another task id) gets its own app
    iteration = torchx_launcher(
        app_json=app_json, job_id="job-42", task_name="train", task_id="iter-1", wait_interval=0.1
    )
    retry = torchx_launcher(
        app_json=app_json, job_id="job-42", task_name="train", task_id="iter-1", wait_interval=0.1
    )
    sibling = torchx_launcher(
        app_json=app_json, job_id="job-42", task_name="train", task_id="iter-2", wait_interval=0.1
    )
    assert retry.app_handle == iteration.app_handle
    assert len({first.app_handle, iteration.app_handle, sibling.app_handle}) == 3


LAUNCH_IN_SUBPROCESS = textwrap.dedent(
    """
    import sys
    from torchx_kfp.launcher import torchx_launcher
    torchx_launcher(app_json=sys.argv[1], job_id="job-sig", task_name="sleepy", wait_interval=0.1)
    """
)


def test_retried_step_reattaches_to_the_app_its_killed_attempt_left_running(
    local_apps: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Attempt 1 is SIGKILLed (a lost pod: no handler runs) while its app runs; attempt 2 of
    the same job and task finds that app by name and waits for it instead of submitting, and
    its step log holds every replica line once, those written before it attached too."""
    from torchx_kfp.launcher import torchx_launcher

    out_dir = tmp_path / "lost"
    app = make_app("kfplost", out_dir, replicas=2, sleep=3)
    app_json = json.dumps(app.to_dict())
    first = subprocess.Popen(
        [sys.executable, "-c", LAUNCH_IN_SUBPROCESS, app_json],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: len(read_pids(out_dir)) == 2, 60, "both replicas to start")
    finally:
        first.kill()
        first.wait()
    (handle,) = apps_named("kfplost-")
    assert app_state(handle) == AppState.RUNNING
    started = sorted(read_pids(out_dir))

    second = torchx_launcher(
        app_json=app_json, job_id="job-sig", task_name="sleepy", wait_interval=0.1
    )
    assert second.app_handle == handle
    assert second.state == "SUCCEEDED"
    assert list(apps_named("kfplost-")) == [handle]
    assert sorted(read_pids(out_dir)) == started  # no replica started twice
    out = capfd.readouterr().out.splitlines()
    for k in ("0", "1"):
        for line in (
            f"[worker/{k}] replica {k} started",
            f"[worker/{k}] replica {k} exiting with 0",
        ):
            assert sum(x.endswith(line) for x in out) == 1, (line, out)


def test_sigterm_on_the_step_cancels_the_app(local_apps: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "sig"
    app = make_app("kfpsig", out_dir, replicas=2, sleep=600)
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH_IN_SUBPROCESS, json.dumps(app.to_dict())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: len(read_pids(out_dir)) == 2, 60, "both replicas to start")
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, output
    (handle,) = apps_named("kfpsig-")
    assert app_state(handle) == AppState.CANCELLED
    pids = read_pids(out_dir)
    wait_until(lambda: not any(pid_alive(p) for p in pids), 30, "replica processes to exit")


PIPELINE_IN_SUBPROCESS = textwrap.dedent(
    """
    import json, sys
    import kfp.local
    from kfp import dsl
    from torchx_core.specs import AppDef
    from torchx_kfp import launch

    app = AppDef.from_dict(json.loads(sys.argv[1]))
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=sys.argv[2])

    @dsl.pipeline(name="kfp-sigterm")
    def pipeline() -> None:
        launch(app, wait_interval=0.1)

    pipeline()
    """
)


def test_sigterm_on_a_kfp_local_step_cancels_the_app_and_leaves_no_process(
    local_apps: Path, tmp_path: Path
) -> None:
    """A real kfp.local pipeline; its launcher step process gets SIGTERM while the app runs.

    The step cancels the app and fails, the pipeline fails, and nothing is left: no replica,
    no supervisor (checked by the ``local_apps`` fixture), no step or pipeline process.
    """
    out_dir = tmp_path / "kfpsig"
    app = make_app("kfplocalsig", out_dir, replicas=2, sleep=600)
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PIPELINE_IN_SUBPROCESS,
            json.dumps(app.to_dict()),
            str(tmp_path / "pipeline-root"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its session holds the pipeline and every kfp.local step
    )
    try:
        wait_until(lambda: len(read_pids(out_dir)) == 2, 60, "both replicas to start")
        (step,) = step_processes(driver.pid)
        replicas = read_pids(out_dir)
        assert all(pid_alive(p) for p in replicas)
        (handle,) = apps_named("kfplocalsig-")
        assert app_state(handle) == AppState.RUNNING
        os.kill(step, signal.SIGTERM)
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert driver.returncode != 0, output
    assert "step terminated by signal 15; cancelling the app" in output
    assert re.search(r"Pipeline \S*kfp-sigterm\S* finished with status \S*FAILURE", output), output
    assert app_state(handle) == AppState.CANCELLED
    wait_until(lambda: not any(pid_alive(p) for p in replicas), 30, "replica processes to exit")
    assert processes_in_session(driver.pid) == []


def test_sigterm_to_the_step_wrapper_reaches_the_launcher_and_cancels_the_app(
    local_apps: Path, tmp_path: Path
) -> None:
    """SIGTERM delivered only to the process kfp.local started for the step (KFP's ``sh -ec``
    wrapper, the pod's main process) reaches the launcher, since the wrapper ``exec``s it: the
    app is cancelled and nothing is left running."""
    out_dir = tmp_path / "kfpwrap"
    app = make_app("kfpwrapsig", out_dir, replicas=2, sleep=600)
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PIPELINE_IN_SUBPROCESS,
            json.dumps(app.to_dict()),
            str(tmp_path / "pipeline-root"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(lambda: len(read_pids(out_dir)) == 2, 60, "both replicas to start")
        (wrapper,) = step_wrappers(driver.pid)
        (handle,) = apps_named("kfpwrapsig-")
        os.kill(wrapper, signal.SIGTERM)
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert "step terminated by signal 15; cancelling the app" in output, output
    assert app_state(handle) == AppState.CANCELLED
    replicas = read_pids(out_dir)
    wait_until(lambda: not any(pid_alive(p) for p in replicas), 30, "replica processes to exit")
    assert processes_in_session(driver.pid) == []


def test_exit_handler_step_cancels_apps_left_running(local_apps: Path, tmp_path: Path) -> None:
    """The exit-handler function cancels a job's running apps (kfp.local does not run
    ``dsl.ExitHandler`` pipelines, so the component's function is called directly)."""
    from torchx_kfp.launcher import torchx_cancel_job_apps
    from torchx_kfp.runtime import step_owner

    out_dir = tmp_path / "left"
    app = make_app("kfpleft", out_dir, replicas=2, sleep=600)
    with get_runner() as runner:  # as a launcher step of job-exit left it: owner recorded
        handle = runner.run(app, "local_cwd")
        assert runner.set_owner(handle, step_owner("job-exit", "torchx-launcher", "7"))
    wait_until(lambda: len(read_pids(out_dir)) == 2, 60, "both replicas to start")
    assert torchx_cancel_job_apps(job_id="job-other") == []
    assert torchx_cancel_job_apps(job_id="job-exit") == [handle]
    with get_runner() as runner:
        runner.wait(handle, wait_interval=0.1)
    assert app_state(handle) == AppState.CANCELLED
    pids = read_pids(out_dir)
    wait_until(lambda: not any(pid_alive(p) for p in pids), 30, "replica processes to exit")
