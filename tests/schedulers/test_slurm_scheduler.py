"""Unit tests of the slurm scheduler against a stateful fake Slurm (no cluster needed)."""

from __future__ import annotations

import os
import pwd
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from golden_files import update_requested
from support.slurm_fixtures import FakeSlurm, fake_slurm  # noqa: F401  (fixture)

from torchx_core import specs
from torchx_core.schedulers.api import (
    AppValidationError,
    InvalidLogQueryError,
    SchedulerError,
    Stream,
)
from torchx_core.schedulers.slurm.scheduler import (
    SLURM_STATES,
    SlurmBatchRequest,
    SlurmOpts,
    SlurmScheduler,
    StaticSlurmProbe,
    create_scheduler,
)
from torchx_core.specs import AppState
from torchx_core.specs.errors import InvalidRunConfigException, UnknownAppException

GOLDEN = Path(__file__).parent / "slurm"


class CountingProbe(StaticSlurmProbe):
    calls = 0

    def version(self) -> tuple[int, int] | None:
        self.calls += 1
        return super().version()


def make_app(gpu: int = 0, max_retries: int = 0) -> specs.AppDef:
    return specs.AppDef(
        name="train app",
        roles=[
            specs.Role(
                name="trainer",
                image="/shared/project",
                entrypoint="python",
                args=[
                    "-m",
                    "train",
                    "--run",
                    f"{specs.macros.app_id}-{specs.macros.replica_id}",
                    "--master",
                    specs.macros.rank0_env,
                    'it\'s $HOME `id` "q"\nline2',
                    ":",
                ],
                env={"LR": "0.1 $x", "NAME": "ünï'code"},
                num_replicas=2,
                max_retries=max_retries,
                resource=specs.Resource(cpu=2, gpu=gpu, memMB=1024),
            ),
            specs.Role(
                name="ps",
                image="none",
                entrypoint="echo",
                args=["ps"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=512),
            ),
        ],
    )


def scheduler(
    fake: FakeSlurm | None = None, version: tuple[int, int] | None = (22, 5)
) -> SlurmScheduler:
    return SlurmScheduler("test", run_cmd=fake or FakeSlurm(), probe=StaticSlurmProbe(version))


def dryrun_request(
    app: specs.AppDef,
    cfg: dict[str, object] | None = None,
    version: tuple[int, int] | None = (22, 5),
) -> SlurmBatchRequest:
    cfg = {"job_dir": "/shared/jobs/run1", **(cfg or {})}
    return scheduler(version=version).submit_dryrun(app, cfg).request


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if update_requested():
        path.write_text(text)
    expected = path.read_text()
    assert text == expected, (
        f"the generated script differs from {path}; if the change is intended, regenerate with"
        " UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/schedulers/test_slurm_scheduler.py"
    )


# -- dry run: the exact script --------------------------------------------------------------


def test_hetjob_script_matches_golden_file() -> None:
    req = dryrun_request(
        make_app(gpu=1, max_retries=2),
        {
            "partition": "debug",
            "time": "10",
            "account": "proj",
            "qos": "high",
            "constraint": "a100",
            "comment": "nightly run",
            "mail-user": "me@example.com",
            "mail-type": "END,FAIL",
            "exclusive": True,
        },
    )
    check_golden("hetjob.sbatch", req.materialize())
    # the dryrun info prints as the script itself
    info = scheduler().submit_dryrun(
        make_app(gpu=1, max_retries=2), {"job_dir": "/shared/jobs/run1"}
    )
    assert str(info).startswith("#!/bin/bash\n")


def test_single_replica_script_matches_golden_file() -> None:
    app = specs.AppDef(
        "echo",
        roles=[
            specs.Role(
                "echo",
                image="",
                entrypoint="echo",
                args=["hello"],
                resource=specs.Resource(1, 0, 64),
            )
        ],
    )
    req = dryrun_request(app, {"nomem": True})
    check_golden("single.sbatch", req.materialize())
    assert "hetjob" not in req.materialize() and "--het-group" not in req.materialize()


