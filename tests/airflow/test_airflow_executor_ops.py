"""What an operator of TorchXExecutor meets (issue 35): settings from environment variables only,
a clean stop that leaves apps for the next scheduler, reasons in the task's log, and the app's
exit code as the task's outcome. Over the fake scheduler, as ``test_airflow_executor.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_scheduler import JobTable
from test_airflow_executor import _TI, Harness, workload

from torchx_airflow import task_entry
from torchx_airflow._executor_options import SECTION, SETTING_KEYS, provider_config
from torchx_airflow.executors import TorchXExecutor
from torchx_airflow.executors._task_log import TaskLog
from torchx_airflow.executors.config import (
    ExecutorSettings,
    InvalidExecutorConfigError,
    TaskSettings,
)
from torchx_core.specs import AppState


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    table = JobTable()
    table.hold = True
    harness = Harness(table)
    harness.ex._task_log = TaskLog(tmp_path)
    return harness


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- 1. the section's variables count without a section in airflow.cfg -------------------------


def test_the_provider_registers_every_setting_of_the_section() -> None:
    (section,) = provider_config()
    assert section == SECTION
    assert tuple(provider_config()[SECTION]["options"]) == SETTING_KEYS
    fields = {f.name for f in ExecutorSettings.__dataclass_fields__.values()} - {"task", "explicit"}
    fields |= {f.name for f in TaskSettings.__dataclass_fields__.values()}
    assert set(SETTING_KEYS) == fields


def test_environment_variables_alone_configure_the_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.configuration import conf

    assert not conf.has_section(SECTION)  # no [torchx_executor] in this airflow.cfg
    monkeypatch.setenv("AIRFLOW__TORCHX_EXECUTOR__POLL_INTERVAL", "7")
    monkeypatch.setenv("AIRFLOW__TORCHX_EXECUTOR__MEMMB", "2048")  # Airflow lowers the key
    monkeypatch.setenv("AIRFLOW__TORCHX_EXECUTOR__SCHEDULER", "slurm")
    s = TorchXExecutor().settings
    assert (s.poll_interval, s.task.memMB, s.task.scheduler) == (7.0, 2048, "slurm")


def test_an_unknown_variable_of_the_section_stops_the_start_with_did_you_mean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__TORCHX_EXECUTOR__POLL_INTERVALL", "7")
    with pytest.raises(InvalidExecutorConfigError) as e:
        TorchXExecutor().start()
    assert "'poll_intervall'" in str(e.value) and "Did you mean: 'poll_interval'?" in str(e.value)
    assert "AIRFLOW__TORCHX_EXECUTOR__<KEY>" in str(e.value)


# -- 2. a clean stop leaves the apps for the next scheduler ----------------------------------------


def test_a_clean_stop_leaves_running_apps_unless_cancel_on_end(tmp_path: Path) -> None:
    assert ExecutorSettings().cancel_on_end is False
    for cancel_on_end, want in ((False, 0), (True, 1)):
        table = JobTable()
        table.hold = True
        settings = ExecutorSettings(
            task=TaskSettings(scheduler="fake"), poll_interval=0.0, cancel_on_end=cancel_on_end
        )
        h = Harness(table, settings)
        a, b = workload("a"), workload("b")
        h.queue(a, b)
        ids = [h.app_id(a), h.app_id(b)]
        h.ex.end()
        assert [table.job(i).cancelled for i in ids] == [want, want], cancel_on_end
        h2 = Harness(table, settings)
        h2.queue(workload("c"))
        h2.ex.terminate()
        assert table.job(h2.app_id(workload("c"))).cancelled == want


# -- 3. the reason reaches the task's log ----------------------------------------------------------


def test_a_bad_executor_config_is_written_to_the_tasks_log(h: Harness, tmp_path: Path) -> None:
    bad = workload("bad", executor_config={"torchx": {"cpus": 4}})
    h.queue(bad)
    assert h.events()[bad.ti.key][0] == "failed"
    (rec,) = records(tmp_path / bad.log_path)
    assert rec["level"] == "error" and "Did you mean: 'cpu'?" in rec["event"]


def test_an_unknown_scheduler_is_written_to_the_tasks_log(h: Harness, tmp_path: Path) -> None:
    h.ex._settings = ExecutorSettings(task=TaskSettings(scheduler="nope"), poll_interval=0.0)
    wl = workload()
    h.queue(wl)
    (rec,) = records(tmp_path / wl.log_path)
    assert "could not start the app" in rec["event"] and "nope" in rec["event"]


def test_an_app_cancelled_from_outside_writes_its_end_and_log_tail_to_the_tasks_log(
    h: Harness, tmp_path: Path
) -> None:
    wl = workload()
    h.queue(wl)
    log = tmp_path / wl.log_path
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps({"event": "the task's own line", "level": "info"}) + "\n")
    job = h.table.job(h.app_id(wl))
    job.logs[("airflow-task", 0)] = ["Traceback (most recent call last):\n", "KeyError: 'x'\n"]
    h.table.set_state(h.app_id(wl), AppState.CANCELLED)
    h.ex.sync()
    assert h.events()[wl.ti.key][0] == "failed"
    recs = records(log)
    assert recs[0]["event"] == "the task's own line"  # appended, never replaced
    assert "ended CANCELLED" in recs[1]["event"] and recs[1]["level"] == "error"
    assert [r["event"] for r in recs[2:]] == [
        "last log lines:",
        "[airflow-task/0] Traceback (most recent call last):",
        "[airflow-task/0] KeyError: 'x'",
    ]


def test_the_apps_log_becomes_the_tasks_log_when_the_task_wrote_none_here(
    h: Harness, tmp_path: Path
) -> None:
    wl = workload()
    h.queue(wl)
    line = json.dumps({"event": "task output", "level": "info"})
    h.table.job(h.app_id(wl)).logs[("airflow-task", 0)] = [line + "\n", "plain line\n"]
    h.table.set_state(h.app_id(wl), AppState.SUCCEEDED)
    h.ex.sync()
    assert h.events()[wl.ti.key][0] == "success"
    recs = records(tmp_path / wl.log_path)
    assert [r["event"] for r in recs] == ["task output", "plain line"]


def test_get_task_log_renders_the_path_with_airflows_public_template(h: Harness) -> None:
    from torchx_airflow.executors import executor as module

    assert "_render_filename" not in Path(module.__file__).read_text()


# -- 4. the app's exit code is the task's outcome --------------------------------------------------


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (None, 0),
        ("success", 0),
        ("skipped", 0),
        ("deferred", 0),
        ("up_for_reschedule", 0),
        ("failed", task_entry.EXIT_TASK_FAILED),
        ("up_for_retry", task_entry.EXIT_TASK_FAILED),
        ("SERVER_TERMINATED", task_entry.EXIT_TASK_STOPPED),
        ("removed", task_entry.EXIT_TASK_FAILED),
    ],
)
def test_exit_code_table(state: str | None, code: int) -> None:
    assert task_entry.exit_code(state) == code


@pytest.mark.parametrize(("final", "code"), [("failed", 1), ("up_for_retry", 1), ("success", 0)])
def test_the_entry_exits_with_the_tasks_final_state_not_the_supervisors_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], final: str, code: int
) -> None:
    """Airflow's supervisor returns 0 when the task reported its own failure; the entry reads
    the final state from the coordinator's result."""
    import airflow.sdk.execution_time.execute_workload as ew
    from airflow.sdk.execution_time import coordinator as co

    def execute_task(self: Any, **kw: Any) -> Any:  # the task reported its state, exited 0
        return co.BaseCoordinator.ExecutionResult(0, final)

    monkeypatch.setattr(co._PythonCoordinator, "execute_task", execute_task)
    co.reset_coordinator_manager()

    def run(wl: Any) -> None:  # as supervise_task: the queue's coordinator runs the task
        result = co.get_coordinator_manager().for_queue(wl.ti.queue).execute_task(what=wl.ti)
        assert result.exit_code == 0

    monkeypatch.setattr(ew, "execute_workload", run)
    monkeypatch.setenv(task_entry.TOKEN_ENV, "tok")
    try:
        assert task_entry.main([workload().model_dump_json(exclude={"token"})]) == code
    finally:
        co.reset_coordinator_manager()
    if code:
        assert f"the task ended {final}: exit {code}" in capsys.readouterr().err


