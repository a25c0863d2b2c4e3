"""A kfp.local launcher step on ``aws_batch`` (the moto server on loopback) with an int run option.

Issue 13, fault 3: run options used to travel as a KFP ``dict`` parameter, where numbers become
doubles, so ``cfg={"priority": 5}`` reached the scheduler as ``5.0`` and the step failed with
"must be of type: int". Moto runs the Batch job as a real busybox container on the local dockerd.
"""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl

from torchx_core import specs
from torchx_kfp import launch

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.aws]

REPO = Path(__file__).resolve().parents[2]
MOTO_URL = f"http://127.0.0.1:{os.environ.get('MOTO_PORT', '5055')}"
REGION = "us-east-1"


@pytest.fixture
def moto_batch_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """A fresh Batch job queue on the moto server (started by our script if it is not up), and
    the AWS environment the launcher step (a kfp.local subprocess) reads."""
    import boto3

    subprocess.run(["bash", str(REPO / "scripts/services/moto/start.sh")], check=True,
                   capture_output=True, timeout=600)
    for key, value in {"AWS_ENDPOINT_URL": MOTO_URL, "AWS_DEFAULT_REGION": REGION,
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    clients = {n: boto3.client(n) for n in ("batch", "iam", "ec2")}
    unique = f"kfp-{uuid.uuid4().hex[:8]}"
    iam, ec2, batch = clients["iam"], clients["ec2"], clients["batch"]
    role = iam.create_role(RoleName=unique, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName=unique)["InstanceProfile"]["Arn"]
    subnets = [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]][:1]
    groups = [g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]][:1]
    env = batch.create_compute_environment(
        computeEnvironmentName=unique, type="MANAGED", state="ENABLED", serviceRole=role,
        computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 4, "desiredvCpus": 0,
                          "instanceTypes": ["optimal"], "subnets": subnets,
                          "securityGroupIds": groups, "instanceRole": profile},
    )["computeEnvironmentArn"]
    batch.create_job_queue(jobQueueName=unique, state="ENABLED", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env}])
    yield unique, batch
    for job in batch.list_jobs(jobQueue=unique, jobStatus="RUNNING")["jobSummaryList"]:
        batch.terminate_job(jobId=job["jobId"], reason="test cleanup")


def test_int_run_option_reaches_aws_batch_as_an_int(
    kfp_local: Path, moto_batch_queue: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    queue, batch = moto_batch_queue
    app = specs.AppDef(
        name="kfpbatch",
        roles=[specs.Role("worker", image="busybox:latest", entrypoint="sh",
                          args=["-c", "echo batch says hi"],
                          resource=specs.Resource(cpu=1, gpu=0, memMB=64))],
    )

    @dsl.pipeline(name="kfp-aws-batch")
    def pipeline() -> str:
        step = launch(app, scheduler="aws_batch", cfg={"queue": queue, "priority": 5},
                      wait_interval=0.5)
        return step.outputs["state"]

    assert pipeline().output == "SUCCEEDED"
    (job,) = [j for j in batch.list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
              if j["jobName"].startswith("kfpbatch-")]
    (described,) = batch.describe_jobs(jobs=[job["jobId"]])["jobs"]
    assert described["status"] == "SUCCEEDED"
    out = capfd.readouterr().out
    assert "batch says hi" in out  # the job's CloudWatch log streamed into the step log
