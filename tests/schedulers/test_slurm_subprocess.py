"""The default slurm scheduler reaches Slurm through the ``subprocess`` functions TorchX calls.

As TorchX: one app's status through ``subprocess.check_output(args, stderr=PIPE,
encoding="utf-8")`` (``_describe_squeue`` raises ``CalledProcessError`` when squeue fails, and
``describe`` then asks sacct), the other commands through ``subprocess.run(..., check=True)``,
and ``sbatch`` gets the batch script as a file (its last word). Ours adds a time-out to each
call and turns a missing command or a hung controller into a ``SchedulerError``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.slurm_fixtures import FakeSlurm

from torchx_core import specs
from torchx_core.schedulers.api import SchedulerError
from torchx_core.schedulers.slurm._probe import COMMAND_TIMEOUT, run_command
from torchx_core.schedulers.slurm._status import parse_squeue_json
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, StaticSlurmProbe
from torchx_core.specs import AppState


class Recorder:
    """Stands in for ``subprocess.run``/``check_output``: records calls, answers in turn."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, args: list[str], **kwargs: Any) -> Any:
        self.calls.append((list(args), kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_run_command_is_subprocess_run_with_check_and_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failure = subprocess.CalledProcessError(1, ["scancel", "7"], "", "scancel: error: boom")
    run = Recorder(subprocess.CompletedProcess(["squeue"], 0, b"{}", b""), failure)
    monkeypatch.setattr(subprocess, "run", run)
    ok = run_command(["squeue", "--json"])
    assert (ok.returncode, ok.stdout) == (0, "{}")  # bytes (TorchX's mocks) read as text
    (args, kwargs) = run.calls[0]
    assert args == ["squeue", "--json"]
    assert kwargs["check"] is True and kwargs["timeout"] == COMMAND_TIMEOUT
    failed = run_command(["scancel", "7"])  # check=True's error comes back as the result
    assert (failed.returncode, failed.stderr) == (1, "scancel: error: boom")


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (FileNotFoundError("squeue"), "not installed"),
        (subprocess.TimeoutExpired("squeue", COMMAND_TIMEOUT), "did not answer"),
    ],
)
def test_missing_or_hung_command_is_a_scheduler_error(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, says: str
) -> None:
    monkeypatch.setattr(subprocess, "run", Recorder(error))
    with pytest.raises(SchedulerError, match=says):
        run_command(["squeue", "--json"])
    monkeypatch.setattr(subprocess, "check_output", Recorder(error))
    with pytest.raises(SchedulerError, match=says):
        SlurmScheduler("s")._describe_squeue("5")


def test_cancel_runs_scancel_through_subprocess_run(monkeypatch: pytest.MonkeyPatch) -> None:
    completed = subprocess.CalledProcessError(
        1, ["scancel"], "", "scancel: error: Job/step already completing or completed"
    )
    run = Recorder(subprocess.CompletedProcess(["scancel"], 0, b"", b""), completed)
    monkeypatch.setattr(subprocess, "run", run)
    sched = SlurmScheduler("s")
    monkeypatch.setattr(sched, "describe", lambda app_id: object())
    sched.cancel("1234")
    sched.cancel("1234")  # a job that already ended: not an error
    assert [c[0] for c in run.calls] == [["scancel", "1234"]] * 2
    assert all(c[1]["check"] is True for c in run.calls)


def _squeue_job(**fields: object) -> dict[str, object]:
    job: dict[str, object] = {
        "name": "trainer-0",
        "job_state": ["RUNNING"],
        "command": "/bin/echo",
        "current_working_directory": "/tmp",
    }
    job.update(fields)
    return job


@pytest.mark.parametrize(
    ("fields", "state", "hostname"),
    [
        # squeue's node formats: 24.11.5+ (pending: no job_resources), a plain string,
        # {"list"}, 24.11's allocation list, and allocated_nodes (before 23.02)
        (
            {"job_state": ["PENDING"], "job_resources": None, "scheduled_nodes": "n0"},
            AppState.PENDING,
            "n0",
        ),
        ({"job_resources": {"nodes": "n1"}}, AppState.RUNNING, "n1"),
        ({"job_resources": {"nodes": {"list": "n2"}}}, AppState.RUNNING, "n2"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n3"}]}}}, AppState.RUNNING, "n3"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n4"}]}}, AppState.RUNNING, "n4"),
        # a state as a plain string (Slurm <= 23.02)
        ({"job_state": "TIMEOUT", "job_resources": {"nodes": "n5"}}, AppState.FAILED, "n5"),
    ],
)
def test_describe_squeue_reads_one_app_through_check_output(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, object], state: AppState, hostname: str
) -> None:
    # jobs listed without a job_id (as in TorchX's tests) are the one app squeue was asked for
    out = json.dumps({"jobs": [_squeue_job(**fields)]})
    check_output = Recorder(out)
    monkeypatch.setattr(subprocess, "check_output", check_output)
    desc = SlurmScheduler("s")._describe_squeue("123")
    assert desc is not None and (desc.app_id, desc.state) == ("123", state)
    assert desc.roles_statuses[0].replicas[0].hostname == hostname
    assert desc.roles_statuses[0].role == "trainer"
    ((args, kwargs),) = check_output.calls
    assert args[:2] == ["squeue", "--json"] and "--jobs=123" in args
    assert kwargs == {
        "stderr": subprocess.PIPE,
        "encoding": "utf-8",
        "timeout": COMMAND_TIMEOUT,
    }


