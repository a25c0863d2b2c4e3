"""Unit tests of ``torchx_airflow.executors.TorchXExecutor`` over the fake scheduler.

A real executor (Airflow's ``BaseExecutor``) and a real Runner over ``tests/runner/
fake_scheduler.py``; workloads are real ``ExecuteTask`` objects; the task-instance rows the
executor reconciles against come from an injected reader (a dict the test edits).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.fake_scheduler import FakeScheduler, JobTable

from torchx_airflow.executors import TorchXExecutor
from torchx_airflow.executors._decisions import Outcome, Verdict, outcome, try_over, verdict
from torchx_airflow.executors.config import (
    ExecutorSettings,
    InvalidExecutorConfigError,
    TaskSettings,
)
from torchx_airflow.executors.entry import TOKEN_ENV
from torchx_airflow.task_entry import SERVER_ENV
from torchx_core.runner.lifecycle import Phase
from torchx_core.specs import AppState, parse_app_handle
from torchx_core.specs.errors import is_permanent_error

TOKEN = "secret-jwt-token-9d1c"


class CountingScheduler(FakeScheduler):
    """The fake, counting batched reads."""

    batched: ClassVar[list[list[str]]] = []

    def describe_many(self, app_ids: Any) -> Any:
        ids = list(app_ids)
        CountingScheduler.batched.append(ids)
        return super().describe_many(ids)


def _runner(table: JobTable) -> Any:
    from torchx_core.runner import Runner

    CountingScheduler.batched = []
    return Runner("test", {"fake": lambda name, **kw: CountingScheduler(name, table, **kw)})


def workload(task_id: str = "t1", try_number: int = 1, executor_config: dict | None = None) -> Any:
    from airflow.executors.workloads import BundleInfo, ExecuteTask
    from airflow.executors.workloads.task import TaskInstanceDTO

    ti = TaskInstanceDTO(
        id=uuid.uuid4(), task_id=task_id, dag_id="d", run_id="r1", try_number=try_number,
        dag_version_id=uuid.uuid4(), map_index=-1, pool_slots=1, priority_weight=1, queue="default",
        executor_config=executor_config,
    )  # fmt: skip
    return ExecuteTask(
        ti=ti, dag_rel_path=Path("d.py"), token=TOKEN, log_path="d/r1/t1/1.log",
        bundle_info=BundleInfo(name="dags-folder"),
    )  # fmt: skip


class Inline(Executor):
    """Runs each submit at once, in the caller's thread (the result is taken by ``sync``)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the future holds it, as a pool's would
            future.set_exception(e)
        return future


class Harness:
    """An executor over the fake, with task-instance rows the test controls (submits inline
    unless ``submitter`` is given)."""

    def __init__(
        self,
        table: JobTable,
        settings: ExecutorSettings | None = None,
        submitter: Executor | None = None,
        runner: Any = None,
    ) -> None:
        self.table = table
        self.rows: dict[Any, tuple[str | None, int]] = {}
        self.runner = runner or _runner(table)
        self.ex = TorchXExecutor(parallelism=300, runner=self.runner, ti_reader=self._rows,
                                 submitter=submitter or Inline())  # fmt: skip
        self.ex._settings = settings or ExecutorSettings(
            task=TaskSettings(scheduler="fake", image="/tmp"),
            poll_interval=0.0,
            unknown_timeout=0.0,
            kill_grace=0.0,
        )  # fmt: skip
        self.ex.job_id = 7
        self.ex.start()

    def _rows(self, keys: list[Any]) -> dict[Any, tuple[str | None, int]]:
        return {k.primary: self.rows[k.primary] for k in keys if k.primary in self.rows}

    def queue(self, *wls: Any) -> None:
        for wl in wls:
            self.ex.queued_tasks[wl.ti.key] = wl
            self.rows[wl.ti.key.primary] = ("queued", wl.ti.try_number)
        self.ex.heartbeat()

    def app_id(self, wl: Any) -> str:
        return parse_app_handle(self.handle(wl)).app_id

    def handle(self, wl: Any) -> str:
        return self.ex._apps[wl.ti.key].handle

    def events(self) -> dict[Any, tuple[Any, Any]]:
        return self.ex.get_event_buffer()