def test_hetjob_has_one_component_and_het_group_per_replica() -> None:
    script = dryrun_request(make_app()).materialize()
    assert script.count("#SBATCH hetjob") == 2
    names = [
        line.split("--job-name=")[1].split()[0]
        for line in script.splitlines()
        if line.startswith("#SBATCH --job-name=")
    ]
    assert names == ["trainer-0", "trainer-1", "ps-0"]
    for group in range(3):
        assert f"--het-group={group} " in script
    # job-wide options only on the first component, resources on every one
    assert script.count("--chdir=/shared/jobs/run1") == 1
    assert script.count("--cpus-per-task=2") == 2 and script.count("--cpus-per-task=1") == 1


@pytest.mark.parametrize(
    "version,flag",
    [
        ((22, 5), "--gpus-per-task=1"),
        ((24, 5), "--gpus-per-task=1"),
        ((24, 11), "--gpus-per-node=1"),
        ((25, 5), "--gpus-per-node=1"),
        ((18, 8), "--gres=gpu:1"),
        (None, "--gpus-per-node=1"),
    ],
)
def test_gpu_flag_depends_on_slurm_version(version: tuple[int, int] | None, flag: str) -> None:
    script = dryrun_request(make_app(gpu=1), version=version).materialize()
    assert script.count(flag) == 2
    others = {"--gpus-per-task", "--gpus-per-node", "--gres"} - {flag.split("=")[0]}
    assert not any(o in script for o in others)


def test_probe_is_asked_only_for_gpus_and_dryrun_runs_no_command() -> None:
    fake = FakeSlurm()
    probe = CountingProbe((24, 11))
    sched = SlurmScheduler("t", run_cmd=fake, probe=probe)
    sched.submit_dryrun(make_app(gpu=0), {"job_dir": "/x"})
    assert probe.calls == 0
    sched.submit_dryrun(make_app(gpu=1), {"job_dir": "/x"})
    assert probe.calls == 2  # one per GPU replica, answered by the probe
    assert fake.calls == []  # dry run never touches the cluster


def test_default_probe_reads_sbatch_version_once() -> None:
    fake = FakeSlurm(version=(24, 11))
    sched = create_scheduler("t", run_cmd=fake)
    script = str(sched.submit_dryrun(make_app(gpu=2), {"job_dir": "/x"}))
    assert "--gpus-per-node=2" in script
    sched.submit_dryrun(make_app(gpu=2), {"job_dir": "/x"})
    assert fake.commands("sbatch") == [["sbatch", "--version"]]
    with pytest.raises(SchedulerError, match=r"probe='22\.05' has no version"):
        create_scheduler("t", probe="22.05")


def test_resources_and_nomem() -> None:
    script = dryrun_request(make_app()).materialize()
    # TorchX's spelling: --mem in MB without a unit (Slurm's default unit)
    assert script.count("--mem=1024 ") == 2 and script.count("--mem=512 ") == 1
    script = dryrun_request(make_app(), {"nomem": True}).materialize()
    assert "--mem" not in script


def test_run_options_are_typed_structured_opts() -> None:
    opts = scheduler().run_opts()
    names = {name for name, _ in opts}
    # TorchX's names: sbatch's spelling for the mail options
    assert {
        "partition",
        "time",
        "account",
        "qos",
        "constraint",
        "comment",
        "mail-user",
        "mail-type",
        "exclusive",
        "nomem",
        "job_dir",
    } == names
    assert opts.get("exclusive").opt_type is bool and opts.get("exclusive").default is False
    parsed = SlurmOpts.from_cfg({"exclusive": "True", "mailUser": "a@b"})
    assert parsed.exclusive is True and parsed.mail_user == "a@b"
    # TorchX's sbatch-style spelling is accepted too
    # (as TorchX, the mail options are words of the sbatch command, shown in the script's header)
    req = scheduler().submit_dryrun(make_app(), {"mail-user": "x@y", "mail-type": "ALL"}).request
    assert req.cmd == ["sbatch", "--parsable", "--mail-user=x@y", "--mail-type=ALL"]
    assert "# Submit with: sbatch --parsable --mail-user=x@y --mail-type=ALL" in str(req)
    # ... also from a CLI / .torchxconfig string, and the field spelling still works in Python
    cfg = opts.cfg_from_str("mail-user=x@y,mail-type=END,time=10")
    assert cfg == {"mail-user": "x@y", "mail-type": "END", "time": "10"}
    req = scheduler().submit_dryrun(make_app(), cfg).request
    assert req.cmd[2:] == ["--mail-user=x@y", "--mail-type=END"]
    assert scheduler().submit_dryrun(make_app(), {"mail_user": "u@v"}).request.cmd[2:] == [
        "--mail-user=u@v"
    ]
    with pytest.raises(InvalidRunConfigException, match="mail_usr"):
        scheduler().submit_dryrun(make_app(), {"mail_usr": "x@y"})
    with pytest.raises(InvalidRunConfigException, match="exclusive"):
        scheduler().submit_dryrun(make_app(), {"exclusive": 3})


