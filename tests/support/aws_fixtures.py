"""Test helpers for ``aws_batch`` and ``aws_sagemaker``: stateful fakes of the boto3 clients and the
moto-server fixtures.

* ``FakeBatch`` keeps a job-definition and job table and answers ``register_job_definition``,
  ``submit_job``, ``list_jobs`` (queue/status/JOB_NAME filter, paginated by 2),
  ``describe_jobs``, ``terminate_job`` and ``describe_job_queues``.
* ``FakeLogs`` holds CloudWatch streams and pages ``get_log_events`` by 2 events, like the real
  API (the last page repeats its ``nextForwardToken``).
* ``FakeSageMaker`` keeps training jobs (create/describe/list/stop), since moto's server lacks
  ``stop_training_job``.

``moto_server`` (session) starts the moto server with ``scripts/services/moto/start.sh`` on the
real dockerd (Batch jobs run as real containers) and stops it at session end if it started it.
``aws_clients`` gives boto3 clients on it; ``batch_queue`` creates a compute environment and a job
queue once per session.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from support.service_helpers import run_service_script, start_service

MOTO_URL = f"http://127.0.0.1:{os.environ.get('MOTO_PORT', '5055')}"
REGION = "us-east-1"
QUEUE = "torchx-ci-queue"


# -- real moto server ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_server(docker_engine: Any) -> Iterator[str]:
    """The moto server's URL (started by our script; Batch runs on the real dockerd)."""
    started = start_service("moto", "moto.pid")
    import requests

    requests.post(f"{MOTO_URL}/moto-api/reset", timeout=10).raise_for_status()
    yield MOTO_URL
    if started:
        run_service_script("moto", "stop.sh")


@pytest.fixture(scope="session")
def aws_clients(moto_server: str) -> dict[str, Any]:
    """boto3 clients (batch, logs, sagemaker, iam, ec2) pointed at the moto server."""
    import boto3

    kw = {
        "endpoint_url": moto_server,
        "region_name": REGION,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return {name: boto3.client(name, **kw) for name in ("batch", "logs", "sagemaker", "iam", "ec2")}


@pytest.fixture(scope="session")
def batch_queue(aws_clients: dict[str, Any]) -> str:
    """A job queue on a managed EC2 compute environment (moto runs its jobs on dockerd)."""
    clients = aws_clients
    create_batch_queue(
        clients["iam"], clients["ec2"], clients["batch"], QUEUE,
        role="torchx-batch", profile="torchx-ecs", env="torchx-ci-ce", max_vcpus=16,
    )  # fmt: skip
    return QUEUE


def create_batch_queue(
    iam: Any, ec2: Any, batch: Any, queue: str, *, role: str, profile: str, env: str, max_vcpus: int
) -> None:
    """Creates job queue ``queue`` on a new managed EC2 compute environment ``env`` (service role
    ``role``, instance profile ``profile``) in the first subnet and security group."""
    role_arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    profile_arn = iam.create_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Arn"]
    subnets = [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]][:1]
    groups = [g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]][:1]
    env_arn = batch.create_compute_environment(
        computeEnvironmentName=env,
        type="MANAGED",
        state="ENABLED",
        serviceRole=role_arn,
        computeResources={
            "type": "EC2",
            "minvCpus": 0,
            "maxvCpus": max_vcpus,
            "desiredvCpus": 0,
            "instanceTypes": ["optimal"],
            "subnets": subnets,
            "securityGroupIds": groups,
            "instanceRole": profile_arn,
        },
    )["computeEnvironmentArn"]
    batch.create_job_queue(
        jobQueueName=queue,
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env_arn}],
    )


# -- fakes --------------------------------------------------------------------------------------