@pytest.fixture
def h() -> Harness:
    table = JobTable()
    table.hold = True
    return Harness(table)


def test_each_workload_is_one_app_running_the_task_sdk_entry_with_the_token_in_env_only(
    h: Harness, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG")
    wl = workload()
    h.queue(wl)
    h.ex.sync()
    assert TOKEN not in caplog.text and TOKEN not in "".join(capsys.readouterr())  # never logged
    job = h.table.job(h.app_id(wl))
    role = job.app.roles[0]
    assert role.entrypoint == sys.executable
    assert role.args[:2] == ["-m", "torchx_airflow.task_entry"]
    assert role.env[TOKEN_ENV] == TOKEN
    assert role.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].endswith("/execution/")
    assert TOKEN not in json.dumps(role.args)  # never on the command line
    sent = json.loads(role.args[2])
    assert sent["ti"]["task_id"] == "t1" and "token" not in sent
    # Airflow records the handle as the task's external_executor_id; the owner names the task
    state, info = h.events()[wl.ti.key]
    assert (state, info) == ("queued", h.handle(wl))
    assert job.owner.endswith(f"/ti={wl.ti.id}") and "job=7" in job.owner
    assert wl.ti.key in h.ex.running


def test_entry_point_rebuilds_the_workload_with_the_token_from_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import airflow.sdk.execution_time.execute_workload as ew

    from torchx_airflow.executors import entry

    wl = workload()
    got: list[Any] = []
    monkeypatch.setattr(ew, "execute_workload", got.append)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert entry.main([wl.model_dump_json(exclude={"token"})]) == 0
    assert got[0].token == TOKEN and got[0].ti.id == wl.ti.id
    assert TOKEN_ENV not in __import__("os").environ  # the task never inherits it
    assert entry.main([wl.model_dump_json(exclude={"token"})]) == 2  # no token: refused


def test_sync_reads_every_app_in_one_batched_call_and_reports_ends(h: Harness) -> None:
    wls = [workload(f"t{i}") for i in range(5)]
    h.queue(*wls)
    h.events()
    CountingScheduler.batched = []
    h.ex.sync()
    assert len(CountingScheduler.batched) == 1 and len(CountingScheduler.batched[0]) == 5
    h.table.set_state(h.app_id(wls[0]), AppState.SUCCEEDED)
    h.table.job(h.app_id(wls[1])).logs[("airflow-task", 0)] = ["boom\n", "Traceback: ValueError\n"]
    h.table.set_state(h.app_id(wls[1]), AppState.FAILED)
    h.table.vanish(h.app_id(wls[2]))
    h.ex.sync()
    assert len(CountingScheduler.batched) == 2
    ev = h.events()
    assert ev[wls[0].ti.key][0] == "success"
    assert ev[wls[1].ti.key][0] == "failed"
    assert (
        "ended FAILED" in ev[wls[1].ti.key][1] and "Traceback: ValueError" in ev[wls[1].ti.key][1]
    )
    assert ev[wls[2].ti.key][0] == "failed" and "vanished" in ev[wls[2].ti.key][1]
    assert h.ex.running == {w.ti.key for w in wls[3:]}


def test_unknown_and_vanished_apps_wait_for_the_grace_period() -> None:
    table = JobTable()
    table.hold = True
    h = Harness(table, ExecutorSettings(task=TaskSettings(scheduler="fake"), poll_interval=0.0,
                                        unknown_timeout=3600.0))  # fmt: skip
    wl = workload()
    h.queue(wl)
    h.events()
    table.vanish(h.app_id(wl))
    h.ex.sync()
    table.describe_error = RuntimeError("squeue timed out")
    h.ex.sync()
    assert h.events() == {} and wl.ti.key in h.ex.running


def test_a_bad_executor_config_fails_that_task_only_with_a_permanent_error(h: Harness) -> None:
    bad = workload("bad", executor_config={"torchx": {"cpus": 4}})
    good = workload("good", executor_config={"torchx": {"cpu": 4, "env": {"A": "1"}}})
    h.queue(bad, good)
    ev = h.events()
    assert ev[bad.ti.key][0] == "failed" and "Did you mean: 'cpu'?" in ev[bad.ti.key][1]
    role = h.table.job(h.app_id(good)).app.roles[0]
    assert role.resource.cpu == 4 and role.env["A"] == "1"
    with pytest.raises(InvalidExecutorConfigError) as e:
        TaskSettings().override({"torchx": {"cpus": 4}})
    assert is_permanent_error(e.value)


