"""TorchXExecutor on a real Airflow deployment (PostgreSQL, scheduler, dag-processor, triggerer,
api-server), beside the default LocalExecutor: ``LocalExecutor,torchx_airflow.executors.
TorchXExecutor``; the DAGs (``dags/tx_executor.py``) pick it with ``executor="TorchXExecutor"``.

The deployment is a separate one (``<AIRFLOW_DEPLOYMENT>-txexec``, API and PostgreSQL ports 50
above the main deployment's), started by ``scripts/services/airflow/start.sh`` and stopped at
the end of the session if this session started it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.airflow_deployment import (
    DEPLOYMENT,
    HERE,
    RUN_DIR,
    SCRIPTS,
    STATE_DIR,
    AirflowDeployment,
    _start,
    wait_until,
)
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (the real cluster)

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

NAME = f"{DEPLOYMENT}-txexec"
API_PORT = int(os.environ.get("AIRFLOW_API_PORT", "18080")) + 50
PG_PORT = int(os.environ.get("AIRFLOW_PG_PORT", "15432")) + 50
HOME = STATE_DIR / NAME
#: a JWT in clear (header.payload.signature, the first two base64url JSON objects: ``eyJ``)
JWT = re.compile(r"eyJ[\w-]*\.eyJ[\w-]*\.[\w-]*")
TORCHX_TASKS = 9  # of the 10 tasks of txe_local/txe_slurm, one runs on LocalExecutor


def _env() -> dict[str, str]:
    return {
        "AIRFLOW_API_PORT": str(API_PORT),
        "AIRFLOW_PG_PORT": str(PG_PORT),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor,torchx_airflow.executors.TorchXExecutor",
        "AIRFLOW__TORCHX_EXECUTOR__SCHEDULER": "local_cwd",
        "AIRFLOW__TORCHX_EXECUTOR__IMAGE": str(HOME / "work"),
        "AIRFLOW__TORCHX_EXECUTOR__POLL_INTERVAL": "1",
        "AIRFLOW__TORCHX_EXECUTOR__KILL_GRACE": "40",
        # adoption after a scheduler crash: notice the dead scheduler and adopt within seconds
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "20",
        # a task notices a user's clear or mark-failed at its next heartbeat and stops itself;
        # heartbeats 20 s apart leave the executor's cancel (its job's scancel) to be seen first.
        # A task's supervisor may then take up to a heartbeat to exit after its task ended: the
        # kill grace (an ended task's app is cancelled only if it lingers) must exceed that
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "20",
        # the scheduler submits Slurm jobs (sbatch exports its environment to the jobs)
        "SLURM_CONF": os.environ.get("SLURM_CONF") or str(STATE_DIR / "slurm" / "slurm.conf"),
    }


@pytest.fixture(scope="session")
def executor_deployment() -> Iterator[AirflowDeployment]:
    """The deployment whose scheduler runs TorchXExecutor beside LocalExecutor."""
    (HOME / "work").mkdir(parents=True, exist_ok=True)
    home, started = _start(_env(), NAME)
    dep = AirflowDeployment(home)
    (dep.work / "slurm-jobs").mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "dags" / "tx_executor.py", dep.dags / "tx_executor.py")
    try:
        yield dep
    finally:
        if started:
            stop_env = {**os.environ, **_env(), "AIRFLOW_DEPLOYMENT": NAME}
            subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=stop_env, capture_output=True,
                           timeout=300, check=False)  # fmt: skip


@pytest.fixture
def local_root(executor_deployment: AirflowDeployment, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(executor_deployment.local_root))
    return executor_deployment.local_root


def run_state(dep: AirflowDeployment, dag_id: str, run_id: str) -> str:
    return dep.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]


def wait_run(dep: AirflowDeployment, dag_id: str, run_id: str, timeout: float = 600) -> str:
    wait_until(lambda: run_state(dep, dag_id, run_id) in ("success", "failed"), timeout,
               f"run {run_id} of {dag_id} to end", interval=2)  # fmt: skip
    return run_state(dep, dag_id, run_id)


def tis(dep: AirflowDeployment, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    got = dep.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100")
    return {t["task_id"]: t for t in got["task_instances"]}


def local_apps(prefix: str = "af-") -> dict[str, Any]:
    from torchx_core.runner import get_runner

    with get_runner() as r:
        return {a.app_handle: a for a in r.list("local_cwd") if (a.name or "").startswith(prefix)}


def release(dep: AirflowDeployment, run_id: str) -> None:
    Path(dep.work, f"{run_id}.release").touch()


def check_dag_run(dep: AirflowDeployment, dag_id: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """Runs a 10-task DAG; checks XComs, retries, executors and logs while and after running."""
    run = dep.trigger(dag_id)
    try:
        dep.wait_ti(dag_id, run, "watched", {"running"})
        # the log of a running task, through the REST API
        wait_until(
            lambda: "watched-marker-before-release" in dep.task_log(dag_id, run, "watched", 1),
            120, "the running task's log to show its first line",
        )  # fmt: skip
        assert "watched-marker-after-release" not in dep.task_log(dag_id, run, "watched", 1)
    finally:
        release(dep, run)
    state = wait_run(dep, dag_id, run)
    got = tis(dep, dag_id, run)
    assert state == "success", {t: (v["state"], v["try_number"]) for t, v in got.items()}
    assert dep.xcom(dag_id, run, "total", "return_value") == 10
    final = dep.xcom(dag_id, run, "final", "return_value")
    assert final["value"] == 10 and final["tries"] == 2 and final["checked"] == "local saw 10"
    # the failing task: its first try failed, Airflow retried it, the retry ran as a new app
    assert got["flaky"]["try_number"] == 2
    first = dep.task_log(dag_id, run, "flaky", 1)
    assert "flaky try 1" in first and "Task failed with exception" in first
    # who ran what: TorchXExecutor for the TorchX tasks, the default executor for local_check
    assert {t for t, v in got.items() if v["executor"] == "TorchXExecutor"} == set(got) - {
        "local_check"
    }
    assert got["local_check"]["executor"] in (None, "", "LocalExecutor")
    # and the log after the end
    assert "watched-marker-after-release" in dep.task_log(dag_id, run, "watched", 1)
    return run, got


def test_dag_with_dependencies_xcoms_and_retries_runs_on_local_cwd(
    executor_deployment: AirflowDeployment, local_root: Path
) -> None:
    dep = executor_deployment
    before = set(local_apps())
    check_dag_run(dep, "txe_local")

    def ended() -> dict[str, Any]:
        apps = {h: a for h, a in local_apps().items() if h not in before}
        return (
            apps
            if all(str(a.state) in ("SUCCEEDED", "FAILED", "CANCELLED") for a in apps.values())
            else {}
        )

    # the run can succeed before the last app's supervisor exited
    new = wait_until(ended, 120, "the run's apps to end")
    # one app per TorchX task try (flaky ran twice), each ran to its end; the app of flaky's
    # failed first try ended FAILED (the task's outcome, not its supervisor's exit 0)
    assert len(new) == TORCHX_TASKS + 1, sorted(a.name for a in new.values())
    failed = [a.name for a in new.values() if str(a.state) == "FAILED"]
    assert len(failed) == 1 and failed[0].startswith("af-flaky"), new
    assert {str(a.state) for a in new.values()} == {"SUCCEEDED", "FAILED"}, new


def test_the_deployment_is_configured_by_environment_variables_only(
    executor_deployment: AirflowDeployment,
) -> None:
    """No ``[torchx_executor]`` in airflow.cfg: its ``AIRFLOW__TORCHX_EXECUTOR__*`` variables
    count (the provider registers the section), ``airflow config`` shows them."""
    dep = executor_deployment
    # Airflow writes the registered section into the airflow.cfg it generates, all commented
    cfg = (dep.home / "airflow.cfg").read_text().partition("[torchx_executor]")[2]
    section = cfg.split("\n[", 1)[0].splitlines()
    assert not [line for line in section if line.strip() and not line.startswith("#")], section
    assert "status read every 1 s" in dep.service_log("scheduler")  # POLL_INTERVAL=1
    got = subprocess.run(
        [str(HERE.parents[1] / ".venv" / "bin" / "airflow"), "config", "get-value",
         "torchx_executor", "kill_grace"],
        env=dep.env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert got.returncode == 0 and got.stdout.strip() == "40", got.stderr[-2000:]


def test_failure_reasons_reach_the_tasks_log_and_apps_end_as_their_tasks(
    executor_deployment: AirflowDeployment, local_root: Path
) -> None:
    dep, dag = executor_deployment, "txe_reasons"
    run = dep.trigger(dag)
    try:
        wait_until(lambda: started(dep, run, "killed"), 300, "the task 'killed' to run")
        (handle,) = [h for h, a in local_apps("af-killed").items() if str(a.state) == "RUNNING"]
        from torchx_core.runner import get_runner

        with get_runner() as r:
            r.cancel(handle)  # from outside, as `torchx cancel` does
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "failed"
    got = tis(dep, dag, run)
    assert {t: v["state"] for t, v in got.items()} == dict.fromkeys(got, "failed"), got
    # where the user looks: the task's log (the UI's and the REST API's)
    assert "Did you mean: 'cpu'?" in dep.task_log(dag, run, "bad_config", 1)
    assert "no_such_scheduler" in dep.task_log(dag, run, "unknown_scheduler", 1)
    killed = dep.task_log(dag, run, "killed", 1)
    assert f"torchx app {handle} ended CANCELLED" in killed, killed[-3000:]
    assert "killed-marker-before-release" in killed
    # the apps ended as their tasks did: failed, timed out, stopped (never SUCCEEDED)
    from torchx_core.runner.lifecycle import app_name

    names = {app_name(f"af-{t}", (dag, t, run, -1, 1)): t for t in ("killed", "timed_out", "fails")}

    def ended() -> dict[str, str]:
        got = {names[a.name]: str(a.state) for a in local_apps().values() if a.name in names}
        return got if len(got) == 3 and "RUNNING" not in got.values() else {}

    states = wait_until(ended, 120, "the run's 3 apps to end")
    assert states == {"killed": "CANCELLED", "timed_out": "FAILED", "fails": "FAILED"}, states


# -- Slurm ----------------------------------------------------------------------------------------


def slurm_jobs(dep: AirflowDeployment, since: str) -> dict[str, str]:
    """``{job id: state}`` of the executor's Slurm jobs (``sacct``) started at ``since`` or
    later."""
    proc = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", since, "--name", "airflow-task-0",
         "-o", "JobID,State,WorkDir"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if proc.returncode != 0:  # slurmdbd busy: callers wait_until() an answer
        return {}
    out = proc.stdout
    jobs_dir = str(dep.work / "slurm-jobs")
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {r[0]: r[1] for r in rows if len(r) == 3 and r[2].startswith(jobs_dir)}


@pytest.mark.slurm
def test_same_dag_runs_each_task_as_a_slurm_job(
    executor_deployment: AirflowDeployment,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    dep = executor_deployment
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    earlier = set(wait_until(lambda: slurm_jobs(dep, since) or {"-": ""}, 60, "sacct"))
    run, _ = check_dag_run(dep, "txe_slurm")
    live = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}
    jobs = wait_until(
        lambda: (j := {k: v for k, v in slurm_jobs(dep, since).items() if k not in earlier})
        and len(j) >= TORCHX_TASKS + 1
        and not live & set(j.values()) and j,
        120, "sacct to list every job of the run, ended",
    )  # fmt: skip
    # one Slurm job per TorchX task try (flaky ran twice), none left over; each COMPLETED but
    # flaky's failed first try, FAILED (the task's outcome, not its supervisor's exit 0)
    assert len(jobs) == TORCHX_TASKS + 1, jobs
    assert sorted(jobs.values()) == ["COMPLETED"] * TORCHX_TASKS + ["FAILED"], jobs
    ran_in = {
        dep.xcom("txe_slurm", run, t, "return_value")["slurm_job"] for t in ("start", "watched")
    }
    ran_in.add(dep.xcom("txe_slurm", run, "final", "return_value")["watched"]["slurm_job"])
    assert None not in ran_in and ran_in <= set(jobs), (ran_in, jobs)
    # the scheduler keeps a copy of each batch script: the token in it is sealed, never a JWT
    for job in jobs:
        script = (dep.work / "slurm-jobs" / f"slurm-{job}-torchx.sbatch").read_text()
        assert "TORCHX_AIRFLOW_WORKLOAD_TOKEN=fernet:" in script
        # a JWT is three base64url parts joined by dots; a Fernet token (base64url) has no dot
        # and may hold "eyJ" by chance, so the whole JWT shape is what must be absent
        assert not JWT.search(script), JWT.search(script)


# -- adoption and kills ---------------------------------------------------------------------------


def scheduler_pid() -> int:
    return int((RUN_DIR / f"{NAME}-scheduler.pid").read_text().strip())


def restart_scheduler(dep: AirflowDeployment) -> None:
    """Starts a new scheduler (as start.sh does; stop.sh stops it by the same PID file)."""
    log = open(dep.home / "service-logs" / "scheduler.log", "ab")  # noqa: SIM115 - held by the child
    proc = subprocess.Popen(
        [str(HERE.parents[1] / ".venv" / "bin" / "airflow"), "scheduler", "--skip-serve-logs"],
        env=dep.env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    log.close()
    (RUN_DIR / f"{NAME}-scheduler.pid").write_text(str(proc.pid))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: a scheduler this test restarted is our child)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def started(dep: AirflowDeployment, run: str, name: str, try_number: int = 1) -> bool:
    return Path(dep.work, f"{run}.{name}.try{try_number}.started").exists()


@pytest.mark.slurm
def test_sigkilled_scheduler_restarts_and_adopts_the_running_jobs(
    executor_deployment: AirflowDeployment,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    dep, dag = executor_deployment, "txe_hold_slurm"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    earlier = set(wait_until(lambda: slurm_jobs(dep, since) or {"-": ""}, 60, "sacct"))
    run = dep.trigger(dag)
    try:
        holds = [f"hold_{i}" for i in range(5)]
        wait_until(lambda: all(started(dep, run, h) for h in holds), 300, "the 5 tasks to run")
        old = scheduler_pid()
        os.killpg(old, signal.SIGKILL)
        wait_until(lambda: not alive(old), 30, "the scheduler to die")
        mark = len(dep.service_log("scheduler"))
        restart_scheduler(dep)

        def adopted() -> int:
            return dep.service_log("scheduler")[mark:].count("adopted TaskInstanceKey")

        wait_until(lambda: adopted() >= 5, 240, "the new scheduler to adopt the 5 running tasks")
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "success"
    got = tis(dep, dag, run)
    assert {t: v["try_number"] for t, v in got.items() if t in holds} == dict.fromkeys(holds, 1)
    assert not any(started(dep, run, h, 2) for h in holds)
    # no second job: 5 holds + gather, each once, all COMPLETED
    live = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}

    def run_jobs() -> dict[str, str]:  # sacct -S also lists earlier tests' jobs that ended since
        return {k: v for k, v in slurm_jobs(dep, since).items() if k not in earlier}

    def ended_jobs() -> dict[str, str] | None:  # falsy until the run's 6 jobs have all ended
        j = run_jobs()
        return j if len(j) >= 6 and not live & set(j.values()) else None

    jobs = wait_until(ended_jobs, 120, "the run's jobs to end")
    assert len(jobs) == 6 and set(jobs.values()) == {"COMPLETED"}, jobs


@pytest.mark.slurm
def test_clear_and_mark_failed_of_running_tasks_cancel_their_jobs(
    executor_deployment: AirflowDeployment,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    dep, dag = executor_deployment, "txe_hold_slurm"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    run = dep.trigger(dag)
    try:
        wait_until(lambda: started(dep, run, "hold_0") and started(dep, run, "hold_1"), 300,
                   "hold_0 and hold_1 to run")  # fmt: skip
        mark = len(dep.service_log("scheduler"))
        dep.clear_ti(dag, run, "hold_0")
        dep.set_ti_state(dag, run, "hold_1", "failed")

        def log() -> str:
            return dep.service_log("scheduler")[mark:]

        cancelled = (
            "task_id='hold_0', run_id='{}', try_number=1, map_index=-1): its task instance is"
        )
        wait_until(lambda: cancelled.format(run) + " restarting" in log(), 120,
                   "the executor to cancel (scancel) the cleared task's job")  # fmt: skip
        # the cleared task runs again as try 2 (a new job); the failed one stays failed
        dep.wait_ti(dag, run, "hold_0", {"running"}, min_try=2)
        wait_until(lambda: started(dep, run, "hold_0", 2), 300, "hold_0's second try to start")
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "failed"  # hold_1 failed: gather is upstream_failed
    got = tis(dep, dag, run)
    assert (got["hold_0"]["state"], got["hold_0"]["try_number"]) == ("success", 2)
    assert got["hold_1"]["state"] == "failed"
    # neither stopped task got to its end, and the cleared one's job was cancelled (scancel)
    assert not Path(dep.work, f"{run}.hold_0.try1.finished").exists()
    assert not Path(dep.work, f"{run}.hold_1.try1.finished").exists()
    job = re.search(rf"cancelled slurm://\w+/(\d+) of TaskInstanceKey\(dag_id='{dag}', "
                    + re.escape(cancelled.format(run)), log())  # fmt: skip
    assert job, log()
    wait_until(lambda: slurm_jobs(dep, since).get(job[1], "").startswith("CANCELLED"), 120,
               f"sacct to show job {job[1]} (hold_0, try 1) CANCELLED")  # fmt: skip
    # the task marked failed: its job ended FAILED or CANCELLED, never COMPLETED
    failed = re.search(rf"task TaskInstanceKey\(dag_id='{dag}', task_id='hold_1', run_id='{run}',"
                       r" try_number=1, map_index=-1\) runs as slurm://\w+/(\d+)",
                       dep.service_log("scheduler"))  # fmt: skip
    assert failed, "no job of hold_1 in the scheduler's log"
    live = ("PENDING", "RUNNING", "COMPLETING")
    end = wait_until(lambda: (st := slurm_jobs(dep, since).get(failed[1], "")) and st not in live
                     and st, 180, "hold_1's job to end")  # fmt: skip
    assert end.startswith(("FAILED", "CANCELLED")), (failed[1], end)


def stop_and_restart(dep: AirflowDeployment, run: str, holds: list[str]) -> None:
    """SIGTERM to the scheduler (a clean stop: ``end()``), then a new scheduler that adopts the
    still running tasks."""
    old = scheduler_pid()
    before = len(dep.service_log("scheduler"))
    os.killpg(old, signal.SIGTERM)
    wait_until(lambda: not alive(old), 240, "the scheduler to stop")
    log = dep.service_log("scheduler")
    # the count is every app the scheduler still owned: earlier tests' apps may still be ending
    left = re.findall(r"leaving (\d+) running apps for the next scheduler to adopt", log[before:])
    assert left and int(left[-1]) >= len(holds), log[-3000:]
    mark = len(log)
    restart_scheduler(dep)

    def adopted() -> int:
        return dep.service_log("scheduler")[mark:].count("adopted TaskInstanceKey")

    wait_until(lambda: adopted() >= len(holds), 240, "the new scheduler to adopt the tasks")


def test_a_stopped_scheduler_leaves_its_apps_for_the_next_to_adopt_on_local_cwd(
    executor_deployment: AirflowDeployment, local_root: Path
) -> None:
    """A clean stop (``systemctl stop``, a pod replacement) cancels nothing by default
    (``cancel_on_end`` false): the next scheduler adopts the running apps, no second try."""
    dep, dag = executor_deployment, "txe_hold_local"
    run = dep.trigger(dag)
    holds = [f"hold_{i}" for i in range(5)]
    try:
        wait_until(lambda: all(started(dep, run, h) for h in holds), 300, "the 5 tasks to run")
        mine = {h for h, a in local_apps("af-hold_").items() if str(a.state) == "RUNNING"}
        assert len(mine) == 5, mine
        try:
            stop_and_restart(dep, run, holds)
        finally:
            if not alive(scheduler_pid()):
                restart_scheduler(dep)
        states = {h: str(a.state) for h, a in local_apps("af-hold_").items() if h in mine}
        assert set(states.values()) == {"RUNNING"}, states  # never cancelled
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "success"
    got = tis(dep, dag, run)
    assert {t: v["try_number"] for t, v in got.items() if t in holds} == dict.fromkeys(holds, 1)
    assert not any(started(dep, run, h, 2) for h in holds)
    states = wait_until(
        lambda: (st := {h: str(a.state) for h, a in local_apps("af-hold_").items() if h in mine})
        and "RUNNING" not in st.values() and st, 120, "the adopted apps to end",
    )  # fmt: skip
    assert set(states.values()) == {"SUCCEEDED"}, states


@pytest.mark.slurm
def test_a_stopped_scheduler_leaves_its_slurm_jobs_for_the_next_to_adopt(
    executor_deployment: AirflowDeployment,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    dep, dag = executor_deployment, "txe_hold_slurm"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    earlier = set(wait_until(lambda: slurm_jobs(dep, since) or {"-": ""}, 60, "sacct"))
    run = dep.trigger(dag)
    holds = [f"hold_{i}" for i in range(5)]
    try:
        wait_until(lambda: all(started(dep, run, h) for h in holds), 300, "the 5 tasks to run")
        try:
            stop_and_restart(dep, run, holds)
        finally:
            if not alive(scheduler_pid()):
                restart_scheduler(dep)
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "success"
    got = tis(dep, dag, run)
    assert {t: v["try_number"] for t, v in got.items() if t in holds} == dict.fromkeys(holds, 1)
    live = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}

    def ended_jobs() -> dict[str, str] | None:  # 5 holds + gather, each once, all ended
        j = {k: v for k, v in slurm_jobs(dep, since).items() if k not in earlier}
        return j if len(j) >= 6 and not live & set(j.values()) else None

    jobs = wait_until(ended_jobs, 120, "the run's jobs to end")
    assert len(jobs) == 6 and set(jobs.values()) == {"COMPLETED"}, jobs  # never scancelled


# -- the warm start (issue 35, finding 5): apps forked from the executor's warm server ----------


def fork_server_pid() -> int:
    """The scheduler's warm fork server (``torchx_airflow._fork_server``), 0 if none runs."""
    parent = str(scheduler_pid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if b"torchx_airflow._fork_server" in cmd and ppid == parent and alive(int(pid)):
            return int(pid)
    return 0


def app_stderr(local_root: Path, handle: str) -> str:
    path = local_root / handle.rsplit("/", 1)[1] / "airflow-task" / "0.stderr.log"
    return path.read_text(errors="replace") if path.exists() else ""


def forked_pid(local_root: Path, handle: str) -> int:
    """The pid of the app's task as the warm server forked it (0: not forked)."""
    found = re.search(r"forked from the warm server \(pid \d+\) as pid (\d+)",
                      app_stderr(local_root, handle))  # fmt: skip
    return int(found[1]) if found else 0


def jwt_in_processes() -> list[str]:
    """The processes whose command line or environment holds a JWT in clear."""
    hits = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{pid}/{part}").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if JWT.search(data):
                hits.append(f"{pid} {part}")
    return hits


def jwt_in_files(*roots: Path) -> list[str]:
    hits = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if (
                    path.is_file()
                    and not path.is_symlink()
                    and JWT.search(path.read_text(errors="replace"))
                ):
                    hits.append(str(path))
            except OSError:
                continue
    return hits


def test_warm_start_forks_tasks_relays_kills_and_keeps_the_token_off_disk(
    executor_deployment: AirflowDeployment, local_root: Path
) -> None:
    """Tasks on local_cwd are forked from the executor's warm server: they succeed; a cancel
    (SIGTERM to the app's client) and a SIGKILL of the client kill the forked task, a task
    marked failed ends; the token is in no process's argv or environment and in no file."""
    dep, dag = executor_deployment, "txe_hold_local"
    run = dep.trigger(dag)
    holds = [f"hold_{i}" for i in range(5)]
    try:
        wait_until(lambda: all(started(dep, run, h) for h in holds), 300, "the 5 tasks to run")
        assert fork_server_pid(), "no warm fork server beside the scheduler"
        apps = {a.name: h for h, a in local_apps("af-hold_").items() if str(a.state) == "RUNNING"}
        by_task = {h: next(v for k, v in apps.items() if k.startswith(f"af-{h}-")) for h in holds}
        forked = {h: forked_pid(local_root, by_task[h]) for h in holds}
        assert all(forked.values()), {h: app_stderr(local_root, a) for h, a in by_task.items()}
        runners = {h: int(Path(dep.work, f"{run}.{h}.try1.started").read_text()) for h in holds}
        assert not jwt_in_processes()
        assert not jwt_in_files(local_root, dep.work)
        from torchx_core.runner import get_runner

        with get_runner() as r:
            r.cancel(by_task["hold_0"])  # SIGTERM to the client, relayed to the task
        client = [p for p in filter(str.isdigit, os.listdir("/proc"))
                  if _app_env(p, by_task["hold_1"]) and b"task_entry" in _cmd(p)]  # fmt: skip
        assert len(client) == 1, client
        os.kill(int(client[0]), signal.SIGKILL)  # the client dies: its task must die too
        dep.set_ti_state(dag, run, "hold_2", "failed")
        for h in ("hold_0", "hold_1", "hold_2"):
            wait_until(lambda h=h: not alive(forked[h]) and not alive(runners[h]), 120,
                       f"{h}'s forked task to die")  # fmt: skip
        assert all(alive(runners[h]) for h in ("hold_3", "hold_4"))
    finally:
        release(dep, run)
    assert wait_run(dep, dag, run) == "failed"
    got = tis(dep, dag, run)
    states = {t: got[t]["state"] for t in holds}
    assert states["hold_3"] == states["hold_4"] == "success", states
    assert states["hold_0"] == states["hold_1"] == states["hold_2"] == "failed", states
    assert not any(Path(dep.work, f"{run}.hold_{i}.try1.finished").exists() for i in range(3))
    assert not jwt_in_files(local_root, dep.work)


def _cmd(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _app_env(pid: str, handle: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"TORCHX_APP_ID={handle.rsplit('/', 1)[1]}\0".encode() in env


def test_a_killed_warm_server_is_replaced_at_the_next_local_submit(
    executor_deployment: AirflowDeployment, local_root: Path
) -> None:
    """Kept last (it replaces the deployment's server). The executor finds its server dead at
    the next submit and starts another: the tasks submitted while it warms start cold, those
    after it fork from the new server."""
    dep, dag = executor_deployment, "txe_hold_local"
    old = wait_until(fork_server_pid, 60, "the warm fork server")
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), 30, "the server to die")
    run = dep.trigger(dag)
    new = wait_until(lambda: (pid := fork_server_pid()) not in (0, old) and pid, 120,
                     "another warm fork server")  # fmt: skip
    dep.wait_ti(dag, run, "hold_4", {"running"})
    release(dep, run)
    assert wait_run(dep, dag, run) == "success"
    mine = [h for h in local_apps("af-") if _of_run(local_root, h, run)]
    assert len(mine) == 6, mine  # 5 holds + gather
    servers = {h: forked_by(local_root, h) for h in mine}
    assert old not in servers.values(), servers
    gather = [h for h in mine if _of_task(local_root, h, "gather")]
    assert len(gather) == 1 and servers[gather[0]] == new, servers  # submitted once it is warm


def forked_by(local_root: Path, handle: str) -> int:
    """The pid of the warm server that forked the app's task (0: not forked)."""
    found = re.search(r"forked from the warm server \(pid (\d+)\)", app_stderr(local_root, handle))
    return int(found[1]) if found else 0


def _of_task(local_root: Path, handle: str, task_id: str) -> bool:
    """Whether the app runs task ``task_id`` (its workload, JSON in the role's args)."""
    app = (local_root / handle.rsplit("/", 1)[1] / "app.json").read_text(errors="replace")
    return re.search(rf'task_id\\*"\s*:\s*\\*"{re.escape(task_id)}\\*"', app) is not None


def _of_run(local_root: Path, handle: str, run: str) -> bool:
    app = local_root / handle.rsplit("/", 1)[1] / "app.json"
    return app.exists() and run in app.read_text(errors="replace")
