"""``aws_sagemaker``: runs a single-role app as a SageMaker training job (boto3 only).

The request is the keyword arguments of ``create_training_job`` (no dependency on the SageMaker
Python SDK):

* ``AlgorithmSpecification``: the role's image, ``ContainerEntrypoint`` = ``[entrypoint]`` and
  ``ContainerArguments`` = args;
* ``ResourceConfig``: ``InstanceType`` from the ``instance_type`` run option, or from the role's
  named resource (its ``node.kubernetes.io/instance-type`` capability, prefixed with ``ml.``);
  ``InstanceCount`` = ``num_replicas``; ``VolumeSizeInGB``;
* ``HyperParameters``, ``Environment`` (the role's env), ``OutputDataConfig.S3OutputPath``,
  ``RoleArn``, ``StoppingCondition`` (``max_run``/``max_wait``), managed spot training, VPC config,
  tags.

Every instance runs the same command, so ``macros.replica_id`` is only available with one
replica; the rank-0 host is SageMaker's first host ``algo-1`` (env ``TORCHX_RANK0_HOST``).
``cancel`` stops the job (``Stopped`` -> ``CANCELLED``); logs are read from the CloudWatch group
``/aws/sagemaker/TrainingJobs`` (stream ``{job}/algo-{k+1}-...``) when present.
Workspaces are built as Docker images and pushed to ``image_repo`` (:class:`DockerWorkspaceMixin`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from torchx_core import __version__
from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import (
    AppValidationError,
    DescribeAppResponse,
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
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    InvalidRunConfigException,
    ReplicaStatus,
    Role,
    RoleStatus,
    UnknownAppException,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin

__all__ = [
    "JOB_STATE",
    "JOB_STATES",
    "AWSSageMakerOpts",
    "AWSSageMakerScheduler",
    "SageMakerJob",
    "create_scheduler",
]

logger: logging.Logger = logging.getLogger(__name__)

INSTANCE_TYPE_CAPABILITY = "node.kubernetes.io/instance-type"
RANK0_ENV = "TORCHX_RANK0_HOST"
ENV_ROLE_NAME = "TORCHX_ROLE_NAME"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TAG_VERSION = "torchx.pytorch.org/version"
TAG_APP_NAME = "torchx.pytorch.org/app-name"

# SageMaker TrainingJobStatus -> AppState.
JOB_STATES: dict[str, AppState] = {
    "InProgress": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Stopping": AppState.RUNNING,
    "Stopped": AppState.CANCELLED,
}
JOB_STATE = JOB_STATES  # TorchX's name


@dataclass
class AWSSageMakerOpts(StructuredOpts):
    """Run options of the ``aws_sagemaker`` scheduler."""

    role: str = field(
        metadata={
            "help": "ARN of the IAM role SageMaker assumes to run the job"
            " (arn:aws:iam::<account>:role/<name>)"
        }
    )
    output_path: str = field(metadata={"help": "S3 URI for the job's output (model artifacts)"})
    instance_type: str | None = field(
        default=None,
        metadata={
            "help": "instance type, e.g. ml.m5.xlarge (default: from the role's named resource)"
        },
    )
    volume_size: int = field(default=30, metadata={"help": "EBS volume size per instance in GB"})
    max_run: int = field(default=86400, metadata={"help": "maximum run time in seconds"})
    max_wait: int | None = field(
        default=None,
        metadata={"help": "maximum wait time for spot capacity in seconds (>= max_run)"},
    )
    use_spot_instances: bool = field(default=False, metadata={"help": "use managed spot training"})
    hyperparameters: dict[str, str] | None = field(
        default=None, metadata={"help": "hyperparameters passed to the training container"}
    )
    subnets: list[str] | None = field(default=None, metadata={"help": "VPC subnet ids"})
    security_group_ids: list[str] | None = field(
        default=None, metadata={"help": "VPC security group ids"}
    )
    tags: dict[str, str] | None = field(default=None, metadata={"help": "extra job tags"})


@dataclass
class SageMakerJob:
    """The native request of ``aws_sagemaker``.

    Args:
        job_name: the training job name (the app id)
        request: ``create_training_job`` keyword arguments
        images_to_push: workspace images to push first, ``{local_id: (repository, tag)}``
    """

    job_name: str
    request: dict[str, Any]
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-compatible data (what dryrun prints)."""
        return asdict(self)

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


#: Training job names: up to 63 letters, digits and ``-``.
JOB_NAME_RULES = IdRules(allowed="a-zA-Z0-9", max_name_len=54)


def _instance_type(role: Role, opts: AWSSageMakerOpts) -> str:
    if opts.instance_type:
        return opts.instance_type
    itype = role.resource.capabilities.get(INSTANCE_TYPE_CAPABILITY)
    if not itype:
        raise AppValidationError(
            f"role `{role.name}` has no instance type: set the run option instance_type"
            " (e.g. ml.m5.xlarge) or use an AWS named resource (e.g. resource(h='aws_m5.xlarge'))"
        )
    itype = str(itype)
    return itype if itype.startswith("ml.") else f"ml.{itype}"