class FakeClientError(Exception):
    """Looks like botocore's ClientError (``response["Error"]["Code"]``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"An error occurred ({code}): {message}")
        self.response = {"Error": {"Code": code, "Message": message}}


@dataclass
class FakeBatch:
    """A stateful stand-in for the boto3 ``batch`` client."""

    queues: list[str] = field(default_factory=lambda: ["q"])
    job_defs: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def register_job_definition(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("register_job_definition", kwargs))
        arn = f"arn:aws:batch:{REGION}:1:job-definition/{kwargs['jobDefinitionName']}:1"
        self.job_defs[arn] = kwargs
        return {"jobDefinitionArn": arn, "jobDefinitionName": kwargs["jobDefinitionName"]}

    def submit_job(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("submit_job", kwargs))
        if kwargs["jobQueue"] not in self.queues:
            raise FakeClientError(
                "ClientException", f"Job queue {kwargs['jobQueue']} does not exist"
            )
        job_def = self.job_defs[kwargs["jobDefinition"]]
        job_id = f"id-{next(self._ids)}"
        job: dict[str, Any] = {
            "jobId": job_id,
            "jobName": kwargs["jobName"],
            "jobQueue": kwargs["jobQueue"],
            "status": "SUBMITTED",
            "createdAt": len(self.jobs),
            "tags": kwargs.get("tags", {}),
            "attempts": [],
            "jobDefinition": kwargs["jobDefinition"],
        }
        if job_def["type"] == "container":
            job["container"] = dict(job_def["containerProperties"])
        else:
            job["nodeProperties"] = job_def["nodeProperties"]
        self.jobs[job_id] = job
        size = kwargs.get("arrayProperties", {}).get("size")
        if size:
            job["arrayProperties"] = {"size": size, "statusSummary": {}}
            for i in range(size):
                child = {
                    **job,
                    "jobId": f"{job_id}:{i}",
                    "arrayProperties": {"index": i},
                    "container": dict(job["container"]),
                    "tags": {},
                }
                self.jobs[child["jobId"]] = child
        return {"jobId": job_id, "jobName": kwargs["jobName"]}

    def list_jobs(
        self,
        jobQueue: str | None = None,
        jobStatus: str | None = None,
        filters: list[dict[str, Any]] | None = None,
        arrayJobId: str | None = None,
        nextToken: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append(
            ("list_jobs", {"jobQueue": jobQueue, "jobStatus": jobStatus, "arrayJobId": arrayJobId})
        )
        if arrayJobId:  # the children of an array job
            jobs = [j for j in self.jobs.values() if j["jobId"].startswith(f"{arrayJobId}:")]
        else:  # like AWS, queue listings show array parents, not their children
            jobs = [
                j for j in self.jobs.values() if j["jobQueue"] == jobQueue and ":" not in j["jobId"]
            ]
        if filters:  # like AWS: filters win over jobStatus and match every status
            names = {v for f in filters if f["name"] == "JOB_NAME" for v in f["values"]}
            jobs = [j for j in jobs if j["jobName"] in names]
        else:
            jobs = [j for j in jobs if j["status"] == (jobStatus or "RUNNING")]
        start = int(nextToken or 0)
        page = jobs[start : start + 2]
        out: dict[str, Any] = {
            "jobSummaryList": [
                {
                    "jobId": j["jobId"],
                    "jobName": j["jobName"],
                    "status": j["status"],
                    "createdAt": j["createdAt"],
                }
                for j in page
            ]
        }
        if start + 2 < len(jobs):
            out["nextToken"] = str(start + 2)
        return out

    def describe_jobs(self, jobs: list[str]) -> dict[str, Any]:
        if len(jobs) > 100:
            raise FakeClientError("ClientException", "at most 100 jobs")
        return {"jobs": [dict(self.jobs[j]) for j in jobs if j in self.jobs]}

    def terminate_job(self, jobId: str, reason: str) -> dict[str, Any]:
        self.calls.append(("terminate_job", {"jobId": jobId, "reason": reason}))
        self.set_status(jobId, "FAILED", reason)
        return {}

    def deregister_job_definition(self, jobDefinition: str) -> dict[str, Any]:
        self.calls.append(("deregister_job_definition", {"jobDefinition": jobDefinition}))
        self.job_defs[jobDefinition]["status"] = "INACTIVE"
        return {}

    def describe_job_queues(self) -> dict[str, Any]:
        return {"jobQueues": [{"jobQueueName": q} for q in self.queues]}

    # -- test controls ----------------------------------------------------------------------

    def job_id(self, app_id: str) -> str:
        name = app_id.partition(":")[2]
        return next(j["jobId"] for j in self.jobs.values() if j["jobName"] == name)

    def set_status(
        self,
        job_id: str,
        status: str,
        reason: str = "",
        log_stream: str | None = None,
        attempts: int = 1,
    ) -> None:
        job = self.jobs[job_id]
        job["status"] = status
        if reason:
            job["statusReason"] = reason
        if log_stream:
            job["container"] = {"logStreamName": log_stream}
        job["attempts"] = [{"container": {}} for _ in range(attempts)]


@dataclass
class FakeLogs:
    """A stateful stand-in for the boto3 ``logs`` client."""

    streams: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def put(self, group: str, stream: str, *messages: str, start_ms: int = 1000) -> None:
        events = self.streams.setdefault((group, stream), [])
        for m in messages:
            events.append({"timestamp": start_ms + len(events) * 1000, "message": m})

    def get_log_events(
        self,
        logGroupName: str,
        logStreamName: str,
        startFromHead: bool = True,
        nextToken: str | None = None,
        startTime: int | None = None,
        endTime: int | None = None,
    ) -> dict[str, Any]:
        self.calls.append(
            {
                "stream": logStreamName,
                "nextToken": nextToken,
                "startTime": startTime,
                "endTime": endTime,
            }
        )
        if (logGroupName, logStreamName) not in self.streams:
            raise FakeClientError(
                "ResourceNotFoundException", "The specified log stream does not exist."
            )
        events = [
            e
            for e in self.streams[(logGroupName, logStreamName)]
            if (startTime is None or e["timestamp"] >= startTime)
            and (endTime is None or e["timestamp"] <= endTime)
        ]
        start = int(nextToken.split("/")[1]) if nextToken else 0
        page = events[start : start + 2]
        return {"events": page, "nextForwardToken": f"f/{start + len(page)}"}

    def describe_log_streams(self, logGroupName: str, logStreamNamePrefix: str) -> dict[str, Any]:
        return {
            "logStreams": [
                {"logStreamName": s}
                for g, s in self.streams
                if g == logGroupName and s.startswith(logStreamNamePrefix)
            ]
        }


@dataclass
class FakeSageMaker:
    """A stateful stand-in for the boto3 ``sagemaker`` client (with stop_training_job)."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)

    def create_training_job(self, **kwargs: Any) -> dict[str, Any]:
        name = kwargs["TrainingJobName"]
        self.jobs[name] = {**kwargs, "TrainingJobStatus": "InProgress"}
        return {"TrainingJobArn": f"arn:aws:sagemaker:{REGION}:1:training-job/{name}"}

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        if TrainingJobName not in self.jobs:
            raise FakeClientError("ValidationException", "Requested resource not found.")
        return dict(self.jobs[TrainingJobName])

    def list_training_jobs(
        self, MaxResults: int = 100, NextToken: str | None = None
    ) -> dict[str, Any]:
        names = list(self.jobs)
        start = int(NextToken or 0)
        out: dict[str, Any] = {
            "TrainingJobSummaries": [
                {"TrainingJobName": n, "TrainingJobStatus": self.jobs[n]["TrainingJobStatus"]}
                for n in names[start : start + 1]
            ]
        }
        if start + 1 < len(names):
            out["NextToken"] = str(start + 1)
        return out

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.stopped.append(TrainingJobName)
        self.jobs[TrainingJobName]["TrainingJobStatus"] = "Stopping"
        return {}
