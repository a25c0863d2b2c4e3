"""TorchX's public names of ``torchx.schedulers.slurm_scheduler``, behaving as in TorchX.

``version()`` (``sinfo --version``, cached, 24.05 assumed off the cluster) is what a default
scheduler asks, looked up at call time so that ``mock.patch("...slurm_scheduler.version")``
works; ``describe`` goes through ``_describe_squeue`` then ``_describe_sacct``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from support.slurm_fixtures import FakeSlurm

from torchx_core import specs
from torchx_core.schedulers import slurm_scheduler
from torchx_core.schedulers.slurm._probe import COMMAND_TIMEOUT
from torchx_core.schedulers.slurm_scheduler import SlurmScheduler, version
from torchx_core.specs import AppState


@pytest.fixture(autouse=True)
def fresh_version() -> Iterator[None]:
    version.cache_clear()
    yield
    version.cache_clear()


def test_version_reads_sinfo_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], object]] = []

    def check_output(args: list[str], **kw: object) -> str:
        calls.append((args, kw.get("timeout")))
        return "slurm 24.11.0 rev1"

    monkeypatch.setattr(subprocess, "check_output", check_output)
    assert version() == (24, 11) == version()
    # one shell-out per process, bounded as every Slurm command
    assert calls == [(["sinfo", "--version"], COMMAND_TIMEOUT)]


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError("sinfo"),
        subprocess.CalledProcessError(1, "sinfo", "", "down"),
        subprocess.TimeoutExpired("sinfo", 120),  # a hung controller
    ],
)
def test_version_off_the_cluster_assumes_24_05(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setattr(subprocess, "check_output", mock.Mock(side_effect=error))
    with pytest.warns(RuntimeWarning, match="sinfo --version"):
        assert version() == (24, 5)


def _gpu_app() -> specs.AppDef:
    role = specs.Role(
        "t", image="/x", entrypoint="echo", resource=specs.Resource(cpu=1, gpu=2, memMB=64)
    )
    return specs.AppDef("a", roles=[role])


@pytest.mark.parametrize(
    ("answer", "flag"), [((24, 5), "--gpus-per-task=2"), ((25, 0), "--gpus-per-node=2")]
)
def test_patched_version_decides_the_gpu_flag(answer: tuple[int, int], flag: str) -> None:
    sched = SlurmScheduler("s")  # the default probe: slurm_scheduler.version
    with mock.patch("torchx_core.schedulers.slurm_scheduler.version", return_value=answer) as v:
        script = str(sched.submit_dryrun(_gpu_app(), {"job_dir": "/x"}))
    assert flag in script and v.called


def _submitted(fake: FakeSlurm, tmp_path: Path) -> tuple[SlurmScheduler, str]:
    sched = SlurmScheduler("s", run_cmd=fake)
    res = specs.Resource(cpu=1, gpu=0, memMB=64)
    app = specs.AppDef("a", roles=[specs.Role("t", image="/x", entrypoint="echo", resource=res)])
    return sched, sched.submit(app, {"job_dir": str(tmp_path)})


def test_describe_asks_squeue_then_sacct(tmp_path: Path) -> None:
    fake = FakeSlurm(version=(24, 11))
    sched, app_id = _submitted(fake, tmp_path)
    squeue_desc = sched._describe_squeue(app_id)
    assert squeue_desc is not None and squeue_desc.state == AppState.PENDING
    fake.set_state(app_id, "COMPLETED")
    fake.forget(app_id)
    # as TorchX: squeue of 24.11 fails on an id it forgot, and _describe_squeue raises that
    with pytest.raises(subprocess.CalledProcessError) as failed:
        sched._describe_squeue(app_id)
    assert "Invalid job id" in failed.value.stderr
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    sacct_desc = sched._describe_sacct(app_id)
    assert sacct_desc is not None and sacct_desc.state == AppState.SUCCEEDED
    # a _describe_squeue that raises CalledProcessError (TorchX's contract) falls back to sacct
    error = subprocess.CalledProcessError(1, "squeue", "", "Invalid job id specified")
    with mock.patch.object(SlurmScheduler, "_describe_squeue", side_effect=error):
        desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert sched._describe_squeue("not-an-id") is None and sched._describe_sacct("x") is None
    assert slurm_scheduler.SlurmScheduler is SlurmScheduler


def _replica_role() -> specs.Role:
    return specs.Role(
        "foo",
        image="/some/path",
        entrypoint="echo",
        args=["hello slurm", f"id {specs.macros.app_id}", specs.macros.replica_id],
        env={"FOO": "bar"},
        resource=specs.Resource(cpu=2, gpu=3, memMB=10),
    )


def test_replica_request_from_role_as_torchx() -> None:
    # TorchX's builder: SlurmReplicaRequest.from_role(name, role, cfg, nomem).materialize()
    # gives the replica's sbatch and srun words
    opts = slurm_scheduler.SlurmOpts(partition="p1", qos="high", constraint="gpu", time="5:13")
    with mock.patch.object(slurm_scheduler, "version", return_value=(24, 5)):
        req = slurm_scheduler.SlurmReplicaRequest.from_role("foo-1", _replica_role(), cfg=opts)
    sbatch, srun = req.materialize()
    assert sbatch[0] == "--job-name=foo-1" and "--mem=10" in sbatch
    for word in ("--partition=p1", "--qos=high", "--constraint=gpu", "--time=5:13"):
        assert word in sbatch
    assert "--gpus-per-task=3" in sbatch and "--cpus-per-task=2" in sbatch
    assert req.replica_id == 1  # taken from the name, and the macro follows it
    assert srun[:2] == [
        '--output=slurm-"$SLURM_JOB_ID"-foo-1.out',
        '--error=slurm-"$SLURM_JOB_ID"-foo-1.err',
    ]
    assert srun[-4:] == ["echo", "'hello slurm'", "'id '\"$SLURM_JOB_ID\"''", "1"]
    assert "FOO=bar" in srun
    # nomem (argument or option) leaves --mem out; a patched newer Slurm gets --gpus-per-node
    with mock.patch.object(slurm_scheduler, "version", return_value=(25, 0)):
        sbatch, _ = slurm_scheduler.SlurmReplicaRequest.from_role(
            "foo-0", _replica_role(), cfg={}, nomem=True
        ).materialize()
    assert not [w for w in sbatch if w.startswith("--mem")]
    assert "--gpus-per-node=3" in sbatch


def test_replica_request_asks_no_version_without_gpus() -> None:
    role = specs.Role(
        "r", image="/x", entrypoint="echo", resource=specs.Resource(cpu=1, gpu=0, memMB=8)
    )
    with mock.patch.object(slurm_scheduler, "version", side_effect=AssertionError("asked")):
        sbatch, _ = slurm_scheduler.SlurmReplicaRequest.from_role("r-0", role, {}).materialize()
    assert not [w for w in sbatch if "gpu" in w]


def test_should_use_gpus_per_node_from_version() -> None:
    for answer, expected in (((24, 11), True), ((25, 0), True), ((24, 5), False), ((23, 2), False)):
        with mock.patch.object(slurm_scheduler, "version", return_value=answer):
            assert slurm_scheduler._should_use_gpus_per_node_from_version() is expected


def test_dryrun_replicas_by_job_name_as_torchx() -> None:
    app = _gpu_app()
    app.roles[0].num_replicas = 2
    app.roles.append(specs.Role("b", image="/x", entrypoint="echo", resource=app.roles[0].resource))
    scheduler = SlurmScheduler("s", probe=slurm_scheduler.StaticSlurmProbe((24, 5)))
    req = scheduler.submit_dryrun(app, {"qos": "high"}).request
    assert list(req.replicas) == ["t-0", "t-1", "b-0"]
    for replica in req.replicas.values():
        assert replica.sbatch_opts["qos"] == "high" and replica.sbatch_opts["gpus-per-task"] == "2"


def test_dryrun_refuses_two_roles_of_one_name() -> None:
    app = _gpu_app()
    app.roles.append(app.roles[0])
    with pytest.raises(
        slurm_scheduler.AppValidationError, match=r"role names \['t'\] are used twice"
    ):
        SlurmScheduler("s", probe=slurm_scheduler.StaticSlurmProbe(None)).submit_dryrun(app, {})


def test_qos_help_names_quality_of_service() -> None:
    qos = SlurmScheduler("s").run_opts().get("qos")
    assert qos is not None and "Quality of Service" in qos.help


def test_replica_sbatch_words_are_torchx_words_in_torchx_order() -> None:
    # TorchX's list for a 2 CPU / 10 MB / 3 GPU role on Slurm 24.05: --requeue on every
    # component, --ntasks-per-node=1, --mem in MB without a unit, --ntasks=1 last
    with mock.patch.object(slurm_scheduler, "version", return_value=(24, 5)):
        sbatch, _ = slurm_scheduler.SlurmReplicaRequest.from_role(
            "role-0", _replica_role(), cfg=slurm_scheduler.SlurmOpts(), nomem=False
        ).materialize()
        nomem, _ = slurm_scheduler.SlurmReplicaRequest.from_role(
            "role-0", _replica_role(), cfg=slurm_scheduler.SlurmOpts(), nomem=True
        ).materialize()
    assert sbatch == [
        "--job-name=role-0",
        "--requeue",
        "--ntasks-per-node=1",
        "--cpus-per-task=2",
        "--mem=10",
        "--gpus-per-task=3",
        "--ntasks=1",
    ]
    assert nomem == [w for w in sbatch if w != "--mem=10"]


def test_app_id_inside_a_word_is_quoted_as_torchx() -> None:
    role = specs.Role("foo", image="/p", entrypoint="echo", args=[f"hello {specs.macros.app_id}"])
    _, srun = slurm_scheduler.SlurmReplicaRequest.from_role("foo-0", role, cfg={}).materialize()
    assert "echo 'hello '\"$SLURM_JOB_ID\"''" in " ".join(srun)


def test_roles_without_resource_get_the_partition_defaults() -> None:
    # TorchX's Slurm scheduler skips the resource check: no --cpus-per-task/--mem/--gpus words
    role = specs.Role("b", image="/p", entrypoint="echo")
    info = SlurmScheduler("s", probe=mock.Mock()).submit_dryrun(specs.AppDef("a", [role]), {})
    assert info.request.replicas["b-0"].sbatch_opts == {
        "requeue": None,
        "ntasks-per-node": "1",
        "ntasks": "1",
    }
    assert "--cpus-per-task" not in str(info) and "--mem" not in str(info)


def test_job_options_are_words_of_the_sbatch_command_as_torchx() -> None:
    role = specs.Role("b", image="/p", entrypoint="echo", num_replicas=2)
    cfg = {"mail-user": "a@b.c", "mail-type": "END", "account": "proj"}
    req = SlurmScheduler("s").submit_dryrun(specs.AppDef("a", [role]), cfg).request
    assert req.cmd == [
        "sbatch",
        "--parsable",
        "--mail-user=a@b.c",
        "--mail-type=END",
        "--account=proj",
    ]
    # the account is also on every het component's #SBATCH line
    assert all(r.sbatch_opts["account"] == "proj" for r in req.replicas.values())
    # a line break in a value cannot start a line of its own in the script's header
    role.num_replicas = 1
    req = (
        SlurmScheduler("s")
        .submit_dryrun(specs.AppDef("a", [role]), {"mail-type": "END\n#SBATCH --x"})
        .request
    )
    assert req.cmd[-1] == "--mail-type=END\n#SBATCH --x"
    assert [ln for ln in req.materialize().splitlines() if ln.startswith("#SBATCH")] == [
        ln for ln in req.materialize().splitlines() if ln.startswith("#SBATCH --job-name=")
    ]
