"""``aws_batch`` and ``aws_sagemaker`` against a real moto server (scripts/services/moto).

Batch jobs run as real containers on the local dockerd (busybox, host networking, never pulled);
their stdout reaches moto's CloudWatch Logs. Moto's Batch writes one log stream per job (all nodes
together) and does not set ``AWS_BATCH_JOB_NODE_INDEX``. SageMaker training jobs are
``Completed`` at once on moto and ``stop_training_job`` is not implemented there, so SageMaker
cancel is covered by the unit tests' fake.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.service_helpers import wait_for_app

from torchx_core.schedulers.aws.batch import AWSBatchScheduler
from torchx_core.schedulers.aws.sagemaker import AWSSageMakerScheduler
from torchx_core.specs import AppDef, AppState, Role, is_terminal, macros, resource

pytestmark = [pytest.mark.integration, pytest.mark.aws]

BUSYBOX = "busybox:latest"


def sh(name: str, script: str, replicas: int = 1) -> Role:
    return Role(
        name=name,
        image=BUSYBOX,
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=resource(cpu=1, memMB=64),
    )


@pytest.fixture
def batch(aws_clients: dict[str, Any], batch_queue: str) -> Iterator[AWSBatchScheduler]:
    sched = AWSBatchScheduler(
        "it", client=aws_clients["batch"], log_client=aws_clients["logs"], poll_interval=0.2
    )
    yield sched
    # leave nothing running: cancel whatever this test left behind
    for app in sched.list({"queue": batch_queue}):
        if not is_terminal(app.state):
            sched.cancel(app.app_id)


def test_batch_multi_role_success_logs_and_list(batch: AWSBatchScheduler, batch_queue: str) -> None:
    app = AppDef(
        "hello",
        roles=[
            sh("worker", f"echo worker {macros.replica_id}", replicas=2),
            sh("ps", "echo ps up"),
        ],
    )
    app_id = batch.submit(app, {"queue": batch_queue})
    assert app_id.startswith(f"{batch_queue}:hello-")
    desc = wait_for_app(batch, app_id)
    assert desc.state == AppState.SUCCEEDED
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("worker", 2), ("ps", 1)]
    # moto: one stream for the whole job, so every replica reads all lines
    lines = list(batch.log_iter(app_id, "worker", 1))
    assert sorted(lines) == ["ps up\n", "worker 0\n", "worker 1\n"]
    assert list(batch.log_iter(app_id, "ps", 0, regex="^ps")) == ["ps up\n"]
    listed = {a.app_id: a.state for a in batch.list({"queue": batch_queue})}
    assert listed[app_id] == AppState.SUCCEEDED


def test_batch_failure(
    batch: AWSBatchScheduler, batch_queue: str, aws_clients: dict[str, Any]
) -> None:
    app_id = batch.submit(
        AppDef("fail", roles=[sh("w", "echo failing; exit 3")]), {"queue": batch_queue}
    )
    desc = wait_for_app(batch, app_id)
    assert desc.state == AppState.FAILED
    assert list(batch.log_iter(app_id, "w", 0)) == ["failing\n"]
    # delete deregisters the job definition registered for the app
    name = app_id.partition(":")[2]
    client = aws_clients["batch"]
    assert [
        d["status"]
        for d in client.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    ] == ["ACTIVE"]
    batch.delete(app_id)
    assert [
        d["status"]
        for d in client.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    ] in ([], ["INACTIVE"])


def test_batch_cancel_reports_cancelled(batch: AWSBatchScheduler, batch_queue: str) -> None:
    app_id = batch.submit(
        AppDef("sleeper", roles=[sh("w", "echo started; sleep 600")]), {"queue": batch_queue}
    )
    wait_for_app(batch, app_id, until=lambda s: s == AppState.RUNNING)
    batch.cancel(app_id)
    desc = wait_for_app(batch, app_id)
    assert desc.state == AppState.CANCELLED
    batch.cancel(app_id)  # idempotent on a finished job


def test_batch_tail_follows_until_the_job_ends(batch: AWSBatchScheduler, batch_queue: str) -> None:
    app_id = batch.submit(
        AppDef("ticker", roles=[sh("w", "for i in 1 2; do echo tick $i; sleep 0.5; done")]),
        {"queue": batch_queue},
    )
    assert list(batch.log_iter(app_id, "w", 0, should_tail=True)) == ["tick 1\n", "tick 2\n"]
    assert wait_for_app(batch, app_id).state == AppState.SUCCEEDED


def test_batch_unknown_app(batch: AWSBatchScheduler, batch_queue: str) -> None:
    assert batch.describe(f"{batch_queue}:does-not-exist") is None


def test_sagemaker_create_describe_list(aws_clients: dict[str, Any]) -> None:
    sched = AWSSageMakerScheduler(
        "it", client=aws_clients["sagemaker"], log_client=aws_clients["logs"]
    )
    role = Role(
        name="trainer",
        image="1.dkr.ecr.us-east-1.amazonaws.com/train:1",
        entrypoint="python",
        args=["train.py"],
        num_replicas=2,
        resource=resource(h="aws_m5.xlarge"),
    )
    app_id = sched.submit(
        AppDef("train", roles=[role]),
        {
            "role": "arn:aws:iam::123456789012:role/sm",
            "output_path": "s3://bucket/out",
            "hyperparameters": {"lr": "0.1"},
        },
    )
    raw = aws_clients["sagemaker"].describe_training_job(TrainingJobName=app_id)
    assert raw["ResourceConfig"]["InstanceType"] == "ml.m5.xlarge"
    assert raw["ResourceConfig"]["InstanceCount"] == 2
    assert raw["HyperParameters"] == {"lr": "0.1"}
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED  # moto completes at once
    assert len(desc.roles_statuses[0].replicas) == 2
    assert desc.roles[0].args == ["train.py"]
    assert app_id in {a.app_id for a in sched.list()}
    assert sched.describe("train-missing") is None
    assert list(sched.log_iter(app_id, "trainer", 0)) == []  # moto writes no training logs


def test_batch_array_job_children_logs_and_failure(
    batch: AWSBatchScheduler, batch_queue: str
) -> None:
    cfg = {"queue": batch_queue, "array": True}
    # moto sets no AWS_BATCH_JOB_ARRAY_INDEX; a child's AWS_BATCH_JOB_ID is "{parent}:{index}"
    index = "${AWS_BATCH_JOB_ID##*:}"
    ok = batch.submit(AppDef("arr", roles=[sh("w", f"echo child {index}", replicas=3)]), cfg)
    bad = batch.submit(
        AppDef("arrbad", roles=[sh("w", f'[ "{index}" = 1 ] && exit 4; echo fine', replicas=2)]),
        cfg,
    )
    desc = wait_for_app(batch, ok)
    assert desc.state == AppState.SUCCEEDED
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.SUCCEEDED] * 3
    # one log stream per child
    assert [list(batch.log_iter(ok, "w", k)) for k in range(3)] == [
        ["child 0\n"],
        ["child 1\n"],
        ["child 2\n"],
    ]
    desc = wait_for_app(batch, bad)
    assert desc.state == AppState.FAILED
    desc = wait_for_app(
        batch,
        bad,
        until=lambda s: all(
            is_terminal(r.state) for r in batch.describe(bad).roles_statuses[0].replicas
        ),
    )
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        AppState.SUCCEEDED,
        AppState.FAILED,
    ]
    listed = {a.app_id: a.state for a in batch.list({"queue": batch_queue})}
    assert listed[ok] == AppState.SUCCEEDED and listed[bad] == AppState.FAILED


def test_batch_array_job_cancel(batch: AWSBatchScheduler, batch_queue: str) -> None:
    app_id = batch.submit(
        AppDef("arrsleep", roles=[sh("w", "sleep 600", replicas=2)]),
        {"queue": batch_queue, "array": True},
    )
    wait_for_app(batch, app_id, until=lambda s: s == AppState.RUNNING)
    batch.cancel(app_id)
    assert wait_for_app(batch, app_id).state == AppState.CANCELLED


def test_batch_describe_many_one_describe_jobs_call(
    batch: AWSBatchScheduler, batch_queue: str, aws_clients: dict[str, Any]
) -> None:
    ok = batch.submit(AppDef("many-ok", roles=[sh("w", "echo ok")]), {"queue": batch_queue})
    bad = batch.submit(AppDef("many-bad", roles=[sh("w", "exit 2")]), {"queue": batch_queue})
    for app_id in (ok, bad):
        wait_for_app(batch, app_id)
    client = aws_clients["batch"]
    calls: list[str] = []
    real_describe, real_list = client.describe_jobs, client.list_jobs

    def describe_jobs(**kwargs: Any) -> Any:
        calls.append(f"describe_jobs:{len(kwargs['jobs'])}")
        return real_describe(**kwargs)

    def list_jobs(**kwargs: Any) -> Any:
        calls.append("list_jobs")
        return real_list(**kwargs)

    client.describe_jobs, client.list_jobs = describe_jobs, list_jobs
    try:
        many = batch.describe_many([ok, bad, f"{batch_queue}:no-such-app"])
    finally:
        client.describe_jobs, client.list_jobs = real_describe, real_list
    # job ids were learnt while waiting: one DescribeJobs for both apps, one ListJobs for the
    # unknown name
    assert sorted(calls) == ["describe_jobs:2", "list_jobs"]
    assert many[f"{batch_queue}:no-such-app"] is None
    assert many[ok].state == AppState.SUCCEEDED and many[bad].state == AppState.FAILED
    assert many[ok] == batch.describe(ok) and many[bad] == batch.describe(bad)
