"""The lsf scheduler against a fake LSF (tests/schedulers/lsf_fake: bsub/bjobs/bkill over a job
table in JSON; output formats from IBM's LSF 10.1.0 documentation, see lsf_fake.py).

Unit tests run the fake's commands in-process (injected as ``run_cmd``); the ``integration`` ones
put the fake programs on PATH and run the jobs for real with /bin/sh, as an LSF host would.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.schedulers.api import (
    AppValidationError,
    InvalidLogQueryError,
    Stream,
    UnsupportedFeatureError,
)
from torchx_core.schedulers.lsf.scheduler import (
    LSF_STATES,
    LsfOpts,
    LsfScheduler,
    create_scheduler,
    parse_bjobs_json,
    parse_bjobs_table,
)
from torchx_core.specs import AppState
from torchx_core.specs.errors import UnknownAppException

pytestmark = pytest.mark.lsf

FAKE = Path(__file__).parent / "lsf_fake"
HOSTILE = [":", "it's", '"dq"', "$HOME", "`id`", "$(id)", "a\nb", "ünï ✓", "\\", "*", "", ";|&"]


_spec = importlib.util.spec_from_file_location("lsf_fake_commands", FAKE / "lsf_fake.py")
assert _spec is not None and _spec.loader is not None
LSF_FAKE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(LSF_FAKE)


class InProcessLsf:
    """``run_cmd`` that answers bsub/bjobs/bkill from the fake in this process (and counts)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(
        self, args: Sequence[str], input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(args))
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = LSF_FAKE.main(list(args))
        return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InProcessLsf:
    monkeypatch.setenv("LSF_FAKE_DIR", str(tmp_path / "lsf-state"))
    return InProcessLsf()


@pytest.fixture
def unit_lsf(fake: InProcessLsf) -> LsfScheduler:
    return LsfScheduler("test", run_cmd=fake)