def test_macros_resolve_to_slurm_values() -> None:
    req = dryrun_request(make_app())
    r0, r1 = req.replicas["trainer-0"], req.replicas["trainer-1"]
    assert r0.args[3].endswith("-0") and r1.args[3].endswith("-1")
    assert r0.args[5] == "TORCHX_RANK0_HOST"  # rank0_env is the *name* of the variable
    script = req.materialize()
    assert "''\"$SLURM_JOB_ID\"-0" in script and "''\"$SLURM_JOB_ID\"-1" in script
    assert "export TORCHX_RANK0_HOST=" in script


def test_max_retries_requeues() -> None:
    script = dryrun_request(make_app(max_retries=3)).materialize()
    assert "--requeue" in script and "export TORCHX_MAX_RETRIES=3" in script
    assert 'scontrol requeue "${SLURM_JOB_ID}"' in script


def test_requeue_even_without_retries_as_torchx() -> None:
    # TorchX always writes --requeue: Slurm requeues a preempted or node-failed job, while the
    # script's own requeue of a failed run still follows max_retries (none here)
    script = dryrun_request(make_app(max_retries=0)).materialize()
    sbatch = script.splitlines()[5]
    assert sbatch.startswith("#SBATCH ") and " --requeue " in sbatch
    assert "no-requeue" not in script and "export TORCHX_MAX_RETRIES=0" in script


def test_bad_apps_list_every_problem() -> None:
    app = specs.AppDef(
        "bad",
        roles=[
            specs.Role(
                "has space",
                image="",
                entrypoint="echo",
                env={"1BAD": "x"},
                resource=specs.Resource(1, 0, 10),
            ),
        ],
    )
    with pytest.raises(AppValidationError) as e:
        scheduler().submit_dryrun(app, {"job_dir": "/x", "comment": 'say "hi"'})
    msg = str(e.value)
    assert "has space" in msg and "1BAD" in msg and "comment" in msg
    with pytest.raises(AppValidationError, match="'%'"):
        scheduler().submit_dryrun(make_app(), {"job_dir": "/x/%j"})