def test_an_unknown_run_option_in_executor_config_fails_that_task_before_any_submit(
    h: Harness,
) -> None:
    # issue 32: it ran, "passing it through unchecked"; the scheduler's dry run now refuses it
    bad = workload("bad", executor_config={"torchx": {"cfg": {"priorit": 1}}})
    good = workload("good", executor_config={"torchx": {"cfg": {"priority": 1}}})
    h.queue(bad, good)
    ev = h.events()
    state, message = ev[bad.ti.key][0], str(ev[bad.ti.key][1])
    assert state == "failed"
    assert "unknown run option 'priorit'. Did you mean: 'priority'?" in message
    assert [job.app.name for job in h.table.jobs.values()] == [h.table.job(h.app_id(good)).app.name]


def test_section_poll_interval_follows_the_table(h: Harness) -> None:
    for value in (0, "0", -1, "nan", "inf", True):
        with pytest.raises(InvalidExecutorConfigError, match="poll_interval must be a finite"):
            ExecutorSettings.from_section({"poll_interval": value})
    assert ExecutorSettings.from_section({"poll_interval": " 5 "}).poll_interval == 5.0


def test_an_explicit_section_value_wins_over_the_connection_even_when_it_is_the_default() -> None:
    section = ExecutorSettings.from_section({"scheduler": "local_cwd", "session_name": "torchx"})
    merged = section.with_connection("slurm", {"partition": "gpu"}, "conn-session")
    assert (merged.task.scheduler, merged.session_name) == ("local_cwd", "torchx")
    unset = ExecutorSettings.from_section({}).with_connection("slurm", {}, "conn-session")
    assert (unset.task.scheduler, unset.session_name) == ("slurm", "conn-session")


def test_settings_from_the_section_list_every_problem() -> None:
    s = ExecutorSettings.from_section(
        {
            "scheduler": "slurm",
            "cfg": '{"partition": "debug"}',
            "memMB": "2048",
            "env": '{"X": "y"}',
            "poll_interval": "5",
            "cancel_on_end": "false",
        }
    )
    assert (s.task.scheduler, s.task.cfg, s.task.memMB, s.task.env) == (
        "slurm",
        {"partition": "debug"},
        2048,
        {"X": "y"},
    )
    assert s.poll_interval == 5.0 and s.cancel_on_end is False
    with pytest.raises(InvalidExecutorConfigError) as e:
        ExecutorSettings.from_section({"schedular": "x", "cfg": "{", "memMB": "-1"})
    msg = str(e.value)
    assert (
        "Did you mean: 'scheduler'?" in msg
        and "cfg: must be a JSON object" in msg
        and "memMB" in msg
    )
    # another scheduler per task: the section's run options do not follow it
    t = s.task.override({"torchx": {"scheduler": "local_cwd", "cfg": {"log_dir": "/x"}}})
    assert t.cfg == {"log_dir": "/x"} and t.env == {"X": "y"}


def test_a_task_instance_that_moved_on_has_its_app_cancelled(h: Harness) -> None:
    cleared, failed, live = workload("cleared"), workload("failed"), workload("live")
    h.queue(cleared, failed, live)
    h.events()
    h.rows[cleared.ti.key.primary] = ("restarting", 1)
    h.rows[failed.ti.key.primary] = ("failed", 1)  # marked failed (kill_grace 0 here)
    h.rows[live.ti.key.primary] = ("running", 1)
    h.ex.sync()
    assert h.table.job(h.app_id(cleared)).cancelled == 1
    assert h.table.job(h.app_id(failed)).cancelled == 1
    assert h.table.job(h.app_id(live)).cancelled == 0
    h.ex.sync()  # the cancelled apps ended: done as Airflow asked (a cleared task is rescheduled)
    ev = h.events()
    assert (
        ev[cleared.ti.key][0] == "success"
        and "cancelled: its task instance is restarting" in ev[cleared.ti.key][1]
    )
    assert live.ti.key not in ev