@pytest.fixture
def lsf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LsfScheduler:
    """The default scheduler (real subprocesses) with the fake programs first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKE}:{os.environ['PATH']}")
    monkeypatch.setenv("LSF_FAKE_DIR", str(tmp_path / "lsf-state"))
    return create_scheduler("test")


def run_pending() -> None:
    subprocess.run([sys.executable, str(FAKE / "lsf_fake.py"), "run"], check=True)


def table() -> dict:
    return json.loads((Path(os.environ["LSF_FAKE_DIR"]) / "jobs.json").read_text())


def set_stat(name: str, stat: str, exit_code: object = "", host: str | None = None) -> None:
    path = Path(os.environ["LSF_FAKE_DIR"]) / "jobs.json"
    data = json.loads(path.read_text())
    found = False
    for job in data["jobs"].values():
        if job["name"] == name:
            job["stat"], job["exit_code"], found = stat, exit_code, True
            if host is not None:
                job["host"] = host
    assert found, f"no fake LSF job named {name}"
    path.write_text(json.dumps(data))


def py_role(name: str, code: str, replicas: int = 1, **kw: object) -> specs.Role:
    return specs.Role(
        name,
        image="",
        entrypoint=sys.executable,
        args=["-c", code],
        num_replicas=replicas,
        resource=specs.Resource(1, 0, 64),
        **kw,
    )  # type: ignore[arg-type]


def test_dryrun_prints_the_exact_bsub_commands() -> None:
    app = specs.AppDef(
        "Train Job",
        roles=[
            specs.Role(
                "trainer",
                image="pytorch/pytorch:2",
                entrypoint="python",
                args=["train.py", "--lr", "0.1"],
                env={"A": "b c"},
                num_replicas=2,
                resource=specs.Resource(cpu=4, gpu=2, memMB=2048),
            )
        ],
    )
    info = LsfScheduler("t").submit_dryrun(
        app,
        {
            "jobdir": "/shared/jobs",
            "lsf_queue": "gpu",
            "host_network": True,
            "shm_size": "1g",
            "container_workdir": "/work",
        },
    )
    req = info.request
    assert req.app_id.startswith("train_job_")
    text = str(info)
    job0, job1 = req.jobs
    assert job0.argv()[:13] == [
        "bsub",
        "-J",
        f"{req.app_id}-trainer-0",
        "-cwd",
        "/shared/jobs",
        "-o",
        f"/shared/jobs/{req.app_id}-trainer-0.out",
        "-q",
        "gpu",
        "-n",
        "4",
        "-R",
        "span[hosts=1] rusage[mem=2048]",
    ]
    assert job0.argv()[13:15] == ["-gpu", "num=2"]
    for needle in (
        "--network=host",
        "--shm-size=1g",
        "-w /work",
        "--gpus 2",
        "--entrypoint python pytorch/pytorch:2 train.py --lr 0.1",
    ):
        assert needle in job0.command
    assert f"> /shared/jobs/{req.app_id}.rank0.tmp" in job0.command  # replica 0 publishes its host
    assert f"while [ ! -s /shared/jobs/{req.app_id}.rank0 ]" in job1.command
    assert text.splitlines()[3:] == [shlex.join(j.argv()) for j in req.jobs]
    assert "--network=host" not in LsfScheduler("t").submit_dryrun(app, {}).request.jobs[0].command


def test_run_options_are_structured() -> None:
    opts = dict(LsfScheduler("t").run_opts())
    assert {"lsf_queue", "jobdir", "container_workdir", "host_network", "shm_size"} <= set(opts)
    assert LsfOpts.from_cfg({"hostNetwork": "true"}).host_network is True


def test_bad_names_are_rejected() -> None:
    app = specs.AppDef(
        "x",
        roles=[
            specs.Role(
                "a-b",
                image="",
                entrypoint="echo",
                env={"BAD-NAME": "1"},
                resource=specs.Resource(1, 0, 10),
            )
        ],
    )
    with pytest.raises(AppValidationError) as e:
        LsfScheduler("t").submit_dryrun(app, {"jobdir": "/jobs/%J"})
    assert "a-b" in str(e.value) and "BAD-NAME" in str(e.value)
    assert "'/jobs/%J' holds '%'" in str(e.value)


@pytest.mark.integration
def test_submit_run_describe_logs(lsf: LsfScheduler, tmp_path: Path) -> None:
    code = (
        "import os,sys,json;"
        " print(json.dumps([sys.argv[1:], os.environ['V'], os.environ['TORCHX_RANK0_HOST']]))"
    )
    app = specs.AppDef("hostile", roles=[py_role("w", code, replicas=2, env={"V": "x'y\"z $P\n"})])
    app.roles[0].args += [*HOSTILE, specs.macros.replica_id]
    app_id = lsf.submit(app, {"jobdir": str(tmp_path / "jobs")})
    d = lsf.describe(app_id)
    assert d is not None and d.state == AppState.PENDING
    run_pending()
    d = lsf.describe(app_id)
    assert d is not None and d.state == AppState.SUCCEEDED
    assert [
        (r.role, [(x.id, x.state, x.hostname) for x in r.replicas]) for r in d.roles_statuses
    ] == [("w", [(0, AppState.SUCCEEDED, "hostB"), (1, AppState.SUCCEEDED, "hostB")])]
    assert [(r.name, r.num_replicas) for r in d.roles] == [("w", 2)]
    host = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    for k in range(2):
        (line,) = list(lsf.log_iter(app_id, "w", k))
        assert json.loads(line) == [[*HOSTILE, str(k)], "x'y\"z $P\n", host]
    assert list(lsf.log_iter(app_id, "w", 0, regex="nomatch")) == []
    with pytest.raises(UnsupportedFeatureError):
        lsf.log_iter(app_id, "w", 0, streams=Stream.STDERR)
    with pytest.raises(UnknownAppException):
        lsf.log_iter("nope_123", "w", 0)


def test_failed_replica_and_message(unit_lsf: LsfScheduler, tmp_path: Path) -> None:
    app = specs.AppDef(
        "f", roles=[py_role("ok", "print(1)"), py_role("bad", "import sys; sys.exit(7)")]
    )
    app_id = unit_lsf.submit(app, {"jobdir": str(tmp_path)})
    set_stat(f"{app_id}-ok-0", "DONE", host="hostB")
    set_stat(f"{app_id}-bad-0", "EXIT", 7, host="hostB")
    d = unit_lsf.describe(app_id)
    assert d is not None and d.state == AppState.FAILED
    assert {(r.role, r.replicas[0].state) for r in d.roles_statuses} == {
        ("ok", AppState.SUCCEEDED),
        ("bad", AppState.FAILED),
    }
    assert "exit code 7" in d.msg


def test_cancel_with_bkill_is_cancelled_exit_130(
    unit_lsf: LsfScheduler, fake: InProcessLsf, tmp_path: Path
) -> None:
    app = specs.AppDef("c", roles=[py_role("w", "print(1)", replicas=2)])
    app_id = unit_lsf.submit(app, {"jobdir": str(tmp_path)})
    set_stat(f"{app_id}-w-0", "RUN")
    unit_lsf.cancel(app_id)
    assert [c for c in fake.calls if c[0] == "bkill"] == [["bkill", *sorted(table()["jobs"])]]
    d = unit_lsf.describe(app_id)
    assert d is not None and d.state == AppState.CANCELLED
    assert {j["exit_code"] for j in table()["jobs"].values()} == {130}
    fake.calls.clear()
    unit_lsf.cancel(app_id)  # finished: nothing left to kill, no error
    unit_lsf.cancel("unknown_app")
    assert not [c for c in fake.calls if c[0] == "bkill"]


# bjobs STAT values (IBM Spectrum LSF "Job states"), written independently of LSF_STATES
LSF_EXPECTED = {
    "PEND": AppState.PENDING,
    "PROV": AppState.PENDING,
    "WAIT": AppState.PENDING,
    "PSUSP": AppState.PENDING,
    "USUSP": AppState.PENDING,
    "SSUSP": AppState.PENDING,
    "RUN": AppState.RUNNING,
    "DONE": AppState.SUCCEEDED,
    "EXIT": AppState.FAILED,
    "ZOMBI": AppState.FAILED,
    "UNKWN": AppState.UNKNOWN,
}


def test_state_table_is_the_documented_one() -> None:
    assert dict(LSF_STATES) == LSF_EXPECTED


@pytest.mark.parametrize("stat,expected", sorted(LSF_EXPECTED.items()))
def test_state_mapping(
    unit_lsf: LsfScheduler, tmp_path: Path, stat: str, expected: AppState
) -> None:
    app_id = unit_lsf.submit(
        specs.AppDef("s", roles=[py_role("w", "print(1)")]), {"jobdir": str(tmp_path)}
    )
    set_stat(f"{app_id}-w-0", stat, 1 if stat == "EXIT" else "")
    d = unit_lsf.describe(app_id)
    assert d is not None and d.state == expected
    assert LSF_STATES[stat] == expected


def test_unknown_app_is_none(unit_lsf: LsfScheduler) -> None:
    assert unit_lsf.describe("missing_1") is None  # bjobs -json answers with an ERROR record
    with pytest.raises(UnknownAppException):
        unit_lsf.log_iter("missing_1", "w", 0)


def test_log_query_for_a_missing_replica_names_the_valid_ones(
    unit_lsf: LsfScheduler, tmp_path: Path
) -> None:
    app_id = unit_lsf.submit(
        specs.AppDef("s", roles=[py_role("w", "print(1)", replicas=2)]), {"jobdir": str(tmp_path)}
    )
    with pytest.raises(
        InvalidLogQueryError, match=r"no replica w/2; it has \[\('w', 0\), \('w', 1\)\]"
    ):
        unit_lsf.log_iter(app_id, "w", 2)


@pytest.mark.integration
def test_classic_table_when_bjobs_has_no_json(
    lsf: LsfScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LSF_FAKE_NO_JSON", "1")
    app_id = lsf.submit(
        specs.AppDef("t", roles=[py_role("w", "print('hi')", replicas=2)]),
        {"jobdir": str(tmp_path)},
    )
    d = lsf.describe(app_id)
    assert d is not None and d.state == AppState.PENDING
    run_pending()
    d = lsf.describe(app_id)
    assert d is not None and d.state == AppState.SUCCEEDED
    assert [x.hostname for x in d.roles_statuses[0].replicas] == ["hostB", "hostB"]
    assert lsf.describe("missing_1") is None


def test_list_and_many_apps_in_one_call(
    unit_lsf: LsfScheduler, fake: InProcessLsf, tmp_path: Path
) -> None:
    ids = [
        unit_lsf.submit(
            specs.AppDef("l", roles=[py_role("w", "print(1)", replicas=2)]),
            {"jobdir": str(tmp_path)},
        )
        for _ in range(3)
    ]
    set_stat(f"{ids[0]}-w-1", "RUN")
    fake.calls.clear()
    rows = unit_lsf.list()
    assert {r.app_id: r.state for r in rows} == {
        ids[0]: AppState.RUNNING,
        ids[1]: AppState.PENDING,
        ids[2]: AppState.PENDING,
    }
    assert len(fake.calls) == 1 and fake.calls[0][0] == "bjobs"


def test_parsers_on_documented_samples() -> None:
    sample = json.dumps(
        {
            "COMMAND": "bjobs",
            "JOBS": 2,
            "RECORDS": [
                {
                    "JOBID": "1",
                    "STAT": "EXIT",
                    "EXIT_CODE": "130",
                    "JOB_NAME": "a_1-r-0",
                    "EXEC_HOST": "h1",
                    "OUTPUT_FILE": "/j/a_1-r-0.out",
                },
                {"ERROR": "Job <2> is not found"},
            ],
        }
    )
    (rec,) = parse_bjobs_json(sample)
    assert (rec.job_id, rec.stat, rec.exit_code, rec.exec_host) == ("1", "EXIT", 130, "h1")
    table_text = (
        "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n"
        "1234    alice   RUN   normal     hostA       hostB       a_1-r-0    Oct 22 10:02\n"
        "1235    alice   PEND  normal     hostA                   a_1-r-1    Oct 22 10:02\n"
    )
    recs = parse_bjobs_table(table_text)
    assert [(r.job_id, r.stat, r.exec_host, r.name) for r in recs] == [
        ("1234", "RUN", "hostB", "a_1-r-0"),
        ("1235", "PEND", "", "a_1-r-1"),
    ]


def test_describe_many_is_one_bjobs_call(
    unit_lsf: LsfScheduler, fake: InProcessLsf, tmp_path: Path
) -> None:
    ok = unit_lsf.submit(
        specs.AppDef("a", roles=[py_role("w", "print(1)", replicas=2)]), {"jobdir": str(tmp_path)}
    )
    bad = unit_lsf.submit(
        specs.AppDef("b", roles=[py_role("w", "print(1)")]), {"jobdir": str(tmp_path)}
    )
    set_stat(f"{ok}-w-0", "DONE")
    set_stat(f"{ok}-w-1", "RUN")
    set_stat(f"{bad}-w-0", "EXIT", 9)
    fake.calls.clear()
    many = unit_lsf.describe_many([ok, bad, "nosuch-app"])
    assert [c[0] for c in fake.calls] == ["bjobs"]
    assert many["nosuch-app"] is None
    assert many[ok] is not None and many[ok].state == AppState.RUNNING
    assert [r.state for r in many[ok].roles_statuses[0].replicas] == [
        AppState.SUCCEEDED,
        AppState.RUNNING,
    ]
    assert many[bad] is not None and many[bad].state == AppState.FAILED
    assert many[ok] == unit_lsf.describe(ok) and many[bad] == unit_lsf.describe(bad)


@pytest.mark.parametrize(
    ("stat", "code", "expected"),
    [
        ("EXIT", 130, AppState.CANCELLED),  # bkill's SIGINT
        ("EXIT", 1, AppState.FAILED),
        ("EXIT", None, AppState.FAILED),
        ("DONE", 130, AppState.SUCCEEDED),
        ("RUN", 130, AppState.RUNNING),
        ("NEW?", None, AppState.UNKNOWN),
    ],
)
def test_record_state_tells_cancel_from_failure(
    stat: str, code: int | None, expected: AppState
) -> None:
    from torchx_core.schedulers.lsf.scheduler import LsfJobRecord, _state

    assert _state(LsfJobRecord(job_id="1", stat=stat, exit_code=code, name="a-w-0")) == expected