def test_workspace_is_copied_into_job_dir_at_schedule(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("print('hi')\n")
    job_dir = tmp_path / "job"
    fake = FakeSlurm()
    sched = scheduler(fake)
    app = make_app()
    app.roles[0].workspace = specs.Workspace({str(ws): ""})
    info = sched.submit_dryrun(app, {"job_dir": str(job_dir)})
    assert not job_dir.exists()  # dry run is pure
    assert f"--chdir={job_dir} " in str(info)  # replicas run in the copied workspace
    job_dir.mkdir()
    (job_dir / "slurm-100-torchx.sbatch").write_text("a stale copy, world-readable")
    (job_dir / "slurm-100-torchx.sbatch").chmod(0o644)
    app_id = sched.schedule(info)
    assert app_id == "100"
    assert (job_dir / "train.py").read_text() == "print('hi')\n"
    copy = job_dir / "slurm-100-torchx.sbatch"
    assert copy.read_text() == info.request.materialize()
    assert copy.stat().st_mode & 0o777 == 0o600  # it holds the roles' environment values
    assert fake.jobs["100"].script == info.request.materialize()


# -- status ---------------------------------------------------------------------------------


def submit(
    fake: FakeSlurm, tmp_path: Path, app: specs.AppDef | None = None
) -> tuple[SlurmScheduler, str]:
    sched = scheduler(fake)
    app_id = sched.submit(app or make_app(), {"job_dir": str(tmp_path)})
    return sched, app_id


ISSUE_STATES = [
    "PENDING",
    "REQUEUED",
    "RUNNING",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
]
EXPECTED = {
    "PENDING": AppState.PENDING,
    "REQUEUED": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "COMPLETED": AppState.SUCCEEDED,
    "CANCELLED": AppState.CANCELLED,
}


@pytest.mark.parametrize("version", [(22, 5), (23, 2), (23, 11), (24, 11)])
@pytest.mark.parametrize("state", ISSUE_STATES)
def test_describe_maps_states_across_versions(
    tmp_path: Path, version: tuple[int, int], state: str
) -> None:
    fake = FakeSlurm(version=version)
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, state, exit_code=1 if state == "FAILED" else 0)
    desc = sched.describe(app_id)
    assert desc is not None and desc.app_id == app_id
    assert desc.state == EXPECTED.get(state, AppState.FAILED)
    assert [(r.role, [x.id for x in r.replicas]) for r in desc.roles_statuses] == [
        ("trainer", [0, 1]),
        ("ps", [0]),
    ]
    assert [(r.name, r.num_replicas) for r in desc.roles] == [("trainer", 2), ("ps", 1)]


# Every job state code of squeue(1)/sacct(1), written from Slurm's documentation, grouped by what a
# TorchX user sees (independent of SLURM_STATES: a changed or missing entry there fails here).
_WAITING = [
    "CONFIGURING",
    "PENDING",
    "POWER_UP_NODE",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESV_DEL_HOLD",
    "STOPPED",
    "SUSPENDED",
]
_RUNNING = ["COMPLETING", "RESIZING", "RUNNING", "SIGNALING", "STAGE_OUT", "UPDATE_DB"]
_FAILED = [
    "BOOT_FAIL",
    "DEADLINE",
    "FAILED",
    "LAUNCH_FAILED",
    "NODE_FAIL",
    "OOM",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "RECONFIG_FAIL",
    "SPECIAL_EXIT",
    "TIMEOUT",
]
SLURM_EXPECTED: dict[str, AppState] = {
    **dict.fromkeys(_WAITING, AppState.PENDING),
    **dict.fromkeys(_RUNNING, AppState.RUNNING),
    **dict.fromkeys(_FAILED, AppState.FAILED),
    "COMPLETED": AppState.SUCCEEDED,
    "CANCELLED": AppState.CANCELLED,
    "REVOKED": AppState.CANCELLED,
}


def test_state_table_is_the_documented_one() -> None:
    assert len(SLURM_EXPECTED) == 29
    assert dict(SLURM_STATES) == SLURM_EXPECTED


@pytest.mark.parametrize("state", sorted(SLURM_EXPECTED))
def test_every_slurm_state_maps(state: str) -> None:
    from torchx_core.schedulers.slurm._status import appstate_from_slurm_state

    expected = SLURM_EXPECTED[state]
    assert appstate_from_slurm_state(state) == expected
    # as sacct prints them: lower case from some tools, "CANCELLED by <uid>", "+" for more flags
    assert appstate_from_slurm_state(f" {state.lower()}+ by 0") == expected


def test_unknown_slurm_state_is_unknown() -> None:
    from torchx_core.schedulers.slurm._status import appstate_from_slurm_state

    assert appstate_from_slurm_state("BRAND_NEW_STATE") == AppState.UNKNOWN
    assert appstate_from_slurm_state("") == AppState.UNKNOWN


@pytest.mark.parametrize("version", [(22, 5), (24, 11)])
def test_out_of_memory_job_is_terminal_and_wait_returns(
    tmp_path: Path, version: tuple[int, int]
) -> None:
    fake = FakeSlurm(version=version)
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, "OUT_OF_MEMORY", exit_code=0, reason="OutOfMemory")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert "slurm state OUT_OF_MEMORY" in desc.msg