def test_the_apps_command_starts_without_a_runtime_warning(h: Harness) -> None:
    """``python -m`` of a module its package imported first warns (RuntimeWarning) and loads the
    executor into every task: the app's module sits outside the executor's package."""
    import os
    import subprocess
    import sys

    wl = workload()
    h.queue(wl)
    role = h.table.job(h.app_id(wl)).app.roles[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop(task_entry.TOKEN_ENV, None)
    command = [role.entrypoint, "-W", "error::RuntimeWarning", *role.args[:2]]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 2 and proc.stderr.startswith("usage:"), proc.stderr


# -- on par with Airflow's executors: submit retries, metrics, health ------------------------------


def test_a_failed_submit_is_retried_with_back_off_before_the_try_fails(
    h: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torchx_airflow.executors import executor as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    h.ex._settings = ExecutorSettings(task=TaskSettings(scheduler="fake"), poll_interval=0.0,
                                      submit_retries=2)  # fmt: skip
    _raise_next = [2]

    def flaky(_info: Any) -> None:
        _raise_next[0] -= 1
        h.table.before_schedule = flaky if _raise_next[0] > 0 else None
        raise TimeoutError("sbatch: Socket timed out")

    h.table.before_schedule = flaky
    wl = workload()
    h.queue(wl)
    assert h.events() == {} and wl.ti.key in h.ex.running  # waits 2 s, its slot kept
    h.ex.sync()
    assert not h.table.jobs  # not due yet
    now[0] += 2.0
    h.ex.sync()  # second attempt fails: waits 4 s
    assert not h.table.jobs and h.events() == {}
    now[0] += 4.0
    h.ex.sync()
    assert len(h.table.jobs) == 1 and h.events()[wl.ti.key][0] == "queued"


def test_submit_retries_run_out_and_the_try_fails_with_every_attempt_counted(
    h: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torchx_airflow.executors import executor as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    h.ex._settings = ExecutorSettings(task=TaskSettings(scheduler="fake"), poll_interval=0.0,
                                      submit_retries=1)  # fmt: skip

    def always(_info: Any) -> None:
        h.table.before_schedule = always
        raise TimeoutError("sbatch: Socket timed out")

    h.table.before_schedule = always
    wl = workload()
    h.queue(wl)
    now[0] += 2.0
    h.ex.sync()
    state, info = h.events()[wl.ti.key]
    assert state == "failed" and "after 2 attempts" in info and "Socket timed out" in info
    assert wl.ti.key not in h.ex.running
    (rec,) = records(tmp_path / wl.log_path)
    assert "after 2 attempts" in rec["event"]


def test_executor_events_are_counted_in_airflows_metrics(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.observability import stats

    counted: list[str] = []
    timed: list[str] = []
    monkeypatch.setattr(stats, "incr", lambda name, *a, **kw: counted.append(name))
    monkeypatch.setattr(stats, "timing", lambda name, *a, **kw: timed.append(name))
    ok, bad, gone = workload("ok"), workload("bad"), workload("gone")
    h.queue(ok, bad, gone)
    h.table.set_state(h.app_id(bad), AppState.FAILED)
    h.ex.sync()
    h.ex.revoke_task(ti=_TI(gone, h.handle(gone)))  # type: ignore[arg-type]
    assert counted.count("torchx_executor.submitted") == 3
    assert counted.count("torchx_executor.failed") == 1
    assert counted.count("torchx_executor.cancelled") == 1
    assert timed and set(timed) == {"torchx_executor.status_read"}  # one per batched read


def test_check_health_refuses_an_unknown_default_scheduler_at_start() -> None:
    table = JobTable()
    h = Harness(table)
    h.ex._settings = ExecutorSettings(task=TaskSettings(scheduler="no_such_scheduler"))
    with pytest.raises(Exception, match="no_such_scheduler"):
        h.ex.start()


def test_cli_lists_the_executors_apps_and_cleans_up_those_whose_task_is_gone(
    h: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from torchx_airflow import executor_cli as cli

    (group,) = TorchXExecutor.get_cli_commands()
    assert group.name == "torchx-executor"
    assert {c.name for c in group.subcommands} == {"list", "cleanup"}
    live, gone = workload("live"), workload("gone")
    h.queue(live, gone)
    h.runner.run(_foreign_app(), "fake")  # not the executor's: never listed, never cancelled
    states = {str(live.ti.id): "running"}  # gone's try is over (retried: a new id)

    def ti_states(ids: list[str]) -> dict[str, str | None]:
        return {i: states[i] for i in ids if i in states}

    args = argparse.Namespace(scheduler="fake", yes=False)
    apps = cli.list_apps(args, runner=h.runner, ti_states=ti_states)
    assert {a.ti_id: a.orphaned for a in apps} == {str(live.ti.id): False, str(gone.ti.id): True}
    assert cli.cleanup(args, runner=h.runner, ti_states=ti_states) == [h.handle(gone)]
    assert h.table.job(h.app_id(gone)).cancelled == 0  # without --yes: printed only
    args.yes = True
    assert cli.cleanup(args, runner=h.runner, ti_states=ti_states) == [h.handle(gone)]
    assert h.table.job(h.app_id(gone)).cancelled == 1
    assert h.table.job(h.app_id(live)).cancelled == 0
    assert f"cancelled {h.handle(gone)}" in capsys.readouterr().out


def _foreign_app() -> Any:
    from torchx_core.specs import AppDef, Role

    return AppDef(name="foreign", roles=[Role(name="r", image="/tmp", entrypoint="true")])


def test_handles_are_the_same_in_airflow_and_in_torchx_list() -> None:
    """The executor's session is the CLI's (``local_cwd://torchx/...`` in both)."""
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        assert ExecutorSettings().session_name == runner.name()