def test_jobs_without_an_id_are_skipped_when_listing() -> None:
    out = json.dumps({"jobs": [_squeue_job(), _squeue_job(job_id=9)]})
    assert [r.app_id for r in parse_squeue_json(out)] == ["9"]


def test_describe_falls_back_to_sacct_with_its_header(monkeypatch: pytest.MonkeyPatch) -> None:
    # sacct's default columns (TorchX asks `sacct --parsable2 -j <id>`): read from the header;
    # steps ("89.batch", "89.0") are not replicas; "CANCELLED by <uid>" is the message
    sacct = (
        "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode\n"
        "89|mesh0-0|all|root|8|CANCELLED by 2166|0:0\n"
        "89.batch|batch||root|8|CANCELLED|0:15\n"
        "89.0|process_allocator||root|8|CANCELLED|0:15\n"
    )
    gone = subprocess.CalledProcessError(1, "squeue", "", "Invalid job id specified")
    check_output = Recorder(gone, sacct)
    monkeypatch.setattr(subprocess, "check_output", check_output)
    desc = SlurmScheduler("s").describe("89")
    assert desc is not None
    assert (desc.state, desc.msg) == (AppState.CANCELLED, "CANCELLED by 2166")
    assert [(r.name, r.num_replicas) for r in desc.roles] == [("mesh0", 1)]
    assert check_output.calls[1][0][:2] == ["sacct", "--parsable2"]


def test_describe_sacct_failure_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    off = subprocess.CalledProcessError(1, "sacct", "", "Slurm accounting storage is disabled")
    monkeypatch.setattr(subprocess, "check_output", Recorder(off))
    assert SlurmScheduler("s")._describe_sacct("89") is None


def test_list_squeue_one_row_per_app(tmp_path: Path) -> None:
    fake = FakeSlurm(version=(24, 11))
    sched = SlurmScheduler("s", run_cmd=fake, probe=StaticSlurmProbe((24, 11)))
    role = specs.Role("w", image="/x", entrypoint="echo", num_replicas=2)
    het = sched.submit(specs.AppDef("a", roles=[role]), {"job_dir": str(tmp_path)})
    single = sched.submit(
        specs.AppDef("b", roles=[specs.Role("v", image="/x", entrypoint="echo")]),
        {"job_dir": str(tmp_path)},
    )
    fake.set_state(het, "RUNNING")
    rows = sched._list_squeue()
    assert [(r.app_id, r.state, r.name) for r in rows] == [
        (het, AppState.RUNNING, "w-0"),  # the het job's first component names it, as TorchX
        (single, AppState.PENDING, "v-0"),
    ]


def _sinfo(out: str, rc: int = 0) -> FakeSlurm:
    class Sinfo(FakeSlurm):
        def _sinfo(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
            return self._done(args, rc, out, "" if rc == 0 else "sinfo: error")

    return Sinfo()


def test_partition_memmb_reads_sinfo() -> None:
    sched = SlurmScheduler("s", run_cmd=_sinfo("PARTITION,MEMORY\nbig,500000+\ncompute*,1\n"))
    assert sched._partition_memmb(None) == 1  # the default partition (marked *)
    assert sched._partition_memmb("compute") == 1
    assert sched._partition_memmb("big") == 500000
    assert sched._partition_memmb("nonexistent") is None
    assert SlurmScheduler("s", run_cmd=_sinfo("PARTITION,MEMORY\n"))._partition_memmb(None) is None
    assert SlurmScheduler("s", run_cmd=_sinfo("", rc=1))._partition_memmb(None) is None


def test_memory_refusal_says_what_the_partition_has(tmp_path: Path) -> None:
    class Refusing(FakeSlurm):
        def _sbatch(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
            return self._done(args, 1, "", "sbatch: error: Memory specification can not be met")

        def _sinfo(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
            return self._done(args, 0, "PARTITION,MEMORY\ndebug*,900\n")

    sched = SlurmScheduler("s", run_cmd=Refusing(), probe=StaticSlurmProbe((22, 5)))
    res = specs.Resource(cpu=1, gpu=0, memMB=4096)
    app = specs.AppDef("a", roles=[specs.Role("t", image="/x", entrypoint="echo", resource=res)])
    with pytest.raises(SchedulerError, match=r"(?s)\(default\): 900 MB per node.*nomem=True"):
        sched.submit(app, {"job_dir": str(tmp_path)})


def test_sbatch_gets_the_script_as_a_file_and_retries_do_not_grow_the_command(
    tmp_path: Path,
) -> None:
    seen: list[tuple[list[str], str]] = []
    fake = FakeSlurm()

    def run_cmd(args: list[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
        if args[0] == "sbatch":
            with open(args[-1], encoding="utf-8") as f:
                seen.append((list(args), f.read()))
        return fake(args, input)

    sched = SlurmScheduler("s", run_cmd=run_cmd, probe=StaticSlurmProbe((22, 5)))
    app = specs.AppDef("a", roles=[specs.Role("t", image="/x", entrypoint="echo")])
    info = sched.submit_dryrun(app, {"job_dir": str(tmp_path)})
    sched.schedule(info)
    sched.schedule(info)  # a retried schedule of the same dry run
    assert info.request.cmd == ["sbatch", "--parsable"]
    for args, script in seen:
        assert args[:-1] == ["sbatch", "--parsable"] and script == info.request.materialize()
        assert not os.path.exists(args[-1])  # removed once sbatch has read it