def test_kill_grace_lets_an_ended_task_exit_on_its_own() -> None:
    table = JobTable()
    table.hold = True
    h = Harness(table, ExecutorSettings(task=TaskSettings(scheduler="fake"), poll_interval=0.0,
                                        kill_grace=3600.0))  # fmt: skip
    wl, retried = workload(), workload("retried")
    h.queue(wl, retried)
    h.rows[wl.ti.key.primary] = ("success", 1)
    h.rows[retried.ti.key.primary] = ("queued", 2)  # failed: its next try is queued
    h.ex.sync()
    assert table.job(h.app_id(wl)).cancelled == 0
    assert table.job(h.app_id(retried)).cancelled == 0


def test_apps_are_submitted_off_the_scheduler_loop_and_taken_by_sync() -> None:
    """A submit blocks in the scheduler's client (sbatch, a local launch): the loop goes on;
    its slot is taken meanwhile and ``sync`` reports the app once it exists."""
    table = JobTable()
    table.hold = True
    release, threads = threading.Event(), []

    def blocked(_info: Any) -> None:
        threads.append(threading.current_thread())
        release.wait()

    table.before_schedule = blocked
    h = Harness(table, submitter=ThreadPoolExecutor(2))
    wl = workload()
    h.queue(wl)  # returns while the submit is blocked
    assert h.ex.running == {wl.ti.key} and h.events() == {} and not h.ex._apps
    release.set()
    h.ex.wait_submits()
    assert threads and threads[0] is not threading.main_thread()
    assert h.events()[wl.ti.key] == ("queued", h.handle(wl))


def test_a_local_schedulers_submit_stays_in_the_loop_to_fork_its_supervisor() -> None:
    """The local scheduler forks an app's supervisor only from a single-threaded process: its
    submits run in the scheduler loop, never start the pool's threads."""
    from torchx_core.runner import Runner

    table = JobTable()
    table.hold = True
    threads: list[threading.Thread] = []
    table.before_schedule = lambda _info: threads.append(threading.current_thread())
    pool = ThreadPoolExecutor(2)
    local = Runner("test", {"local_cwd": lambda name, **kw: CountingScheduler(name, table, **kw)})
    settings = ExecutorSettings(task=TaskSettings(scheduler="local_cwd"), warm_start=False)
    h = Harness(table, settings, submitter=pool, runner=local)
    wl = workload()
    h.queue(wl)
    assert threads == [threading.main_thread()] and not pool._threads
    assert h.events()[wl.ti.key] == ("queued", h.handle(wl))


def test_a_task_revoked_while_its_submit_runs_has_its_app_cancelled() -> None:
    table = JobTable()
    table.hold = True
    release = threading.Event()
    table.before_schedule = lambda _info: release.wait()
    h = Harness(table, submitter=ThreadPoolExecutor(2))
    wl = workload()
    h.queue(wl)

    class _Ti:
        key = wl.ti.key

    h.ex.revoke_task(ti=_Ti())  # type: ignore[arg-type]
    release.set()
    h.ex.wait_submits()
    (job,) = table.jobs.values()
    assert job.cancelled == 1 and h.events() == {} and not h.ex.running


def test_an_ended_try_frees_its_slot_while_its_app_exits() -> None:
    """The task ended (its supervisor lingers up to a heartbeat): its slot is free for the next
    tasks at once, as LocalExecutor's; the app is still watched and reported when it ends."""
    table = JobTable()
    table.hold = True
    h = Harness(table, ExecutorSettings(task=TaskSettings(scheduler="fake"), poll_interval=0.0,
                                        kill_grace=3600.0))  # fmt: skip
    done, retried, deferred, live = (workload(t) for t in ("done", "retried", "deferred", "live"))
    h.queue(done, retried, deferred, live)
    h.events()
    h.rows[done.ti.key.primary] = ("success", 1)
    h.rows[retried.ti.key.primary] = ("queued", 2)  # its next try is queued
    h.rows[deferred.ti.key.primary] = ("deferred", 1)  # resumes as the same try: keeps its slot
    h.rows[live.ti.key.primary] = ("running", 1)
    h.ex.sync()
    assert h.ex.running == {deferred.ti.key, live.ti.key}
    assert h.ex.slots_available == 300 - 2
    assert done.ti.key in h.ex._apps and h.events() == {}  # still watched, nothing reported
    table.set_state(h.app_id(done), AppState.SUCCEEDED)
    h.ex.sync()
    assert h.events()[done.ti.key][0] == "success" and done.ti.key not in h.ex._apps


