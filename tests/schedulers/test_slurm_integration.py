"""The slurm scheduler against a real Slurm cluster (scripts/services/slurm: munge, slurmdbd,
slurmctld and four fake nodes on this machine). Every job runs for real; nothing is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.service_helpers import free_port
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

from torchx_core import specs
from torchx_core.schedulers.api import DescribeAppResponse, SchedulerError
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, create_scheduler, run_command
from torchx_core.specs import AppState, is_terminal

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.timeout(300)]

PY = sys.executable
HOSTILE = [
    ":",
    "\\:",
    "it's",
    '"dq"',
    "$HOME",
    "${SLURM_JOB_ID}",
    "`id`",
    "$(id)",
    "a\nb",
    "ünï©ødé ✓",
    "\\",
    "*",
    "",
    " lead",
    "%j",
    "--het-group=1",
    ";",
    "|",
    "#",
    "a\r\nb",
    "\r",
]  # carriage returns: sbatch refuses a script with "\r\n" in it


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> Iterator[SlurmScheduler]:  # noqa: F811
    s = create_scheduler("itest")
    submitted: list[str] = []
    original = s.schedule

    def tracking_schedule(info):  # type: ignore[no-untyped-def]
        app_id = original(info)
        submitted.append(app_id)
        return app_id

    s.schedule = tracking_schedule  # type: ignore[method-assign]
    yield s
    for app_id in submitted:  # tests clean up their apps
        s.cancel(app_id)


def role(name: str, code: str, replicas: int = 1, **kw: object) -> specs.Role:
    return specs.Role(
        name,
        image="",
        entrypoint=PY,
        args=["-c", code],
        num_replicas=replicas,
        resource=specs.Resource(cpu=1, gpu=0, memMB=100),
        **kw,
    )  # type: ignore[arg-type]


def wait(
    sched: SlurmScheduler,
    app_id: str,
    until: Callable[[DescribeAppResponse], bool],
    timeout: float = 120,
) -> DescribeAppResponse:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = sched.describe(app_id)
        assert last is not None, f"slurm forgot job {app_id}"
        if until(last):
            return last
        time.sleep(0.5)
    raise AssertionError(f"job {app_id} did not get there within {timeout}s; last: {last}")


def finished(d: DescribeAppResponse) -> bool:
    return is_terminal(d.state)


def replica_states(d: DescribeAppResponse) -> dict[tuple[str, int], AppState]:
    return {(r.role, x.id): x.state for r in d.roles_statuses for x in r.replicas}


def test_single_role_multi_replica(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = "import os,sys; print('replica', sys.argv[1], 'procid', os.environ['SLURM_PROCID'])"
    app = specs.AppDef("multi", roles=[role("worker", code, replicas=3)])
    app.roles[0].args.append(specs.macros.replica_id)
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    d = wait(sched, app_id, finished)
    assert d.state == AppState.SUCCEEDED, d
    assert replica_states(d) == {("worker", k): AppState.SUCCEEDED for k in range(3)}
    hosts = [x.hostname for r in d.roles_statuses for x in r.replicas]
    assert len(set(hosts)) == 3  # one fake node per het component
    for k in range(3):
        assert list(sched.log_iter(app_id, "worker", k)) == [f"replica {k} procid {k}\n"]


def test_heterogeneous_multi_role(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = "import os,sys; print(sys.argv[1], os.environ['ROLE'], os.environ['TORCHX_RANK0_HOST'])"
    app = specs.AppDef(
        "het",
        roles=[
            role("trainer", code, replicas=1, env={"ROLE": "t"}),
            role("reader", code, replicas=2, env={"ROLE": "r"}),
        ],
    )
    for r in app.roles:
        r.args.append(f"{r.name}-{specs.macros.replica_id}-of-{specs.macros.app_id}")
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    d = wait(sched, app_id, finished)
    assert d.state == AppState.SUCCEEDED, d
    assert [(r.role, len(r.replicas)) for r in d.roles_statuses] == [("trainer", 1), ("reader", 2)]
    assert list(sched.log_iter(app_id, "trainer", 0)) == [f"trainer-0-of-{app_id} t 127.0.0.1\n"]
    assert list(sched.log_iter(app_id, "reader", 1)) == [f"reader-1-of-{app_id} r 127.0.0.1\n"]


def test_failing_job(sched: SlurmScheduler, tmp_path: Path) -> None:
    # "bad" fails only once "ok" has ended: a replica still running when another fails is
    # killed by Slurm (exit 143), which is another case than this one (seen on a loaded machine)
    done = str(tmp_path / "ok.done")
    ok = f"import os; print('fine', flush=True); open({done!r}, 'w').close(); os._exit(0)"
    bad = (
        "import os, sys, time\n"
        f"for _ in range(6000):\n    if os.path.exists({done!r}): break\n    time.sleep(0.05)\n"
        "time.sleep(0.5); print('boom', file=sys.stderr); sys.exit(3)"
    )
    app = specs.AppDef("fail", roles=[role("ok", ok), role("bad", bad)])
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    d = wait(sched, app_id, finished)
    assert d.state == AppState.FAILED
    assert "exit code 3" in d.msg
    assert replica_states(d) == {("ok", 0): AppState.SUCCEEDED, ("bad", 0): AppState.FAILED}
    assert list(sched.log_iter(app_id, "bad", 0)) == ["boom\n"]  # stderr is in the (combined) log


def test_cancelled_job(sched: SlurmScheduler, tmp_path: Path) -> None:
    app = specs.AppDef(
        "cancel",
        roles=[
            role("sleeper", "import time; print('up', flush=True); time.sleep(300)", replicas=2)
        ],
    )
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "10"})
    wait(sched, app_id, lambda d: d.state == AppState.RUNNING)
    sched.cancel(app_id)
    d = wait(sched, app_id, finished, timeout=60)
    assert d.state == AppState.CANCELLED
    assert set(replica_states(d).values()) == {AppState.CANCELLED}
    sched.cancel(app_id)  # idempotent


def test_requeued_retry(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = (
        "import os,sys; n=int(os.environ.get('SLURM_RESTART_COUNT','0')); print('attempt', n);"
        " sys.exit(0 if n >= 1 else 5)"
    )
    app = specs.AppDef("retry", roles=[role("flaky", code, max_retries=1)])
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    # the first run fails and requeues the job (Slurm counts the restart) ...
    wait(sched, app_id, lambda d: d.num_restarts >= 1 or is_terminal(d.state))
    # ... and the second run succeeds. Slurm starts a requeued job only once its old credential
    # expired (AuthInfo=cred_expire=10 on the test cluster; forcing an earlier start makes slurmd
    # refuse it as "Job credential revoked" and the job fails)
    d = wait(sched, app_id, finished, timeout=200)
    assert d.state == AppState.SUCCEEDED, d
    assert d.num_restarts == 1
    assert list(sched.log_iter(app_id, "flaky", 0)) == ["attempt 0\n", "attempt 1\n"]


def test_job_without_retries_is_requeueable_as_torchx(
    sched: SlurmScheduler,
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    # TorchX submits every job with --requeue: Slurm requeues it after a preemption or a node
    # failure even with max_retries=0 (the script itself requeues a failed run only on retries)
    app = specs.AppDef("norequeue", roles=[role("one", "import time; time.sleep(30)")])
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    try:
        shown = slurm_cluster.run("scontrol", "show", "job", app_id)
        assert "Requeue=1" in shown, shown
    finally:
        sched.cancel(app_id)


def test_torchx_words_on_a_real_cluster(
    sched: SlurmScheduler,
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    # TorchX's request: mail and account options on the sbatch command line (the script on
    # stdin), --requeue/--ntasks-per-node=1/--mem=<MB> on every het component, and a role
    # without a resource (the partition's defaults)
    for add in (["account", "torchxproj"], ["user", "root", "account=torchxproj"]):
        # the account must exist for Slurm to keep it (else the job runs under the default one);
        # adding it again only answers "Nothing new added"
        subprocess.run(["sacctmgr", "-i", "add", *add], capture_output=True, check=False)
    sleeper = role("sleeper", "import time; time.sleep(30)", replicas=2)
    bare = specs.Role("bare", image="", entrypoint=PY, args=["-c", "import time; time.sleep(30)"])
    app = specs.AppDef("words", roles=[sleeper, bare])
    cfg = {"job_dir": str(tmp_path), "time": "5", "account": "torchxproj", "mail-type": "END"}
    app_id = sched.submit(app, {**cfg, "mail-user": "nobody@localhost"})
    try:
        wait(sched, app_id, lambda d: d.state == AppState.RUNNING)
        shown = slurm_cluster.run("scontrol", "show", "job", app_id)
        components = [c for c in shown.split("\n\n") if c.strip()]
        assert len(components) == 3, shown
        for c in components:
            assert "Account=torchxproj" in c and "Requeue=1" in c and "NumNodes=1" in c, c
            assert "NumTasks=1" in c, c
        assert "MailUser=nobody@localhost MailType=END" in components[0], components[0]
        assert "MinMemoryNode=100M" in components[0], components[0]
    finally:
        sched.cancel(app_id)


def test_memory_beyond_the_nodes_says_how_to_leave_out_mem(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    # TorchX leaves --mem out at dry run when the partition reports <= 1000 MB per node (an
    # `sinfo` at every dry run); here the dry run asks nothing and sbatch's refusal says what to do
    big = role("big", "print(1)")
    big.resource = specs.Resource(cpu=1, gpu=0, memMB=10_000_000)
    with pytest.raises(SchedulerError) as e:
        sched.submit(specs.AppDef("big", roles=[big]), {"job_dir": str(tmp_path), "time": "5"})
    assert "Memory specification" in str(e.value) and "-cfg nomem=True" in str(e.value)


def test_logs_tail_and_regex(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = (
        "import time\nfor i in range(6):\n    print('line', i, flush=True)\n"
        "    print('noise', flush=True)\n    time.sleep(0.3)"
    )
    app = specs.AppDef("logs", roles=[role("talker", code)])
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    tailed = list(sched.log_iter(app_id, "talker", 0, regex=r"^line", should_tail=True))
    assert tailed == [f"line {i}\n" for i in range(6)]
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert len(list(sched.log_iter(app_id, "talker", 0))) == 12


def test_list_and_batched_status(sched: SlurmScheduler, tmp_path: Path) -> None:
    app = specs.AppDef("l", roles=[role("quick", "print(1)")])
    ids = [sched.submit(app, {"job_dir": str(tmp_path), "time": "5"}) for _ in range(3)]
    for app_id in ids:
        wait(sched, app_id, finished)
    listed = {r.app_id: r.state for r in sched.list()}
    assert all(listed[a] == AppState.SUCCEEDED for a in ids)
    many = sched.describe_many([*ids, "99999999"])
    assert many["99999999"] is None
    assert all(many[a].state == AppState.SUCCEEDED for a in ids)  # type: ignore[union-attr]


def test_sacct_fallback_on_real_accounting(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    def squeue_forgot_everything(args: list[str], input: str | None = None):  # type: ignore[no-untyped-def]
        if args[0] == "squeue":
            return subprocess.CompletedProcess(args, 0, '{"jobs": []}', "")
        return run_command(args, input)

    real = create_scheduler("itest")
    forgetful = SlurmScheduler("itest", run_cmd=squeue_forgot_everything)
    done = tmp_path / "a-done"  # b fails only once a ended (else Slurm may kill a with it)
    app = specs.AppDef(
        "acct",
        roles=[
            role("a", f"import pathlib; print(1); pathlib.Path({str(done)!r}).touch()"),
            role(
                "b",
                f"import os, sys, time\nwhile not os.path.exists({str(done)!r}):"
                " time.sleep(0.05)\ntime.sleep(1); sys.exit(2)",
            ),
        ],
    )
    app_id = real.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    wait(real, app_id, finished)
    deadline = time.monotonic() + 30
    d = forgetful.describe(app_id)
    while (d is None or not is_terminal(d.state)) and time.monotonic() < deadline:
        time.sleep(0.5)  # jobs reach the accounting database about a second after they end
        d = forgetful.describe(app_id)
    assert d is not None and d.state == AppState.FAILED, d
    assert replica_states(d) == {("a", 0): AppState.SUCCEEDED, ("b", 0): AppState.FAILED}
    assert Path(tmp_path, f"slurm-{app_id}-b-0.out").exists()
    # sacct's Submit/End (local time) are squeue's submit_time/end_time (epoch seconds)
    [from_squeue] = [r for r in real.list() if r.app_id == app_id]
    [from_sacct] = [r for r in forgetful.list() if r.app_id == app_id]
    assert from_squeue.ended is not None, from_squeue
    assert (from_sacct.created, from_sacct.ended) == (from_squeue.created, from_squeue.ended)
    # a finished job's resource use comes from its steps' accounting records
    usage = forgetful.resource_usage(app_id)
    while set(usage or ()) != {("a", 0), ("b", 0)} and time.monotonic() < deadline + 30:
        time.sleep(0.5)
        usage = forgetful.resource_usage(app_id)
    assert usage is not None and set(usage) == {("a", 0), ("b", 0)}, usage
    # (memory: 0 for steps that ended before Slurm's first sample, every 30 s)
    assert all(u.cpu_seconds > 0 and u.processes == 1 for u in usage.values()), usage


def test_hostile_strings_reach_real_jobs(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = "import json,os,sys; print(json.dumps([sys.argv[1:], os.environ['HOSTILE']]))"
    app = specs.AppDef(
        "hostile",
        roles=[
            role("h", code, replicas=2, env={"HOSTILE": "x'y\"z $P `q`\n:"}),
        ],
    )
    app.roles[0].args += HOSTILE
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    d = wait(sched, app_id, finished)
    assert d.state == AppState.SUCCEEDED, d
    for k in range(2):
        (line,) = list(sched.log_iter(app_id, "h", k))
        assert json.loads(line) == [HOSTILE, "x'y\"z $P `q`\n:"]


DDP_SCRIPT = """
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([rank + 1])
dist.all_reduce(t)
print(f"rank={rank} world={world} group_rank={os.environ['GROUP_RANK']} sum={int(t)}"
      f" master={os.environ['MASTER_ADDR']} rank0={os.environ['TORCHX_RANK0_HOST']}", flush=True)