@pytest.mark.parametrize("version", [(22, 5), (24, 11)])
def test_completed_job_with_a_failed_step_marks_that_replica_failed(
    tmp_path: Path, version: tuple[int, int]
) -> None:
    # the batch script ended 0 (COMPLETED) but one component's srun step exited 2
    fake = FakeSlurm(version=version)
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, "COMPLETED", exit_code=0, derived={1: 2})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    states = {(r.role, x.id): x.state for r in desc.roles_statuses for x in r.replicas}
    assert states == {
        ("trainer", 0): AppState.SUCCEEDED,
        ("trainer", 1): AppState.FAILED,
        ("ps", 0): AppState.SUCCEEDED,
    }


@pytest.mark.parametrize("version", [(22, 5), (24, 11)])
def test_describe_tells_failed_replica_apart(tmp_path: Path, version: tuple[int, int]) -> None:
    fake = FakeSlurm(version=version)
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, "FAILED", exit_code=3, reason="NonZeroExitCode", derived={1: 3})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    states = {(r.role, x.id): x.state for r in desc.roles_statuses for x in r.replicas}
    assert states == {
        ("trainer", 0): AppState.SUCCEEDED,
        ("trainer", 1): AppState.FAILED,
        ("ps", 0): AppState.SUCCEEDED,
    }
    assert "exit code 3" in desc.msg and "NonZeroExitCode" in desc.msg
    hosts = [x.hostname for r in desc.roles_statuses for x in r.replicas]
    assert hosts == ["node1", "node2", "node3"]


def test_describe_falls_back_to_sacct(tmp_path: Path) -> None:
    fake = FakeSlurm(version=(24, 11))
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, "CANCELLED", signal=15)
    fake.forget(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert len(fake.commands("sacct")) == 1
    assert sched.describe("999") is None


def test_describe_unknown_without_accounting(tmp_path: Path) -> None:
    fake = FakeSlurm(accounting=False)
    sched, app_id = submit(fake, tmp_path)
    fake.forget(app_id)
    assert sched.describe(app_id) is None
    assert sched.describe("not-a-job-id") is None
    assert not sched.exists(app_id)


@pytest.mark.parametrize("version", [(22, 5), (24, 11)])
def test_status_of_many_apps_is_one_batched_call(tmp_path: Path, version: tuple[int, int]) -> None:
    fake = FakeSlurm(version=version)
    sched = scheduler(fake)
    app = specs.AppDef(
        "a", roles=[specs.Role("r", image="", entrypoint="true", resource=specs.Resource(1, 0, 10))]
    )
    ids = [sched.submit(app, {"job_dir": str(tmp_path)}) for _ in range(100)]
    for app_id in ids[:50]:
        fake.set_state(app_id, "COMPLETED")
    for app_id in ids[90:]:
        fake.forget(app_id)
    fake.calls.clear()
    result = sched.describe_many([*ids, "424242"])
    assert len(fake.commands("squeue")) <= 2 and len(fake.commands("sacct")) == 1
    assert result["424242"] is None
    assert [result[a].state for a in ids[:2]] == [AppState.SUCCEEDED] * 2  # type: ignore[union-attr]
    assert result[ids[95]] is not None and result[ids[60]].state == AppState.PENDING  # type: ignore[union-attr]


def test_list_is_batched_and_only_shows_my_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchx_core.schedulers.slurm.scheduler as mod

    monkeypatch.setattr(mod, "_current_user", lambda: {"alice", "1000"})
    fake = FakeSlurm()
    sched, first = submit(fake, tmp_path)
    _, second = submit(fake, tmp_path)
    _, other = submit(fake, tmp_path)
    fake.jobs[other].user = "bob"
    fake.set_state(first, "COMPLETED")
    fake.forget(first)
    fake.calls.clear()
    rows = sched.list()
    assert [(r.app_id, r.state) for r in rows] == [
        (first, AppState.SUCCEEDED),
        (second, AppState.PENDING),
    ]
    assert rows[0].name == "trainer-0"
    assert len(fake.calls) == 2


def test_runner_list_uses_the_batched_call(tmp_path: Path) -> None:
    from torchx_core.runner.api import Runner

    fake = FakeSlurm()
    runner = Runner("sess", {"slurm": create_scheduler}, scheduler_params={"run_cmd": fake})
    app = specs.AppDef(
        "a", roles=[specs.Role("r", image="", entrypoint="true", resource=specs.Resource(1, 0, 10))]
    )
    handles = [runner.run(app, "slurm", {"job_dir": str(tmp_path)}) for _ in range(20)]
    for job in fake.jobs.values():  # jobs of the user running the tests
        job.user = pwd.getpwuid(os.getuid()).pw_name
    fake.calls.clear()
    rows = runner.list("slurm")
    assert sorted(r.app_handle for r in rows) == sorted(handles)
    assert len(fake.calls) == 2  # one squeue + one sacct, whatever the number of apps


# -- logs -----------------------------------------------------------------------------------


def test_log_iter_reads_replica_file_with_regex(tmp_path: Path) -> None:
    fake = FakeSlurm()
    sched, app_id = submit(fake, tmp_path)
    (tmp_path / f"slurm-{app_id}-trainer-1.out").write_text("epoch 1\nloss 0.5\nepoch 2\n")
    (tmp_path / f"slurm-{app_id}-trainer-1.err").write_text("warning: slow\n")
    assert list(sched.log_iter(app_id, "trainer", 1)) == [
        "epoch 1\n",
        "loss 0.5\n",
        "epoch 2\n",
        "warning: slow\n",
    ]
    assert list(sched.log_iter(app_id, "trainer", 1, regex="^epoch")) == ["epoch 1\n", "epoch 2\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.COMBINED)) == [
        "epoch 1\n",
        "loss 0.5\n",
        "epoch 2\n",
        "warning: slow\n",
    ]
    # migration break 7: as TorchX, stdout (.out) and stderr (.err) are kept apart
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.STDERR)) == ["warning: slow\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.STDOUT)) == [
        "epoch 1\n",
        "loss 0.5\n",
        "epoch 2\n",
    ]
    with pytest.raises(InvalidLogQueryError, match="no role 'nope'"):
        sched.log_iter(app_id, "nope", 0)
    with pytest.raises(InvalidLogQueryError, match=r"replicas \[0, 1\]; got k=5"):
        sched.log_iter(app_id, "trainer", 5)
    with pytest.raises(UnknownAppException):
        sched.log_iter("31337", "trainer", 0)


