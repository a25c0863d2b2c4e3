"""Unit tests of ``aws_batch`` against stateful fakes of the batch and logs clients."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from golden_files import check_golden
from support.aws_fixtures import FakeBatch, FakeLogs

from torchx_core import __version__
from torchx_core.schedulers.api import (
    AppValidationError,
    InvalidLogQueryError,
    SchedulerError,
    Stream,
)
from torchx_core.schedulers.aws.batch import (
    CANCEL_REASON,
    JOB_STATES,
    AWSBatchScheduler,
    create_scheduler,
)
from torchx_core.specs import (
    AppDef,
    AppState,
    BindMount,
    DeviceMount,
    InvalidRunConfigException,
    MissingDependencyError,
    Resource,
    Role,
    UnknownAppException,
    macros,
    resource,
)


def _app() -> AppDef:
    trainer = Role(
        name="trainer",
        image="img:1",
        entrypoint="python",
        args=["train.py", "--rank", macros.replica_id, "--app", macros.app_id],
        env={"MASTER": macros.rank0_env},
        num_replicas=2,
        resource=Resource(cpu=1.5, gpu=1, memMB=2048),
        max_retries=2,  # type: ignore[arg-type]
        mounts=[
            BindMount("/data", "/data", read_only=True),
            DeviceMount("/dev/infiniband", "/dev/infiniband", "rw"),
        ],
    )
    ps = Role(
        name="ps",
        image="img:1",
        entrypoint="ps.sh",
        num_replicas=3,
        resource=resource(cpu=1, memMB=512),
    )
    return AppDef("Train App", roles=[trainer, ps])


def _sched(batch: FakeBatch | None = None, logs: FakeLogs | None = None) -> AWSBatchScheduler:
    return AWSBatchScheduler(
        "t", client=batch or FakeBatch(), log_client=logs or FakeLogs(), poll_interval=0.01
    )


CFG = {"queue": "q", "user": "alice"}


def _golden_text(text: str, name: str) -> str:
    """The dry run as in the golden file: random name and package version replaced."""
    return text.replace(name, "NAME").replace(f'"{__version__}"', '"VERSION"')


def test_dryrun_golden_request() -> None:
    cfg = {
        **CFG,
        "privileged": True,
        "share_id": "team-a",
        "priority": 5,
        "ulimits": ["nofile=1024:4096", "memlock=-1"],
        "job_role_arn": "arn:job",
        "execution_role_arn": "arn:exec",
    }
    info = _sched().submit_dryrun(_app(), cfg)
    req = info.request
    assert req.name.startswith("Train-App-")
    # dryrun prints the native request: exactly the golden file (random job name replaced)
    check_golden("aws_batch_dryrun.json", _golden_text(str(info), req.name), __file__)
    assert json.loads(str(info)) == req.to_dict()
    # the trainer uses macros.replica_id: one node range per replica; ps: one range for all
    nodes = req.job_def["nodeProperties"]
    assert [r["targetNodes"] for r in nodes["nodeRangeProperties"]] == ["0", "1", "2:4"]
    assert nodes["numNodes"] == 5 and req.job_def["retryStrategy"] == {"attempts": 3}


def test_dryrun_without_share_or_priority_and_custom_log_group() -> None:
    req = _sched().submit_dryrun(_app(), {**CFG, "log_group": "/my/logs"}).request
    assert "shareIdentifier" not in req.submit and "schedulingPriorityOverride" not in req.submit
    container = req.job_def["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert container["logConfiguration"]["options"] == {"awslogs-group": "/my/logs"}
    assert "jobRoleArn" not in container and "ulimits" not in container


def test_dryrun_requires_queue_and_validates_ulimits() -> None:
    with pytest.raises(InvalidRunConfigException, match="queue"):
        _sched().submit_dryrun(_app(), {})
    with pytest.raises(SchedulerError, match=r"invalid ulimit 'nofile'.*name=soft:hard"):
        _sched().submit_dryrun(_app(), {**CFG, "ulimits": ["nofile"]})
    with pytest.raises(SchedulerError, match="invalid ulimit 'nofile=a:b'"):
        _sched().submit_dryrun(_app(), {**CFG, "ulimits": ["nofile=a:b"]})


def test_dryrun_touches_no_client() -> None:
    batch = FakeBatch()
    _sched(batch).submit_dryrun(_app(), CFG)
    assert batch.calls == []


def test_submit_describe_states_and_cancel() -> None:
    batch = FakeBatch()
    sched = _sched(batch)
    app_id = sched.submit(_app(), CFG)
    queue, _, name = app_id.partition(":")
    assert queue == "q" and name.startswith("Train-App-")
    (_, _register), (_, submit) = batch.calls
    assert submit["jobDefinition"].endswith(f"job-definition/{name}:1")
    job_id = batch.job_id(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING  # SUBMITTED, as in TorchX
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("trainer", 2), ("ps", 3)]
    assert [(r.name, r.num_replicas) for r in desc.roles] == [("trainer", 2), ("ps", 3)]
    expected = {
        "SUBMITTED": AppState.PENDING,
        "PENDING": AppState.PENDING,
        "RUNNABLE": AppState.PENDING,
        "STARTING": AppState.PENDING,
        "RUNNING": AppState.RUNNING,
        "SUCCEEDED": AppState.SUCCEEDED,
        "FAILED": AppState.FAILED,
    }
    assert set(JOB_STATES) == set(expected)
    for status, state in expected.items():
        batch.set_status(job_id, status)
        assert sched.describe(app_id).state == state, status  # type: ignore[union-attr]
    batch.set_status(job_id, "RUNNING")
    sched.cancel(app_id)
    assert batch.calls[-1] == ("terminate_job", {"jobId": job_id, "reason": CANCEL_REASON})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED and desc.msg == CANCEL_REASON
    n_calls = len(batch.calls)
    sched.cancel(app_id)  # terminal: no second terminate
    assert not any(c[0] == "terminate_job" for c in batch.calls[n_calls:])


def test_failed_job_reports_reason_and_restarts() -> None:
    batch = FakeBatch()
    sched = _sched(batch)
    app_id = sched.submit(_app(), CFG)
    batch.set_status(batch.job_id(app_id), "FAILED", "Essential container exited", attempts=3)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.msg == "Essential container exited" and desc.num_restarts == 2


def test_unknown_and_malformed_app_ids() -> None:
    sched = _sched()
    assert sched.describe("q:nope") is None
    assert sched.describe("no-queue-separator") is None
    sched.cancel("q:nope")  # no-op
    with pytest.raises(UnknownAppException):
        sched.log_iter("q:nope", "trainer")


def test_list_by_tag_across_pages_and_queues() -> None:
    batch = FakeBatch(queues=["q", "q2"])
    sched = _sched(batch)
    ids = [sched.submit(_app(), CFG) for _ in range(3)]
    other = sched.submit(_app(), {**CFG, "queue": "q2"})
    batch.set_status(batch.job_id(ids[0]), "SUCCEEDED")
    # a job not submitted by torchx (no version tag) is not listed
    arn = batch.register_job_definition(jobDefinitionName="x", type="multinode", nodeProperties={})[
        "jobDefinitionArn"
    ]
    batch.submit_job(jobName="foreign", jobQueue="q", jobDefinition=arn)
    listed = {a.app_id: a.state for a in sched.list({"queue": "q"})}
    assert listed == {
        ids[0]: AppState.SUCCEEDED,
        ids[1]: AppState.PENDING,
        ids[2]: AppState.PENDING,
    }
    assert {a.app_id for a in sched.list()} == {*ids, other}


def test_logs_per_node_pagination_regex_time_and_tail() -> None:
    batch, logs = FakeBatch(), FakeLogs()
    sched = _sched(batch, logs)
    app_id = sched.submit(_app(), CFG)
    job_id = batch.job_id(app_id)
    batch.set_status(job_id, "SUCCEEDED", log_stream="jd/default/stream")
    logs.put("/aws/batch/job", "jd/default/stream", "a", "b", "c", "d", "e")
    assert list(sched.log_iter(app_id, "ps", 2)) == ["a\n", "b\n", "c\n", "d\n", "e\n"]
    assert list(sched.log_iter(app_id, "ps", 2, regex="[bd]")) == ["b\n", "d\n"]
    since = datetime.fromtimestamp(2.0, tz=timezone.utc)
    until = datetime.fromtimestamp(3.0, tz=timezone.utc)
    assert list(sched.log_iter(app_id, "ps", 0, since=since, until=until)) == ["b\n", "c\n"]
    assert logs.calls[-1]["startTime"] == 2000 and logs.calls[-1]["endTime"] == 3000
    assert list(sched.log_iter(app_id, "trainer", 1, should_tail=True)) == [
        "a\n",
        "b\n",
        "c\n",
        "d\n",
        "e\n",
    ]
    with pytest.raises(InvalidLogQueryError, match="no replica 3 of role 'ps'"):
        sched.log_iter(app_id, "ps", 3)
    with pytest.raises(InvalidLogQueryError, match="COMBINED"):
        sched.log_iter(app_id, "ps", 0, streams=Stream.STDERR)


def test_tail_polls_until_the_job_ends() -> None:
    logs = FakeLogs()

    class FinishingBatch(FakeBatch):
        """Runs for a few polls (no log stream yet), then succeeds with logs."""

        polls = 0

        def describe_jobs(self, jobs: list[str]) -> dict[str, object]:
            self.polls += 1
            if self.polls == 4:
                (job_id,) = self.jobs
                self.set_status(job_id, "SUCCEEDED", log_stream="s")
                logs.put("/aws/batch/job", "s", "done")
            return super().describe_jobs(jobs)

    batch = FinishingBatch()
    sched = _sched(batch, logs)
    app_id = sched.submit(_app(), CFG)
    batch.set_status(batch.job_id(app_id), "RUNNING")
    assert list(sched.log_iter(app_id, "trainer", 0, should_tail=True)) == ["done\n"]
    assert batch.polls >= 4


def test_node_index_maps_roles_to_ranges() -> None:
    batch = FakeBatch()
    sched = _sched(batch)
    app_id = sched.submit(_app(), CFG)
    job = batch.jobs[batch.job_id(app_id)]
    assert [sched._node_index(job, "trainer", k) for k in (0, 1)] == [0, 1]
    assert [sched._node_index(job, "ps", k) for k in (0, 1, 2)] == [2, 3, 4]


def test_schedule_errors_are_typed() -> None:
    sched = _sched()
    with pytest.raises(SchedulerError, match=r"rejected job .* in queue nope"):
        sched.submit(_app(), {**CFG, "queue": "nope"})


def test_run_opts_factory_and_missing_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = _sched().run_opts()
    for key in (
        "queue",
        "user",
        "privileged",
        "share_id",
        "priority",
        "job_role_arn",
        "execution_role_arn",
        "ulimits",
        "log_group",
        "image_repo",
    ):
        assert opts.get(key) is not None, key
    assert isinstance(create_scheduler("s", client=FakeBatch()), AWSBatchScheduler)
    monkeypatch.setitem(sys.modules, "boto3", None)
    # not installed at all (an installed package that fails to import gets another message)
    monkeypatch.setattr("torchx_core.specs._dependencies.installed_version", lambda _dist: None)
    sched = AWSBatchScheduler("t")
    sched.submit_dryrun(_app(), CFG)  # dryrun needs no boto3
    with pytest.raises(MissingDependencyError, match=r"checkout>\[aws\]"):
        sched.describe("q:x")


def _array_app(replicas: int = 3, **kwargs: object) -> AppDef:
    return AppDef(
        "arr",
        roles=[
            Role(
                name="w",
                image="img:1",
                entrypoint="run.sh",
                args=["--app", macros.app_id],
                num_replicas=replicas,
                resource=resource(cpu=1, memMB=256),
                **kwargs,
            )
        ],
    )  # type: ignore[arg-type]


def test_array_dryrun_golden_request() -> None:
    info = _sched().submit_dryrun(_array_app(), {**CFG, "array": True})
    req = info.request
    check_golden("aws_batch_array_dryrun.json", _golden_text(str(info), req.name), __file__)
    assert req.job_def["type"] == "container" and req.submit["arrayProperties"] == {"size": 3}
    single = _sched().submit_dryrun(_array_app(1), {**CFG, "array": True}).request
    assert "arrayProperties" not in single.submit  # AWS arrays have at least 2 children


def test_array_rejects_multi_role_and_replica_id() -> None:
    with pytest.raises(AppValidationError) as e:
        _sched().submit_dryrun(_app(), {**CFG, "array": True})
    assert "single-role app, got 2 roles (trainer, ps)" in str(e.value)
    assert "uses macros.replica_id" in str(e.value) and "AWS_BATCH_JOB_ARRAY_INDEX" in str(e.value)


def test_array_children_states_logs_list_and_cancel() -> None:
    batch, logs = FakeBatch(), FakeLogs()
    sched = _sched(batch, logs)
    app_id = sched.submit(_array_app(), {**CFG, "array": True})
    parent = batch.job_id(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("w", 3)]
    batch.set_status(f"{parent}:0", "SUCCEEDED", log_stream="s0")
    batch.set_status(f"{parent}:1", "RUNNING")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        AppState.SUCCEEDED,
        AppState.RUNNING,
        AppState.PENDING,
    ]
    logs.put("/aws/batch/job", "s0", "child zero")
    assert list(sched.log_iter(app_id, "w", 0)) == ["child zero\n"]
    assert list(sched.log_iter(app_id, "w", 2)) == []  # child 2 has no stream yet
    assert [a.app_id for a in sched.list({"queue": "q"})] == [app_id]  # children not listed
    sched.cancel(app_id)
    terminated = [c[1]["jobId"] for c in batch.calls if c[0] == "terminate_job"]
    assert terminated == [parent, f"{parent}:1", f"{parent}:2"]  # not the finished child 0
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED


def test_array_one_failed_child_fails_the_app() -> None:
    batch = FakeBatch()
    sched = _sched(batch)
    app_id = sched.submit(_array_app(2), {**CFG, "array": True})
    parent = batch.job_id(app_id)
    batch.set_status(f"{parent}:0", "SUCCEEDED")
    batch.set_status(f"{parent}:1", "FAILED", "Essential container in task exited")
    assert sched.describe(app_id).state == AppState.FAILED  # type: ignore[union-attr]
    batch.set_status(f"{parent}:1", "SUCCEEDED")
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_unknown_queue_means_unknown_app() -> None:
    class NoQueues(FakeBatch):
        def list_jobs(self, **kwargs: object) -> dict[str, object]:
            if kwargs.get("jobQueue") not in self.queues:
                raise RuntimeError(f"Job queue {kwargs.get('jobQueue')} does not exist")
            raise RuntimeError("ThrottlingException: Rate exceeded")

    sched = _sched(NoQueues())
    assert sched.describe("gone:app-1") is None
    with pytest.raises(SchedulerError, match=r"could not list jobs of queue q: .*Rate exceeded"):
        sched.describe("q:app-1")


def test_unconfigured_aws_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    sched = AWSBatchScheduler("t")
    for call in (lambda: sched.describe("q:x"), sched.list, lambda: sched.submit(_app(), CFG)):
        with pytest.raises(SchedulerError) as e:
            call()
        assert "aws_batch: cannot create the AWS batch client" in str(e.value)
        assert "AWS_DEFAULT_REGION" in str(e.value)


def test_delete_cancels_and_deregisters_the_job_definition() -> None:
    batch = FakeBatch()
    sched = _sched(batch)
    app_id = sched.submit(_app(), CFG)
    job_id = batch.job_id(app_id)
    batch.set_status(job_id, "RUNNING")
    sched.delete(app_id)
    arn = batch.jobs[job_id]["jobDefinition"]
    assert ("terminate_job", {"jobId": job_id, "reason": CANCEL_REASON}) in batch.calls
    assert batch.calls[-1] == ("deregister_job_definition", {"jobDefinition": arn})
    assert batch.job_defs[arn]["status"] == "INACTIVE"
    sched.delete("q:nope")  # unknown: a no-op


def test_named_devices_are_mounted_from_the_host_as_torchx() -> None:
    app = _app()
    app.roles[1].resource.devices = {"aws.amazon.com/neurondevice": 2}
    req = _sched().submit_dryrun(app, CFG).request
    ps = req.job_def["nodeProperties"]["nodeRangeProperties"][-1]["container"]
    assert ps["linuxParameters"]["devices"] == [
        {
            "hostPath": f"/dev/neuron{i}",
            "containerPath": f"/dev/neuron{i}",
            "permissions": ["READ", "WRITE", "MKNOD"],
        }
        for i in range(2)
    ]
