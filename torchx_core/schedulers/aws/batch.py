"""``aws_batch``: runs an app as one AWS Batch multi-node parallel job (boto3 only).

Each app registers a ``multinode`` job definition named after the app id and submits it to the
job queue given by the ``queue`` run option. Nodes are laid out role after role: a role whose
args/env/metadata do not use ``macros.replica_id`` gets one node range (``"start:end"``) for all its
replicas; a role that does gets one node range per replica, so every replica sees its own id.
Node 0 (replica 0 of the first role) is the main node; the rank-0 address is in
``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS`` (``macros.rank0_env``).

* ``array=True`` (single-role apps whose replicas do not talk to each other): one ``container``
  job definition submitted as an array job with one child per replica; a child finds its index in
  ``AWS_BATCH_JOB_ARRAY_INDEX`` (or after the ``:`` of ``AWS_BATCH_JOB_ID``). Replica states
  and logs are the children's; the app fails when a child fails.
* App id: ``{queue}:{job_name}``; describe looks the job up by name in its queue.
* Resources: ``cpu`` (rounded up, >= 1) -> ``VCPU``, ``memMB`` -> ``MEMORY``, ``gpu`` -> ``GPU``.
* Options: priority and share id (fair-share queues), job and execution role ARNs, privileged,
  ulimits (``name=soft:hard`` or ``name=limit``), tags; the retry strategy allows
  ``max(role.max_retries) + 1`` attempts (capped at AWS's 10).
* Logs come from CloudWatch (``log_group``, default ``/aws/batch/job``), per node where AWS has a
  per-node stream and from the job's stream otherwise.
* ``cancel`` calls ``terminate_job`` with a reason starting with ``CANCEL_REASON``; such jobs end
  ``FAILED`` in Batch and are reported ``CANCELLED``.
* ``list`` returns the jobs of the queue (or every queue) that carry the torchx version tag.
* ``delete`` cancels the job if it runs and deregisters the job definition registered for it.

Workspaces are built as Docker images (:class:`DockerWorkspaceMixin`) and pushed to ``image_repo``.
"""

from __future__ import annotations

import builtins
import getpass
import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from torchx_core import __version__
from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import (
    AppValidationError,
    DescribeAppResponse,
    InvalidAppIdError,
    InvalidLogQueryError,
    ListAppResponse,
    Scheduler,
    SchedulerError,
    Stream,
    StructuredOpts,
    filter_regex,
    require_combined_streams,
)
from torchx_core.schedulers.aws._logs import iter_log_events, make_client
from torchx_core.schedulers.devices import get_device_mounts
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    Role,
    RoleStatus,
    UnknownAppException,
    VolumeMount,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin

__all__ = [
    "CANCEL_REASON",
    "JOB_STATE",
    "JOB_STATES",
    "TAG_APP_NAME",
    "TAG_USER",
    "TAG_VERSION",
    "AWSBatchOpts",
    "AWSBatchScheduler",
    "BatchJob",
    "create_scheduler",
]

logger: logging.Logger = logging.getLogger(__name__)

TAG_VERSION = "torchx.pytorch.org/version"
TAG_APP_NAME = "torchx.pytorch.org/app-name"
TAG_USER = "torchx.pytorch.org/user"
TAG_ROLE_NAME = "torchx.pytorch.org/role-name"
TAG_VERSION_VALUE = __version__  # the package version, as on every backend (and in TorchX)
RANK0_ENV = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
ENV_ROLE_NAME = "TORCHX_ROLE_NAME"
ENV_NUM_REPLICAS = "TORCHX_NUM_REPLICAS"
CANCEL_REASON = "torchx: cancelled by user"
MAX_ATTEMPTS = 10
DEFAULT_LOG_GROUP = "/aws/batch/job"

# AWS Batch job status -> AppState (FAILED with a CANCEL_REASON status reason -> CANCELLED);
# as in TorchX, every status before RUNNING is PENDING.
JOB_STATES: dict[str, AppState] = {
    "SUBMITTED": AppState.PENDING,
    "PENDING": AppState.PENDING,
    "RUNNABLE": AppState.PENDING,
    "STARTING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
}
JOB_STATE = JOB_STATES  # TorchX's name