def _wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_log_iter_tails_until_the_job_ends(tmp_path: Path) -> None:
    fake = FakeSlurm()
    sched, app_id = submit(fake, tmp_path)
    fake.set_state(app_id, "RUNNING")
    log = tmp_path / f"slurm-{app_id}-ps-0.out"
    log.write_text("first\n")
    lines: list[str] = []

    def read() -> None:
        for line in sched.log_iter(app_id, "ps", 0, should_tail=True):
            lines.append(line)  # one by one: the test watches them arrive

    t = threading.Thread(target=read, daemon=True)
    t.start()
    _wait_until(lambda: lines == ["first\n"], "the first line")
    # the follower reached the end of the file and asks Slurm whether the job ended: it follows
    asked = len(fake.calls)
    _wait_until(lambda: len(fake.calls) > asked, "the follower to poll the job state")
    with log.open("a") as f:
        f.write("second\n")
    _wait_until(lambda: lines == ["first\n", "second\n"], "the appended line")
    assert t.is_alive(), "the follower stopped while the job was still running"
    fake.set_state(app_id, "COMPLETED")
    t.join(timeout=60)
    assert not t.is_alive(), "the follower did not stop once the job ended"
    assert lines == ["first\n", "second\n"]


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_uses_scancel_and_is_idempotent(tmp_path: Path) -> None:
    fake = FakeSlurm()
    sched, app_id = submit(fake, tmp_path)
    sched.cancel(app_id)
    assert fake.commands("scancel") == [["scancel", app_id]]
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert {x.state for r in desc.roles_statuses for x in r.replicas} == {AppState.CANCELLED}
    sched.cancel(app_id)  # already finished: scancel's complaint is not an error
    sched.cancel("123456")  # unknown: nothing to do
    assert len(fake.commands("scancel")) == 2


