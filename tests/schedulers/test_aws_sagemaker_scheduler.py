"""Unit tests of ``aws_sagemaker`` against stateful fakes of the sagemaker and logs clients."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from golden_files import check_golden
from support.aws_fixtures import FakeLogs, FakeSageMaker

from torchx_core import __version__
from torchx_core.schedulers.api import AppValidationError, SchedulerError
from torchx_core.schedulers.aws.sagemaker import (
    JOB_STATES,
    AWSSageMakerScheduler,
    create_scheduler,
)
from torchx_core.specs import (
    AppDef,
    AppState,
    MissingDependencyError,
    Role,
    UnknownAppException,
    macros,
    resource,
)

CFG = {"role": "arn:aws:iam::1:role/sm", "output_path": "s3://bucket/out"}


def _role(**kwargs: object) -> Role:
    base: dict[str, object] = {
        "name": "trainer",
        "image": "1.dkr.ecr.us-east-1.amazonaws.com/train:1",
        "entrypoint": "python",
        "args": ["train.py", "--job", macros.app_id],
        "env": {"LR": "0.1"},
        "num_replicas": 2,
        "resource": resource(h="aws_m5.xlarge"),
    }
    base.update(kwargs)
    return Role(**base)  # type: ignore[arg-type]


def _sched(sm: FakeSageMaker | None = None, logs: FakeLogs | None = None) -> AWSSageMakerScheduler:
    return AWSSageMakerScheduler(
        "t", client=sm or FakeSageMaker(), log_client=logs or FakeLogs(), poll_interval=0.01
    )


def test_dryrun_golden_request() -> None:
    cfg = {
        **CFG,
        "hyperparameters": {"epochs": "3"},
        "use_spot_instances": True,
        "max_run": 3600,
        "max_wait": 7200,
        "subnets": ["subnet-1"],
        "security_group_ids": ["sg-1"],
        "tags": {"team": "ml"},
        "volume_size": 50,
    }
    info = _sched().submit_dryrun(AppDef("My Train", roles=[_role()]), cfg)
    req = info.request
    assert req.job_name.startswith("My-Train-")
    # dryrun prints the native request: exactly the golden file (random job name replaced)
    text = str(info).replace(req.job_name, "NAME").replace(f'"{__version__}"', '"VERSION"')
    check_golden("aws_sagemaker_dryrun.json", text, __file__)
    assert json.loads(str(info))["request"] == req.request
    assert req.request["ResourceConfig"] == {
        "InstanceType": "ml.m5.xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 50,
    }


def test_instance_type_option_wins_and_is_required_without_named_resource() -> None:
    req = (
        _sched()
        .submit_dryrun(AppDef("a", roles=[_role()]), {**CFG, "instance_type": "ml.g5.xlarge"})
        .request
    )
    assert req.request["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    with pytest.raises(AppValidationError, match=r"no instance type.*instance_type"):
        _sched().submit_dryrun(AppDef("a", roles=[_role(resource=resource(cpu=1, memMB=1))]), CFG)


def test_validation_lists_every_problem() -> None:
    app = AppDef("a", roles=[_role(args=["--rank", macros.replica_id]), _role(name="ps")])
    with pytest.raises(AppValidationError) as e:
        _sched().submit_dryrun(app, CFG)
    assert "runs one role, the app has 2 (trainer, ps)" in str(e.value)
    assert "uses macros.replica_id with 2 replicas" in str(e.value)


def test_single_replica_gets_replica_id_zero() -> None:
    app = AppDef("a", roles=[_role(num_replicas=1, args=["--rank", macros.replica_id])])
    req = _sched().submit_dryrun(app, CFG).request
    assert req.request["AlgorithmSpecification"]["ContainerArguments"] == ["--rank", "0"]


def test_submit_describe_list_cancel() -> None:
    sm = FakeSageMaker()
    sched = _sched(sm)
    a = sched.submit(AppDef("a", roles=[_role()]), CFG)
    b = sched.submit(AppDef("b", roles=[_role(num_replicas=1)]), CFG)
    desc = sched.describe(a)
    assert desc is not None and desc.state == AppState.RUNNING
    assert desc.roles_statuses[0].role == "trainer"
    assert [r.hostname for r in desc.roles_statuses[0].replicas] == ["algo-1", "algo-2"]
    assert desc.roles[0].args == sm.jobs[a]["AlgorithmSpecification"]["ContainerArguments"]
    expected = {
        "InProgress": AppState.RUNNING,
        "Completed": AppState.SUCCEEDED,
        "Failed": AppState.FAILED,
        "Stopping": AppState.RUNNING,
        "Stopped": AppState.CANCELLED,
    }
    assert set(JOB_STATES) == set(expected)
    for native, state in expected.items():
        sm.jobs[a]["TrainingJobStatus"] = native
        assert sched.describe(a).state == state  # type: ignore[union-attr]
    sm.jobs[a]["TrainingJobStatus"] = "Failed"
    sm.jobs[a]["FailureReason"] = "AlgorithmError: exit 3"
    assert sched.describe(a).msg == "AlgorithmError: exit 3"  # type: ignore[union-attr]
    assert {x.app_id: x.state for x in sched.list()} == {a: AppState.FAILED, b: AppState.RUNNING}
    sched.cancel(b)
    assert sm.stopped == [b]
    sched.cancel(b)  # Stopping: not stopped twice
    sched.cancel(a)  # Failed: nothing to stop
    assert sm.stopped == [b]
    assert sched.describe("missing") is None


def test_logs_from_cloudwatch_streams() -> None:
    sm, logs = FakeSageMaker(), FakeLogs()
    sched = _sched(sm, logs)
    a = sched.submit(AppDef("a", roles=[_role()]), CFG)
    logs.put("/aws/sagemaker/TrainingJobs", f"{a}/algo-2-1700000000", "epoch 1", "epoch 2", "done")
    logs.put("/aws/sagemaker/TrainingJobs", f"{a}/algo-1-1700000000", "other host")
    sm.jobs[a]["TrainingJobStatus"] = "Completed"
    assert list(sched.log_iter(a, "trainer", 1)) == ["epoch 1\n", "epoch 2\n", "done\n"]
    assert list(sched.log_iter(a, "trainer", 1, regex="epoch", should_tail=True)) == [
        "epoch 1\n",
        "epoch 2\n",
    ]
    assert list(sched.log_iter(a, "trainer", 0)) == ["other host\n"]
    with pytest.raises(UnknownAppException):
        sched.log_iter("missing", "trainer")


def test_schedule_error_and_missing_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    class Rejecting(FakeSageMaker):
        def create_training_job(self, **kwargs: object) -> dict[str, object]:
            raise RuntimeError("ResourceLimitExceeded")

    with pytest.raises(SchedulerError, match=r"rejected training job .*ResourceLimitExceeded"):
        _sched(Rejecting()).submit(AppDef("a", roles=[_role()]), CFG)
    assert isinstance(create_scheduler("s", client=FakeSageMaker()), AWSSageMakerScheduler)
    monkeypatch.setitem(sys.modules, "boto3", None)
    # not installed at all (an installed package that fails to import gets another message)
    monkeypatch.setattr("torchx_core.specs._dependencies.installed_version", lambda _dist: None)
    sched = AWSSageMakerScheduler("t")
    sched.submit_dryrun(AppDef("a", roles=[_role()]), CFG)
    with pytest.raises(MissingDependencyError, match=r"checkout>\[aws\]"):
        sched.describe("x")


def test_unconfigured_aws_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    sched = AWSSageMakerScheduler("t")
    for call in (lambda: sched.describe("x"), sched.list, lambda: sched.cancel("x")):
        with pytest.raises(SchedulerError) as e:
            call()
        assert "aws_sagemaker: cannot create the AWS sagemaker client" in str(e.value)
        assert "no-such-profile" in str(e.value) and "AWS_PROFILE" in str(e.value)


def test_role_must_be_an_arn() -> None:
    from torchx_core.specs import InvalidRunConfigException

    opts = _sched().run_opts()
    assert opts.get("role") is not None and opts.get("role").is_required  # type: ignore[union-attr]
    with pytest.raises(
        InvalidRunConfigException,
        match=r"role='sm' is not an IAM role ARN.*arn:aws:iam::123456789012:role/sm",
    ):
        _sched().submit_dryrun(AppDef("a", roles=[_role()]), {**CFG, "role": "sm"})


def test_log_iter_names_the_valid_role_and_replicas() -> None:
    from torchx_core.schedulers.api import InvalidLogQueryError

    sched = _sched()
    app_id = sched.submit(AppDef("a", roles=[_role()]), CFG)
    for role, k in (("trainer", 2), ("ps", 0)):
        with pytest.raises(
            InvalidLogQueryError,
            match=f"no replica {k} of role '{role}'; its only role is 'trainer' with replicas 0-1",
        ):
            sched.log_iter(app_id, role, k)
    # a job description without Environment (moto's) names no role: only the replica is checked
    sm = FakeSageMaker()
    sched = _sched(sm)
    app_id = sched.submit(AppDef("a", roles=[_role()]), CFG)
    del sm.jobs[app_id]["Environment"]
    assert list(sched.log_iter(app_id, "anything", 1)) == []
    with pytest.raises(
        InvalidLogQueryError, match="no replica 2 of role 'x'; its only role is 'x'"
    ):
        sched.log_iter(app_id, "x", 2)