@dataclass
class AWSBatchOpts(StructuredOpts):
    """Run options of the ``aws_batch`` scheduler."""

    queue: str = field(metadata={"help": "AWS Batch job queue to submit to"})
    user: str | None = field(
        default=None, metadata={"help": "user tagged on the job (default: the local user)"}
    )
    privileged: bool = field(default=False, metadata={"help": "run the containers privileged"})
    share_id: str | None = field(
        default=None, metadata={"help": "fair-share identifier (fair-share queues only)"}
    )
    priority: int = field(
        default=0,
        metadata={"help": "scheduling priority override (fair-share queues; higher runs first)"},
    )
    job_role_arn: str | None = field(
        default=None, metadata={"help": "IAM role ARN the containers assume (jobRoleArn)"}
    )
    execution_role_arn: str | None = field(
        default=None, metadata={"help": "IAM role ARN used to pull images and write logs"}
    )
    ulimits: list[str] | None = field(
        default=None, metadata={"help": "container ulimits, each 'name=soft:hard' or 'name=limit'"}
    )
    array: bool = field(
        default=False,
        metadata={
            "help": "single-role apps: submit an array job (one independent child job per"
            " replica, index in AWS_BATCH_JOB_ARRAY_INDEX) instead of a multi-node job"
        },
    )
    log_group: str = field(
        default=DEFAULT_LOG_GROUP, metadata={"help": "CloudWatch log group of the job logs"}
    )