def test_sbatch_failure_is_a_scheduler_error(tmp_path: Path) -> None:
    from torchx_core.schedulers.api import SchedulerError

    def broken(args: list[str], input: str | None = None):  # type: ignore[no-untyped-def]
        import subprocess

        return subprocess.CompletedProcess(args, 1, "", "sbatch: error: invalid partition")

    sched = SlurmScheduler("t", run_cmd=broken, probe=StaticSlurmProbe((22, 5)))
    with pytest.raises(SchedulerError, match="invalid partition"):
        sched.submit(make_app(), {"job_dir": str(tmp_path)})


def test_memory_refused_by_sbatch_says_how_to_leave_out_mem(tmp_path: Path) -> None:
    # TorchX leaves --mem out when the partition reports <= 1000 MB per node (an sinfo at every
    # dry run); here the dry run asks nothing, and sbatch's refusal names the way out
    from torchx_core.schedulers.api import SchedulerError

    refusal = (
        "sbatch: error: Memory specification can not be satisfied\n"
        "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    )

    def refusing(args: list[str], input: str | None = None):  # type: ignore[no-untyped-def]
        import subprocess

        return subprocess.CompletedProcess(args, 1, "", refusal)

    sched = SlurmScheduler("t", run_cmd=refusing, probe=StaticSlurmProbe((22, 5)))
    with pytest.raises(SchedulerError, match=r"(?s)can not be satisfied.*-cfg nomem=True"):
        sched.submit(make_app(), {"job_dir": str(tmp_path)})
    with pytest.raises(SchedulerError) as e:  # no --mem asked: no hint
        sched.submit(make_app(), {"job_dir": str(tmp_path), "nomem": True})
    assert "nomem" not in str(e.value)


def test_sacct_placeholder_rows_are_not_an_answer() -> None:
    from torchx_core.schedulers.slurm._status import parse_sacct

    # seen on Slurm 22.05 for a few seconds after a het job ends, before its full record lands
    assert parse_sacct("28|28|allocation|COMPLETED|0:0|0:0|node1|root|Unknown|Unknown|\n") == []
    (rec,) = parse_sacct(
        "28+1|29|w-1|FAILED|0:0|3:0|node2|root|2026-11-28T10:00:00|2026-11-28T10:00:05|/a|b\n"
    )
    assert (rec.app_id, rec.offset, rec.job_id, rec.derived_exit_code, rec.work_dir) == (
        "28",
        1,
        "29",
        3,
        "/a|b",
    )


def test_het_job_is_not_succeeded_while_a_component_still_runs() -> None:
    from torchx_core.schedulers.slurm._status import SlurmJobRecord, describe_from_records

    def rec(offset: int, state: str) -> SlurmJobRecord:
        return SlurmJobRecord(
            job_id=str(10 + offset),
            app_id="10",
            offset=offset,
            name=f"worker-{offset}",
            state=state,
            reason="",
            exit_code=0,
            derived_exit_code=0,
            signal=None,
            restarts=0,
            nodes="node1",
            work_dir="/tmp",
            user="root",
        )

    d = describe_from_records(
        "10", [rec(0, "COMPLETED"), rec(1, "COMPLETING"), rec(2, "COMPLETED")]
    )
    assert d.state == AppState.RUNNING
    d = describe_from_records("10", [rec(0, "COMPLETED"), rec(1, "COMPLETED"), rec(2, "COMPLETED")])
    assert d.state == AppState.SUCCEEDED


def test_srun_kills_the_job_as_torchx_does() -> None:
    """TorchX's srun options: ``--wait=60`` (end the other tasks 60 s after the first exits) and
    ``--kill-on-bad-exit=1`` (end all when one fails), for every replica."""
    golden = Path(__file__).parent / "slurm"
    for name in ("single.sbatch", "hetjob.sbatch"):
        srun_parts = [
            line
            for line in (golden / name).read_text().splitlines()
            if line.startswith(("srun ", "    : "))
        ]
        assert srun_parts and all("--wait=60 --kill-on-bad-exit=1" in p for p in srun_parts)
