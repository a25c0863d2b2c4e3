"""Unit tests of the blocks' own logic: environment leases, scheduler resolution, job arguments."""

from __future__ import annotations

import os

import pytest

from torchx_core.specs import AppDef, Role
from torchx_prefect.blocks import TorchXJob, TorchXScheduler, _EnvLeases, resolve_scheduler
from torchx_prefect.errors import InvalidTaskArgumentError, TorchXPrefectError


def test_leases_set_share_and_restore_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXB_KEPT", "before")
    monkeypatch.delenv("TXB_NEW", raising=False)
    leases = _EnvLeases()
    env = {"TXB_KEPT": "block", "TXB_NEW": "x"}
    with leases.lease(env, "a"):
        with leases.lease(env, "b"):  # the same values: shared
            assert (os.environ["TXB_KEPT"], os.environ["TXB_NEW"]) == ("block", "x")
        assert (os.environ["TXB_KEPT"], os.environ["TXB_NEW"]) == ("block", "x")  # still held
    assert os.environ["TXB_KEPT"] == "before" and "TXB_NEW" not in os.environ


def test_leases_refuse_a_different_value_while_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXB_CONF", raising=False)
    leases = _EnvLeases()
    with leases.lease({"TXB_CONF": "/a"}, "cluster-a"):
        clash = r"TXB_CONF \(wanted 'b', held by 'cluster-a'\)"
        with pytest.raises(TorchXPrefectError, match=clash), leases.lease({"TXB_CONF": "/b"}, "b"):
            pass
        assert os.environ["TXB_CONF"] == "/a"
    assert "TXB_CONF" not in os.environ


def test_block_environment_reveals_secrets_and_merges_cfg() -> None:
    block = TorchXScheduler(
        scheduler=" slurm ",
        cfg={"partition": "a", "time": "1:00"},
        env={"SLURM_CONF": "/c"},
        secret_env={"TOKEN": "t0p"},
    )
    assert block.scheduler == "slurm"
    assert block.environment() == {"SLURM_CONF": "/c", "TOKEN": "t0p"}
    assert "t0p" not in repr(block)
    assert block.merged_cfg({"partition": "b"}) == {"partition": "b", "time": "1:00"}


def test_block_needs_a_scheduler_name() -> None:
    with pytest.raises(ValueError, match="scheduler must name a TorchX scheduler"):
        TorchXScheduler(scheduler="  ")


def test_resolve_keeps_plain_names_and_blocks() -> None:
    block = TorchXScheduler(scheduler="local_cwd")
    assert resolve_scheduler(block) is block
    assert resolve_scheduler("local_cwd") is None  # a registered scheduler: no API call
    assert resolve_scheduler(42) is None  # left to validate_args


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({}, "exactly one of app"),
        (
            {
                "component": "utils.echo",
                "app": AppDef("a", roles=[Role("r", image="/tmp", entrypoint="true")]).to_dict(),
            },
            "exactly one of app",
        ),
    ],
)
def test_job_arguments_are_checked_before_anything_starts(fields: dict, fragment: str) -> None:
    job = TorchXJob(scheduler=TorchXScheduler(scheduler="local_cwd"), **fields)
    with pytest.raises(InvalidTaskArgumentError, match=fragment):
        job._spec()


def test_job_spec_takes_the_blocks_scheduler_and_merged_cfg() -> None:
    app = AppDef("a", roles=[Role("r", image="/tmp", entrypoint="true")])
    job = TorchXJob(
        scheduler=TorchXScheduler(scheduler="slurm", cfg={"time": "1:00", "job_dir": "/a"}),
        app=app.to_dict(),
        cfg={"job_dir": "/b"},
    )
    spec = job._spec()
    assert (spec.scheduler, spec.cfg, spec.app) == ("slurm", {"time": "1:00", "job_dir": "/b"}, app)


@pytest.mark.parametrize(
    ("cfg", "fragment"),
    [
        ({"partiton": "gpu"}, r"unknown run option 'partiton'\. Did you mean: 'partition'\?"),
        ({"bogus_key": 1}, "unknown run option 'bogus_key'"),
        ({"time": 5}, "Run option: time, must be of type: str"),
    ],
)
def test_block_and_job_refuse_unknown_or_mistyped_run_options(cfg: dict, fragment: str) -> None:
    from torchx_core.specs import InvalidRunConfigException

    with pytest.raises(ValueError, match=fragment):  # pydantic's ValidationError wraps ours
        TorchXScheduler(scheduler="slurm", cfg=cfg)
    job = TorchXJob(scheduler=TorchXScheduler(scheduler="slurm"), component="utils.echo", cfg=cfg)
    with pytest.raises(InvalidRunConfigException, match=fragment):
        job._spec()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout_seconds", -1),
        ("timeout_seconds", 0),
        ("timeout_seconds", float("inf")),
        ("poll_interval", 0),
        ("cancel_timeout", -5),
        ("unknown_state_timeout", -1),
    ],
)
def test_job_refuses_bad_seconds_at_construction(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"TorchXJob {field} must be a finite number of seconds"):
        TorchXJob(
            scheduler=TorchXScheduler(scheduler="local_cwd"),
            component="utils.echo",
            **{field: value},
        )


def test_job_timeout_error_names_the_app_and_the_limit() -> None:
    import pickle

    from torchx_prefect import JobTimeoutError

    err = pickle.loads(pickle.dumps(JobTimeoutError("local_cwd://torchx/app-1", 15.0)))
    assert isinstance(err, TimeoutError) and err.app_handle == "local_cwd://torchx/app-1"
    assert "local_cwd://torchx/app-1" in str(err) and "timeout_seconds=15" in str(err)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout_seconds", -1),
        ("timeout_seconds", float("nan")),
        ("poll_interval", 0),
        ("poll_interval", True),
        ("unknown_state_timeout", -1),
        ("log_tail_lines", -1),
    ],
)
def test_job_refuses_bad_values_on_assignment_too(field: str, value: object) -> None:
    # issue 32: `job.timeout_seconds = -1` after construction was accepted; the app then
    # "timed out" at once
    job = TorchXJob(scheduler=TorchXScheduler(scheduler="local_cwd"), component="utils.echo")
    before = getattr(job, field)
    with pytest.raises(ValueError, match=f"TorchXJob {field} must be"):
        setattr(job, field, value)
    assert getattr(job, field) == before
    job.timeout_seconds = " 60 "  # type: ignore[assignment]  # a config string is a number
    assert job.timeout_seconds == 60.0


def test_scheduler_block_checks_run_options_on_assignment_too() -> None:
    block = TorchXScheduler(scheduler="local_cwd")
    with pytest.raises(ValueError, match=r"unknown run option 'grace_periodd'\. Did you mean"):
        block.cfg = {"grace_periodd": 1.0}
    assert block.cfg == {}
    block.cfg = {"grace_period": 2.0}
    with pytest.raises(ValueError, match=r"unknown run option 'grace_period'"):
        block.scheduler = "slurm"  # slurm has no grace_period
    assert block.scheduler == "local_cwd"