@dataclass
class BatchJob:
    """The native request of ``aws_batch``: a job definition and the job submission.

    Args:
        name: job name (and job definition name)
        queue: job queue
        job_def: ``register_job_definition`` keyword arguments
        submit: ``submit_job`` keyword arguments (without ``jobDefinition``, known after register)
        images_to_push: workspace images to push first, ``{local_id: (repository, tag)}``
    """

    name: str
    queue: str
    job_def: dict[str, Any]
    submit: dict[str, Any]
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-compatible data (what dryrun prints)."""
        return asdict(self)

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


#: Batch job names: up to 128 letters, digits, ``-`` and ``_``.
JOB_NAME_RULES = IdRules(allowed="A-Za-z0-9_-", max_name_len=100)


def _uses_replica_id(role: Role) -> bool:
    texts = [*role.args, *role.env.values(), json.dumps(role.metadata, default=str)]
    return any("${replica_id}" in t or "$replica_id" in t for t in texts)


def _parse_ulimits(specs: list[str]) -> list[dict[str, Any]]:
    out = []
    for spec in specs:
        name, sep, limits = spec.partition("=")
        soft, _, hard = limits.partition(":")
        try:
            out.append(
                {"name": name.strip(), "softLimit": int(soft), "hardLimit": int(hard or soft)}
            )
        except ValueError:
            raise SchedulerError(
                f"invalid ulimit {spec!r}; use 'name=soft:hard' or 'name=limit',"
                " e.g. 'nofile=1024:4096'"
            ) from None
        if not sep or not name.strip():
            raise SchedulerError(
                f"invalid ulimit {spec!r}; use 'name=soft:hard', e.g. 'nofile=1024'"
            )
    return out


def _mounts(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    perms = {"r": "READ", "w": "WRITE", "m": "MKNOD"}
    # named devices (EFA, Neuron) are mounted from the host, as TorchX does
    for i, m in enumerate([*role.mounts, *get_device_mounts(role.resource.devices or {})]):
        name = f"mount_{i}"
        if isinstance(m, BindMount):
            volumes.append({"name": name, "host": {"sourcePath": m.src_path}})
            points.append(
                {"containerPath": m.dst_path, "readOnly": m.read_only, "sourceVolume": name}
            )
        elif isinstance(m, VolumeMount):
            volumes.append({"name": name, "efsVolumeConfiguration": {"fileSystemId": m.src}})
            points.append(
                {"containerPath": m.dst_path, "readOnly": m.read_only, "sourceVolume": name}
            )
        elif isinstance(m, DeviceMount):
            devices.append(
                {
                    "hostPath": m.src_path,
                    "containerPath": m.dst_path,
                    "permissions": [perms[p] for p in m.permissions if p in perms],
                }
            )
    return volumes, points, devices


def _container(
    role: Role, values: macros.Values, opts: AWSBatchOpts, ulimits: list[dict[str, Any]]
) -> dict[str, Any]:
    replica = values.apply(role)
    res = role.resource
    reqs = [
        {"type": "VCPU", "value": str(max(1, math.ceil(res.cpu or 1)))},
        {"type": "MEMORY", "value": str(max(4, int(res.memMB or 4)))},
    ]
    if res.gpu and res.gpu > 0:
        reqs.append({"type": "GPU", "value": str(int(res.gpu))})
    env = dict(replica.env)
    env[ENV_ROLE_NAME] = role.name
    volumes, points, devices = _mounts(role)
    container: dict[str, Any] = {
        "image": role.image,
        "command": [replica.entrypoint, *replica.args],
        "environment": [{"name": k, "value": v} for k, v in env.items()],
        "resourceRequirements": reqs,
        "privileged": opts.privileged,
        "logConfiguration": {"logDriver": "awslogs"},
    }
    if opts.log_group != DEFAULT_LOG_GROUP:
        container["logConfiguration"]["options"] = {"awslogs-group": opts.log_group}
    if volumes:
        container["volumes"] = volumes
        container["mountPoints"] = points
    if devices:
        container["linuxParameters"] = {"devices": devices}
    if ulimits:
        container["ulimits"] = ulimits
    if opts.job_role_arn:
        container["jobRoleArn"] = opts.job_role_arn
    if opts.execution_role_arn:
        container["executionRoleArn"] = opts.execution_role_arn
    return container


def _parse_app_id(app_id: str) -> tuple[str, str]:
    queue, sep, name = app_id.partition(":")
    if not sep or not queue or not name:
        raise InvalidAppIdError(
            f"invalid aws_batch app id {app_id!r}; expected `<job queue>:<job name>` (as returned"
            " by `torchx run`), e.g. `my-queue:train-a1b2c3d4`",
            app_id,
        )
    return queue, name


class AWSBatchScheduler(DockerWorkspaceMixin, Scheduler[BatchJob]):
    """Runs apps as AWS Batch multi-node parallel jobs.

    Args:
        session_name: the runner session name
        client: a boto3 ``batch`` client (or a fake); default ``boto3.client("batch")``
        log_client: a boto3 ``logs`` client (or a fake); default ``boto3.client("logs")``
        docker_client: Docker client for workspace images (default ``docker.from_env()``)
        poll_interval: seconds between polls when following logs
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates

    def __init__(
        self,
        session_name: str,
        client: Any | None = None,
        log_client: Any | None = None,
        docker_client: Any | None = None,
        poll_interval: float = 1.0,
    ) -> None:
        super().__init__("aws_batch", session_name, docker_client=docker_client)
        self._batch = client
        self._logs = log_client
        self.poll_interval = poll_interval
        self._job_ids: dict[str, str] = {}  # app id -> Batch job id, found once by name

    def _batch_client(self) -> Any:
        if self._batch is None:
            self._batch = make_client("batch", "aws_batch")
        return self._batch

    def _log_client(self) -> Any:
        if self._logs is None:
            self._logs = make_client("logs", "aws_batch")
        return self._logs

    def _run_opts(self) -> runopts:
        return AWSBatchOpts.as_runopts()

    # -- dryrun -----------------------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[BatchJob]:
        opts = AWSBatchOpts.from_cfg(self._scheduler_cfg(cfg))
        ulimits = _parse_ulimits(opts.ulimits or [])
        name = unique_id(app.name, JOB_NAME_RULES)
        images_to_push = self.dryrun_push_images(app, cfg)
        tags = {
            TAG_VERSION: TAG_VERSION_VALUE,
            TAG_APP_NAME: app.name,
            TAG_USER: opts.user or getpass.getuser(),
        }
        attempts = min(MAX_ATTEMPTS, 1 + max(r.max_retries for r in app.roles))
        if opts.array:
            job_def = self._array_job_def(app, name, opts, ulimits)
        else:
            job_def = self._multinode_job_def(app, name, opts, ulimits)
        if opts.array:
            tags[TAG_ROLE_NAME] = app.roles[0].name
        job_def.update(
            {"retryStrategy": {"attempts": attempts}, "propagateTags": True, "tags": dict(tags)}
        )
        submit: dict[str, Any] = {"jobName": name, "jobQueue": opts.queue, "tags": dict(tags)}
        if opts.array and app.roles[0].num_replicas > 1:
            submit["arrayProperties"] = {"size": app.roles[0].num_replicas}
        if opts.share_id:
            submit["shareIdentifier"] = opts.share_id
        if opts.share_id or opts.priority:
            submit["schedulingPriorityOverride"] = opts.priority
        req = BatchJob(
            name=name,
            queue=opts.queue,
            job_def=job_def,
            submit=submit,
            images_to_push=images_to_push,
        )
        return AppDryRunInfo(req, str)

    def _array_job_def(
        self, app: AppDef, name: str, opts: AWSBatchOpts, ulimits: list[dict[str, Any]]
    ) -> dict[str, Any]:
        role = app.roles[0]
        problems = []
        if len(app.roles) != 1:
            problems.append(
                f"array=True needs a single-role app, got {len(app.roles)} roles"
                f" ({', '.join(r.name for r in app.roles)})"
            )
        if _uses_replica_id(role):
            problems.append(
                f"role `{role.name}` uses macros.replica_id, which an array job cannot"
                " substitute per child: read AWS_BATCH_JOB_ARRAY_INDEX instead"
            )
        if problems:
            raise AppValidationError(
                f"app `{app.name}` cannot run as an array job: "
                + "; ".join(problems)
                + "; or drop array=True"
            )
        values = macros.Values(img_root="", app_id=name, replica_id="", rank0_env=RANK0_ENV)
        container = _container(role, values, opts, ulimits)
        container["environment"].append({"name": ENV_NUM_REPLICAS, "value": str(role.num_replicas)})
        return {"jobDefinitionName": name, "type": "container", "containerProperties": container}

    def _multinode_job_def(
        self, app: AppDef, name: str, opts: AWSBatchOpts, ulimits: list[dict[str, Any]]
    ) -> dict[str, Any]:
        ranges: list[dict[str, Any]] = []
        node = 0
        for role in app.roles:
            if _uses_replica_id(role):
                for i in range(role.num_replicas):
                    values = macros.Values(
                        img_root="", app_id=name, replica_id=str(i), rank0_env=RANK0_ENV
                    )
                    ranges.append(
                        {
                            "targetNodes": str(node),
                            "container": _container(role, values, opts, ulimits),
                        }
                    )
                    node += 1
            else:
                values = macros.Values(img_root="", app_id=name, replica_id="", rank0_env=RANK0_ENV)
                end = node + role.num_replicas - 1
                target = str(node) if end == node else f"{node}:{end}"
                ranges.append(
                    {"targetNodes": target, "container": _container(role, values, opts, ulimits)}
                )
                node = end + 1
        return {
            "jobDefinitionName": name,
            "type": "multinode",
            "nodeProperties": {"numNodes": node, "mainNode": 0, "nodeRangeProperties": ranges},
        }

    def schedule(self, dryrun_info: AppDryRunInfo[BatchJob]) -> str:
        req = dryrun_info.request
        if req.images_to_push:
            self.push_images(req.images_to_push)
        client = self._batch_client()
        try:
            job_def = client.register_job_definition(**req.job_def)
            client.submit_job(jobDefinition=job_def["jobDefinitionArn"], **req.submit)
        except Exception as e:  # botocore ClientError / ParamValidationError
            raise SchedulerError(
                f"AWS Batch rejected job {req.name} in queue {req.queue}: {e}"
            ) from e
        return f"{req.queue}:{req.name}"

    # -- inspection -------------------------------------------------------------------------

    def _get_job(self, app_id: str) -> dict[str, Any] | None:
        job_id = self._job_id(app_id)
        if job_id is None:
            return None
        jobs = self._batch_client().describe_jobs(jobs=[job_id]).get("jobs", [])
        return jobs[0] if jobs else None

    def _job_id(self, app_id: str) -> str | None:
        """The Batch job id of an app (``queue:name``), found by name once and then remembered."""
        known = self._job_ids.get(app_id)
        if known is not None:
            return known
        try:
            queue, name = _parse_app_id(app_id)
        except UnknownAppException:
            return None
        client = self._batch_client()
        try:
            summaries = client.list_jobs(
                jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}]
            ).get("jobSummaryList", [])
        except Exception as e:  # botocore ClientError
            if "does not exist" in str(e):  # the queue is gone: so is the app
                return None
            raise SchedulerError(f"AWS Batch could not list jobs of queue {queue}: {e}") from e
        # array children share the parent's name; their ids are "{parent}:{index}"
        summaries = [s for s in summaries if s.get("jobName") == name and ":" not in s["jobId"]]
        if not summaries:
            return None
        job_id: str = max(summaries, key=lambda s: s.get("createdAt", 0))["jobId"]
        self._job_ids[app_id] = job_id  # app ids are unique (random suffix): the id never changes
        return job_id

    def _layout(self, job: dict[str, Any]) -> list[tuple[str, int, int, dict[str, Any]]]:
        """``(role, first node or array index, replicas, container)`` per node range/role."""
        out: list[tuple[str, int, int, dict[str, Any]]] = []
        ranges = job.get("nodeProperties", {}).get("nodeRangeProperties")
        if ranges is None:  # a container job: one role, array children or a single replica
            container = job.get("container", {})
            env = {e["name"]: e["value"] for e in container.get("environment", [])}
            size = job.get("arrayProperties", {}).get("size") or env.get(ENV_NUM_REPLICAS) or 1
            role = env.get(ENV_ROLE_NAME) or job.get("tags", {}).get(TAG_ROLE_NAME, "")
            return [(role, 0, int(size), container)]
        for rng in ranges:
            container = rng.get("container", {})
            env = {e["name"]: e["value"] for e in container.get("environment", [])}
            start, end = _node_range(rng.get("targetNodes", "0"))
            out.append((env.get(ENV_ROLE_NAME, ""), start, end - start + 1, container))
        return out

    def _children(self, job: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """The child jobs of an array job by index (empty for other jobs)."""
        if "size" not in job.get("arrayProperties", {}):
            return {}
        children: dict[int, dict[str, Any]] = {}
        for status in JOB_STATES:
            kwargs: dict[str, Any] = {"arrayJobId": job["jobId"], "jobStatus": status}
            while True:
                page = self._batch_client().list_jobs(**kwargs)
                for summary in page.get("jobSummaryList", []):
                    index = summary["jobId"].rpartition(":")[2]
                    if index.isdigit():
                        children[int(index)] = summary
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        return dict(sorted(children.items()))

    def _state(self, job: dict[str, Any], children: dict[int, dict[str, Any]]) -> AppState:
        state = _job_state(job)
        if not children or is_terminal(state):
            return state
        states = [_job_state(c) for c in children.values()]
        if AppState.CANCELLED in states:
            return AppState.CANCELLED
        if AppState.FAILED in states:
            return AppState.FAILED
        size = int(job["arrayProperties"]["size"])
        if len(states) == size and all(s == AppState.SUCCEEDED for s in states):
            return AppState.SUCCEEDED
        return AppState.RUNNING if AppState.RUNNING in states else state

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        job = self._get_job(app_id)
        return None if job is None else self._describe_job(app_id, job)

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps with one ``DescribeJobs`` call per 100 apps.

        An app's job id is looked up by name (``ListJobs``) the first time only; array jobs add
        the listing of their children.
        """
        out: dict[str, DescribeAppResponse | None] = dict.fromkeys(app_ids)
        job_ids = {a: j for a in out if (j := self._job_id(a)) is not None}
        by_job: dict[str, dict[str, Any]] = {}
        wanted = list(dict.fromkeys(job_ids.values()))
        client = self._batch_client()
        for start in range(0, len(wanted), 100):
            try:
                page = client.describe_jobs(jobs=wanted[start : start + 100]).get("jobs", [])
            except Exception as e:  # botocore ClientError
                raise SchedulerError(f"AWS Batch could not describe jobs: {e}") from e
            by_job.update((job["jobId"], job) for job in page)
        for app_id, job_id in job_ids.items():
            job = by_job.get(job_id)
            if job is None:
                self._job_ids.pop(app_id, None)
            else:
                out[app_id] = self._describe_job(app_id, job)
        return out

    def _describe_job(self, app_id: str, job: dict[str, Any]) -> DescribeAppResponse:
        children = self._children(job)
        state = self._state(job, children)
        roles: list[Role] = []
        statuses: dict[str, RoleStatus] = {}
        for role_name, first, count, container in self._layout(job):
            status = statuses.setdefault(role_name, RoleStatus(role_name, []))
            for i in range(first, first + count):
                replica_state = _job_state(children[i]) if i in children else state
                status.replicas.append(
                    ReplicaStatus(len(status.replicas), replica_state, role_name, "")
                )
            if not any(r.name == role_name for r in roles):
                roles.append(
                    Role(
                        name=role_name,
                        image=container.get("image", ""),
                        entrypoint=(container.get("command") or [""])[0],
                    )
                )
        for role in roles:
            role.num_replicas = len(statuses[role.name].replicas)
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max(0, len(job.get("attempts", [])) - 1),
            msg=job.get("statusReason", ""),
            roles_statuses=list(statuses.values()),
            roles=roles,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        client = self._batch_client()
        try:
            return self._list(client, (cfg or {}).get("queue"))
        except SchedulerError:
            raise
        except Exception as e:  # botocore ClientError / NoCredentialsError
            raise SchedulerError(f"AWS Batch could not list jobs: {e}") from e

    def _list(self, client: Any, queue: CfgVal) -> builtins.list[ListAppResponse]:
        if queue:
            queues = [str(queue)]
        else:
            queues = [q["jobQueueName"] for q in client.describe_job_queues().get("jobQueues", [])]
        out: builtins.list[ListAppResponse] = []
        for q in queues:
            ids = list(
                dict.fromkeys(
                    s["jobId"]
                    for status in JOB_STATES
                    for s in self._list_jobs(q, status)
                    if ":" not in s["jobId"]  # array children are reported through their parent
                )
            )
            for start in range(0, len(ids), 100):
                for job in client.describe_jobs(jobs=ids[start : start + 100]).get("jobs", []):
                    if job.get("tags", {}).get(TAG_VERSION):
                        state = self._state(job, self._children(job))
                        out.append(
                            ListAppResponse(
                                app_id=f"{q}:{job['jobName']}", state=state, name=job["jobName"]
                            )
                        )
        return out

    def _list_jobs(self, queue: str, status: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"jobQueue": queue, "jobStatus": status}
        while True:
            page = self._batch_client().list_jobs(**kwargs)
            yield from page.get("jobSummaryList", [])
            token = page.get("nextToken")
            if not token:
                return
            kwargs["nextToken"] = token

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        require_combined_streams(streams, "aws_batch logs")
        _parse_app_id(app_id)  # an id no app can have says the expected form
        job = self._get_job(app_id)
        if job is None:
            raise UnknownAppException(app_id)
        node = self._node_index(job, role_name, k)
        lines = self._log_lines(app_id, job, node, since, until, should_tail)
        return filter_regex(regex, lines) if regex else lines

    def _node_index(self, job: dict[str, Any], role_name: str, k: int) -> int:
        seen = 0
        for name, first, count, _ in self._layout(job):
            if name == role_name:
                if seen <= k < seen + count:
                    return first + k - seen
                seen += count
        raise InvalidLogQueryError(
            f"job {job.get('jobName')} has no replica {k} of role {role_name!r}; check the role"
            " name and replica id with `torchx status`"
        )

    def _stream_name(self, job: dict[str, Any], node: int) -> str | None:
        # multi-node: "{id}#{node}"; array child: "{id}:{index}"; else the job's own stream
        sep = "#" if "nodeProperties" in job else ":"
        part = (
            self._batch_client().describe_jobs(jobs=[f"{job['jobId']}{sep}{node}"]).get("jobs", [])
        )
        candidates = part if sep == ":" and part else (*part, job)
        for candidate in candidates:
            name: str | None = candidate.get("container", {}).get("logStreamName")
            attempts = candidate.get("attempts") or [{}]
            name = name or attempts[-1].get("container", {}).get("logStreamName")
            if name:
                return name
        return None

    def _log_lines(
        self,
        app_id: str,
        job: dict[str, Any],
        node: int,
        since: datetime | None,
        until: datetime | None,
        should_tail: bool,
    ) -> Iterator[str]:
        group = self._log_group(job)
        token: str | None = None
        stream: str | None = None
        while True:
            finished = is_terminal(self._state(job, self._children(job)))
            stream = stream or self._stream_name(job, node)
            if stream:
                token = yield from iter_log_events(
                    self._log_client(), group, stream, token, since, until
                )
            if not should_tail or finished:
                return
            time.sleep(self.poll_interval)
            job = self._get_job(app_id) or job

    def _log_group(self, job: dict[str, Any]) -> str:
        for _, _, _, container in self._layout(job):
            options = container.get("logConfiguration", {}).get("options", {})
            if options.get("awslogs-group"):
                return str(options["awslogs-group"])
        return DEFAULT_LOG_GROUP

    # -- lifecycle --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        job = self._get_job(app_id)
        if job is None:
            return
        children = self._children(job)
        if is_terminal(self._state(job, children)):
            return
        # the parent, and each unfinished array child (AWS cascades; moto does not)
        ids = [job["jobId"]] + [
            c["jobId"] for c in children.values() if not is_terminal(_job_state(c))
        ]
        client = self._batch_client()
        for job_id in ids:
            try:
                client.terminate_job(jobId=job_id, reason=CANCEL_REASON)
            except Exception as e:
                raise SchedulerError(
                    f"AWS Batch could not terminate {app_id} ({job_id}): {e}"
                ) from e

    def _delete_existing(self, app_id: str) -> None:
        """Cancels the job if it runs and deregisters the job definition made for it."""
        self._cancel_existing(app_id)
        job = self._get_job(app_id)
        if job is None or not job.get("jobDefinition"):
            return
        try:
            self._batch_client().deregister_job_definition(jobDefinition=job["jobDefinition"])
        except Exception as e:  # botocore ClientError
            raise SchedulerError(
                f"AWS Batch could not deregister the job definition of {app_id}: {e}"
            ) from e


def _job_state(job: Mapping[str, Any]) -> AppState:
    status = job.get("status", "")
    if status == "FAILED" and str(job.get("statusReason", "")).startswith(CANCEL_REASON):
        return AppState.CANCELLED
    return JOB_STATES.get(status, AppState.UNKNOWN)


def _node_range(target: str) -> tuple[int, int]:
    start, sep, end = target.partition(":")
    first = int(start or 0)
    return first, (int(end) if sep and end else first)


def create_scheduler(
    session_name: str,
    client: Any | None = None,
    log_client: Any | None = None,
    docker_client: Any | None = None,
    poll_interval: float = 1.0,
    **kwargs: Any,
) -> AWSBatchScheduler:
    """Creates an :class:`AWSBatchScheduler` (registry entry of ``aws_batch``).

    Other keyword arguments (the runner passes its scheduler params to every factory) are ignored.
    """
    if kwargs:
        logger.debug("aws_batch_scheduler: ignoring scheduler params %s", sorted(kwargs))
    return AWSBatchScheduler(
        session_name=session_name,
        client=client,
        log_client=log_client,
        docker_client=docker_client,
        poll_interval=poll_interval,
    )