@pytest.mark.parametrize(
    ("state", "try_number", "exists", "want"),
    [
        ("success", 1, True, True), ("failed", 1, True, True), ("up_for_retry", 1, True, True),
        ("skipped", 1, True, True), ("running", 2, True, True), (None, None, False, True),
        ("running", 1, True, False), ("queued", 1, True, False), ("deferred", 1, True, False),
        ("up_for_reschedule", 1, True, False), ("restarting", 1, True, False),
        (None, 1, True, False),
    ],
)  # fmt: skip
def test_try_over_table(
    state: str | None, try_number: int | None, exists: bool, want: bool
) -> None:
    assert try_over(state, try_number, 1, exists=exists) is want


@pytest.mark.parametrize(
    ("phase", "expired", "want"),
    [
        (Phase.WAITING, False, Outcome.WAIT), (Phase.SUCCEEDED, False, Outcome.SUCCESS),
        (Phase.FAILED, False, Outcome.FAILED), (Phase.CANCELLED, False, Outcome.FAILED),
        (Phase.UNKNOWN, False, Outcome.WAIT), (Phase.UNKNOWN, True, Outcome.VANISHED),
        (Phase.VANISHED, False, Outcome.WAIT), (Phase.VANISHED, True, Outcome.VANISHED),
    ],
)  # fmt: skip
def test_outcome_table(phase: Phase, expired: bool, want: Outcome) -> None:
    assert outcome(phase, expired) == want


@pytest.mark.parametrize(
    ("state", "try_number", "exists", "want"),
    [
        ("running", 1, True, Verdict.KEEP), ("queued", 1, True, Verdict.KEEP),
        ("success", 1, True, Verdict.GRACE), ("failed", 1, True, Verdict.GRACE),
        ("up_for_retry", 1, True, Verdict.GRACE), ("restarting", 1, True, Verdict.CANCEL),
        (None, 1, True, Verdict.CANCEL), ("running", 2, True, Verdict.GRACE),
        (None, None, False, Verdict.GRACE), ("scheduled", 1, True, Verdict.CANCEL),
    ],
)  # fmt: skip
def test_verdict_table(
    state: str | None, try_number: int | None, exists: bool, want: Verdict
) -> None:
    assert verdict(state, try_number, 1, exists=exists) == want


class _TI:
    """The fields ``try_adopt_task_instances`` reads of a task instance."""

    def __init__(self, wl: Any, external_executor_id: str | None) -> None:
        self.id = wl.ti.id
        self.key = wl.ti.key
        self.external_executor_id = external_executor_id


def test_adoption_takes_over_live_apps_and_returns_the_others(h: Harness) -> None:
    live, gone, foreign = workload("live"), workload("gone"), workload("foreign")
    h.queue(live, gone, foreign)
    handles = {w.ti.task_id: h.handle(w) for w in (live, gone, foreign)}
    h.table.vanish(h.app_id(gone))
    h.table.job(h.app_id(foreign)).owner = "someone-else/ti=other"
    # a new scheduler's executor (the old one died)
    new = TorchXExecutor(parallelism=300, runner=_runner(h.table), ti_reader=h._rows)
    new._settings = h.ex._settings
    new.job_id = 8
    tis = [_TI(live, handles["live"]), _TI(gone, handles["gone"]), _TI(foreign, handles["foreign"]),
           _TI(workload("none"), None)]  # fmt: skip
    left = new.try_adopt_task_instances(tis)
    assert [t.key.task_id for t in left] == ["gone", "foreign", "none"]
    assert new.running == {live.ti.key}
    assert len(CountingScheduler.batched) == 1  # one batched read for all candidates
    job = h.table.job(h.app_id(live))
    assert "job=8" in job.owner and len(h.table.jobs) == 2  # no second app
    # the old executor no longer owns it: its terminate() leaves it running
    h.ex.terminate()
    assert job.cancelled == 0 and h.table.job(h.app_id(foreign)).cancelled == 0
    h.table.set_state(h.app_id(live), AppState.SUCCEEDED)
    new.sync()
    assert new.get_event_buffer()[live.ti.key][0] == "success"