dist.destroy_process_group()
"""


def test_dist_ddp_rendezvous(
    sched: SlurmScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.components import dist as dist_components

    script = tmp_path / "check_ddp.py"
    script.write_text(DDP_SCRIPT)
    # the job inherits the submitting environment: `python` is the venv's (with torch)
    monkeypatch.setenv("PATH", f"{os.path.dirname(PY)}:{os.environ['PATH']}")
    app = dist_components.ddp(script=str(script), j="2x1", cpu=1, memMB=1000, rdzv_port=free_port())
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "time": "5"})
    d = wait(sched, app_id, finished, timeout=240)
    role_name = app.roles[0].name
    logs = {k: "".join(sched.log_iter(app_id, role_name, k)) for k in range(2)}
    assert d.state == AppState.SUCCEEDED, (d, logs)
    lines = sorted(
        line.split("]:", 1)[-1].strip()
        for text in logs.values()
        for line in text.splitlines()
        if "rank=" in line
    )
    assert [line.split()[0] for line in lines] == ["rank=0", "rank=1"], logs
    assert all(
        "world=2" in line and "sum=3" in line and "rank0=127.0.0.1" in line for line in lines
    ), lines
    assert {line.split()[2] for line in lines} == {"group_rank=0", "group_rank=1"}


def test_workspace_copied_into_job_dir(sched: SlurmScheduler, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "main.py").write_text("import os; print('ran in', os.getcwd())\n")
    job_dir = tmp_path / "job"
    app = specs.AppDef(
        "ws",
        roles=[
            specs.Role(
                "main",
                image="",
                entrypoint=PY,
                args=["main.py"],
                resource=specs.Resource(1, 0, 100),
            )
        ],
    )
    app_id = sched.submit(app, {"job_dir": str(job_dir), "time": "5"}, workspace=str(ws))
    d = wait(sched, app_id, finished)
    assert d.state == AppState.SUCCEEDED, d
    assert list(sched.log_iter(app_id, "main", 0)) == [f"ran in {job_dir}\n"]


def test_stdout_stderr_apart_and_job_id_exported(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """Migration break 7, as TorchX: stdout (.out) and stderr (.err) kept apart, and the job
    sees TORCHX_JOB_ID = its app handle (set by the runner, expanded by the batch script)."""
    from torchx_core.runner import get_runner
    from torchx_core.schedulers.api import Stream

    code = (
        "import os, sys, time\nfor i in range(3):\n    print('out', i, flush=True)\n"
        "    print('err', i, file=sys.stderr, flush=True)\n    time.sleep(0.2)\n"
        "print('job', os.environ['TORCHX_JOB_ID'], flush=True)"
    )
    app = specs.AppDef("streams", roles=[role("talker", code)])
    with get_runner("itest") as runner:
        handle = runner.run(app, "slurm", cfg={"job_dir": str(tmp_path), "time": "5"})
        app_id = handle.rsplit("/", 1)[1]
        try:
            tailed = list(runner.log_lines(handle, "talker", 0, should_tail=True))
            status = runner.wait(handle, wait_interval=0.5)
            assert status is not None and status.state == AppState.SUCCEEDED, status
            out = list(runner.log_lines(handle, "talker", 0, streams=Stream.STDOUT))
            err = list(runner.log_lines(handle, "talker", 0, streams=Stream.STDERR))
        finally:
            runner.cancel(handle)
    assert [line.rstrip("\n") for line in out] == [
        "out 0",
        "out 1",
        "out 2",
        f"job slurm://itest/{app_id}",
    ]
    assert [line.rstrip("\n") for line in err] == ["err 0", "err 1", "err 2"]
    assert sorted(line.rstrip("\n") for line in tailed) == sorted(
        [f"out {i}" for i in range(3)]
        + [f"err {i}" for i in range(3)]
        + [f"job slurm://itest/{app_id}"]
    )
    assert (tmp_path / f"slurm-{app_id}-talker-0.err").read_text() == "err 0\nerr 1\nerr 2\n"