def _uses_replica_id(role: Role) -> bool:
    texts = [*role.args, *role.env.values()]
    return any("${replica_id}" in t or "$replica_id" in t for t in texts)


class AWSSageMakerScheduler(DockerWorkspaceMixin, Scheduler[SageMakerJob]):
    """Runs single-role apps as SageMaker training jobs.

    Args:
        session_name: the runner session name
        client: a boto3 ``sagemaker`` client (or a fake); default ``boto3.client("sagemaker")``
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
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__("aws_sagemaker", session_name, docker_client=docker_client)
        self._sm = client
        self._logs = log_client
        self.poll_interval = poll_interval

    def _sm_client(self) -> Any:
        if self._sm is None:
            self._sm = make_client("sagemaker", "aws_sagemaker")
        return self._sm

    def _log_client(self) -> Any:
        if self._logs is None:
            self._logs = make_client("logs", "aws_sagemaker")
        return self._logs

    def _run_opts(self) -> runopts:
        return AWSSageMakerOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        super()._validate(app, scheduler, cfg)
        problems = []
        if len(app.roles) != 1:
            problems.append(
                f"a SageMaker training job runs one role, the app has {len(app.roles)}"
                f" ({', '.join(r.name for r in app.roles)}); split it into one app per role"
            )
        for role in app.roles:
            if role.num_replicas > 1 and _uses_replica_id(role):
                problems.append(
                    f"role `{role.name}` uses macros.replica_id with {role.num_replicas} replicas;"
                    " SageMaker runs the same command on every instance: read SM_CURRENT_HOST"
                    " in the program instead"
                )
        if problems:
            raise AppValidationError(
                f"app `{app.name}` cannot run on `{scheduler}`: " + "; ".join(problems)
            )

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[SageMakerJob]:
        opts = AWSSageMakerOpts.from_cfg(self._scheduler_cfg(cfg))
        if not opts.role.startswith("arn:"):
            raise InvalidRunConfigException(
                f"role={opts.role!r} is not an IAM role ARN; give the role's full ARN, e.g."
                f" arn:aws:iam::123456789012:role/{opts.role or 'SageMakerRole'}",
                "role",
                None,
            )
        images_to_push = self.dryrun_push_images(app, cfg)
        role = app.roles[0]
        name = unique_id(app.name, JOB_NAME_RULES)
        values = macros.Values(img_root="", app_id=name, replica_id="0", rank0_env=RANK0_ENV)
        replica = values.apply(role)
        env = dict(replica.env)
        env[RANK0_ENV] = "algo-1"
        env[ENV_ROLE_NAME] = role.name
        stopping: dict[str, int] = {"MaxRuntimeInSeconds": opts.max_run}
        if opts.max_wait is not None:
            stopping["MaxWaitTimeInSeconds"] = opts.max_wait
        tags = {TAG_VERSION: __version__, TAG_APP_NAME: app.name, **(opts.tags or {})}
        request: dict[str, Any] = {
            "TrainingJobName": name,
            "AlgorithmSpecification": {
                "TrainingImage": role.image,
                "TrainingInputMode": "File",
                "ContainerEntrypoint": [replica.entrypoint],
                "ContainerArguments": list(replica.args),
            },
            "RoleArn": opts.role,
            "OutputDataConfig": {"S3OutputPath": opts.output_path},
            "ResourceConfig": {
                "InstanceType": _instance_type(role, opts),
                "InstanceCount": role.num_replicas,
                "VolumeSizeInGB": opts.volume_size,
            },
            "StoppingCondition": stopping,
            "HyperParameters": dict(opts.hyperparameters or {}),
            "Environment": env,
            "EnableManagedSpotTraining": opts.use_spot_instances,
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }
        if not replica.args:
            del request["AlgorithmSpecification"]["ContainerArguments"]
        if opts.subnets or opts.security_group_ids:
            request["VpcConfig"] = {
                "Subnets": list(opts.subnets or []),
                "SecurityGroupIds": list(opts.security_group_ids or []),
            }
        return AppDryRunInfo(SageMakerJob(name, request, images_to_push), str)

    def schedule(self, dryrun_info: AppDryRunInfo[SageMakerJob]) -> str:
        req = dryrun_info.request
        if req.images_to_push:
            self.push_images(req.images_to_push)
        try:
            self._sm_client().create_training_job(**req.request)
        except Exception as e:  # botocore ClientError / ParamValidationError
            raise SchedulerError(f"SageMaker rejected training job {req.job_name}: {e}") from e
        return req.job_name

    def _describe_job(self, app_id: str) -> dict[str, Any] | None:
        client = self._sm_client()
        try:
            desc: dict[str, Any] = client.describe_training_job(TrainingJobName=app_id)
            return desc
        except Exception as e:
            text = f"{type(e).__name__} {e}"
            if any(s in text.lower() for s in ("not found", "could not find", "resourcenotfound")):
                return None
            raise SchedulerError(f"SageMaker could not describe {app_id}: {e}") from e

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        job = self._describe_job(app_id)
        if job is None:
            return None
        state = JOB_STATES.get(job.get("TrainingJobStatus", ""), AppState.UNKNOWN)
        spec = job.get("AlgorithmSpecification", {})
        count = int(job.get("ResourceConfig", {}).get("InstanceCount", 1))
        role_name = (job.get("Environment") or {}).get(ENV_ROLE_NAME, "sagemaker")
        role = Role(
            name=role_name,
            image=spec.get("TrainingImage", ""),
            num_replicas=count,
            entrypoint=(spec.get("ContainerEntrypoint") or ["<MISSING>"])[0],
            args=list(spec.get("ContainerArguments") or []),
        )
        replicas = [ReplicaStatus(i, state, role.name, f"algo-{i + 1}") for i in range(count)]
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=0,
            msg=job.get("FailureReason", "") or job.get("SecondaryStatus", ""),
            ui_url=self._ui_url(app_id),
            roles_statuses=[RoleStatus(role.name, replicas)],
            roles=[role],
        )

    def _ui_url(self, app_id: str) -> str | None:
        region = getattr(getattr(self._sm_client(), "meta", None), "region_name", None)
        if not region:
            return None
        return (
            f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{app_id}"
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        client = self._sm_client()
        out = []
        kwargs: dict[str, Any] = {"MaxResults": 100}
        while True:
            try:
                page = client.list_training_jobs(**kwargs)
            except Exception as e:  # botocore ClientError / NoCredentialsError
                raise SchedulerError(f"SageMaker could not list training jobs: {e}") from e
            for s in page.get("TrainingJobSummaries", []):
                out.append(
                    ListAppResponse(
                        app_id=s["TrainingJobName"],
                        name=s["TrainingJobName"],
                        state=JOB_STATES.get(s.get("TrainingJobStatus", ""), AppState.UNKNOWN),
                    )
                )
            token = page.get("NextToken")
            if not token:
                return out
            kwargs["NextToken"] = token

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
        require_combined_streams(streams, "SageMaker logs")
        job = self._describe_job(app_id)
        if job is None:
            raise UnknownAppException(app_id)
        count = int(job.get("ResourceConfig", {}).get("InstanceCount", 1))
        role = (job.get("Environment") or {}).get(ENV_ROLE_NAME)  # (moto omits Environment)
        if (role is not None and role_name != role) or not 0 <= k < count:
            raise InvalidLogQueryError(
                f"training job {app_id} has no replica {k} of role {role_name!r}; its only role is"
                f" {role or role_name!r} with replicas 0-{count - 1}"
            )
        lines = self._log_lines(app_id, k, since, until, should_tail)
        return filter_regex(regex, lines) if regex else lines

    def _log_lines(
        self, app_id: str, k: int, since: datetime | None, until: datetime | None, should_tail: bool
    ) -> Iterator[str]:
        tokens: dict[str, str | None] = {}
        while True:
            job = self._describe_job(app_id) or {}
            finished = is_terminal(
                JOB_STATES.get(job.get("TrainingJobStatus", ""), AppState.UNKNOWN)
            )
            for stream in self._streams(app_id, k):
                tokens[stream] = yield from iter_log_events(
                    self._log_client(), LOG_GROUP, stream, tokens.get(stream), since, until
                )
            if not should_tail or finished:
                return
            time.sleep(self.poll_interval)

    def _streams(self, app_id: str, k: int) -> Sequence[str]:
        try:
            page = self._log_client().describe_log_streams(
                logGroupName=LOG_GROUP, logStreamNamePrefix=f"{app_id}/algo-{k + 1}-"
            )
        except Exception as e:
            if "ResourceNotFound" in f"{type(e).__name__} {e}":
                return []
            raise SchedulerError(f"cannot list SageMaker log streams of {app_id}: {e}") from e
        return [s["logStreamName"] for s in page.get("logStreams", [])]

    def _cancel_existing(self, app_id: str) -> None:
        job = self._describe_job(app_id)
        if job is None or job.get("TrainingJobStatus") not in ("InProgress",):
            return
        try:
            self._sm_client().stop_training_job(TrainingJobName=app_id)
        except Exception as e:
            raise SchedulerError(f"SageMaker could not stop {app_id}: {e}") from e


def create_scheduler(
    session_name: str,
    client: Any | None = None,
    log_client: Any | None = None,
    docker_client: Any | None = None,
    poll_interval: float = 5.0,
    **kwargs: Any,
) -> AWSSageMakerScheduler:
    """Creates an :class:`AWSSageMakerScheduler` (registry entry of ``aws_sagemaker``).

    Other keyword arguments (the runner passes its scheduler params to every factory) are ignored.
    """
    if kwargs:
        logger.debug("aws_sagemaker_scheduler: ignoring scheduler params %s", sorted(kwargs))
    return AWSSageMakerScheduler(
        session_name=session_name,
        client=client,
        log_client=log_client,
        docker_client=docker_client,
        poll_interval=poll_interval,
    )