def test_terminate_end_and_revoke_cancel_what_the_executor_owns(h: Harness) -> None:
    """With ``cancel_on_end`` (default: leave them, ``test_airflow_executor_ops.py``)."""
    h.ex._settings = ExecutorSettings(
        task=TaskSettings(scheduler="fake"), poll_interval=0.0, cancel_on_end=True
    )
    a, b, c = workload("a"), workload("b"), workload("c")
    h.queue(a, b, c)
    ids = {w.ti.task_id: h.app_id(w) for w in (a, b, c)}
    h.ex.revoke_task(ti=_TI(a, h.handle(a)))  # type: ignore[arg-type]
    assert h.table.job(ids["a"]).cancelled == 1 and a.ti.key not in h.ex.running
    h.ex.terminate()
    assert h.table.job(ids["b"]).cancelled == 1 and h.table.job(ids["c"]).cancelled == 1
    assert h.events().get(a.ti.key, ("queued",))[0] == "queued"  # revoke reports nothing


def test_submit_failure_is_reported_not_raised(h: Harness) -> None:
    h.ex._settings = ExecutorSettings(task=TaskSettings(scheduler="nope"), poll_interval=0.0)
    wl = workload()
    h.queue(wl)
    state, info = h.events()[wl.ti.key]
    assert state == "failed" and "nope" in info and wl.ti.key not in h.ex.running


def test_with_a_fernet_key_the_token_is_sealed_in_the_apps_environment(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler may keep the app's environment on disk (a Slurm batch script): with Airflow's
    fernet key the token there is ciphertext, and the entry point opens it."""
    import airflow.models.crypto as core_crypto
    import airflow.sdk.crypto as sdk_crypto
    from cryptography.fernet import Fernet

    from torchx_airflow.executors import entry

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    for fn in (core_crypto.get_fernet, sdk_crypto.get_fernet):
        fn.cache_clear()
    try:
        wl = workload()
        h.queue(wl)
        sealed = h.table.job(h.app_id(wl)).app.roles[0].env[TOKEN_ENV]
        assert sealed.startswith("fernet:") and TOKEN not in sealed
        assert entry.unseal(sealed) == TOKEN
    finally:
        for fn in (core_crypto.get_fernet, sdk_crypto.get_fernet):
            fn.cache_clear()


def test_a_dead_server_is_replaced_and_one_that_keeps_dying_is_given_up(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The executor checks its server at each local submit: a killed one is cleaned up and
    another started; after ``_FORK_QUICK_DEATHS`` quick deaths in a row, apps start cold."""
    from torchx_airflow.executors import executor as executor_module

    ex = TorchXExecutor(parallelism=4)
    ex._settings = ExecutorSettings(python=sys.executable)
    seen: list[tuple[int, str]] = []
    try:
        for _ in range(executor_module._FORK_QUICK_DEATHS):
            env = ex._fork_env("local_cwd")
            assert ex._fork is not None and env == {SERVER_ENV: ex._fork.path}
            assert (ex._fork.pid, ex._fork.directory) not in seen  # a new server each time
            seen.append((ex._fork.pid, ex._fork.directory))
            os.kill(ex._fork.pid, signal.SIGKILL)
            wait = time.monotonic() + 30
            while ex._fork.alive() and time.monotonic() < wait:
                time.sleep(0.05)
        assert ex._fork_env("local") == {}, "a server that keeps dying is not started again"
        assert ex._fork is None
        assert ex._fork_env("slurm") == {}  # never for a remote scheduler
    finally:
        ex._stop_fork()
    assert all(not os.path.exists(directory) for _, directory in seen)  # each one cleaned up
    log = capfd.readouterr().out  # the executor's log (Airflow's structlog, on stdout)
    assert f"the warm fork server (pid {seen[0][0]}) died (exit -9)" in log, log
    gave_up = rf"\(pid {seen[-1][0]}\) died \d+ s after its start \(exit -9\), 3 times in a row"
    assert re.search(gave_up, log), log
