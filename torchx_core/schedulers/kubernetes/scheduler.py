"""The ``kubernetes`` scheduler: one app = one Volcano Job (default) or one JobSet.

* **Volcano** (``job_kind=volcano``, what TorchX users expect): a ``batch.volcano.sh/v1alpha1``
  Job with one task per replica (``{role}-{replica_id}``), ``minAvailable`` from ``min_replicas``
  (elastic), ``maxRetry`` and restart policies from ``max_retries``/``RetryPolicy``, the ``svc``
  plugin for DNS so replicas find rank 0 (see ``rank0_host``).
* **JobSet** (``job_kind=jobset``, no Volcano needed, Kueue-friendly): a
  ``jobset.x-k8s.io/v1alpha2`` JobSet with one replicated Job per role (an Indexed Job with
  ``num_replicas`` pods), DNS hostnames on, and the ``kueue.x-k8s.io/queue-name`` label when
  ``queue`` is set.

Both carry the same env (``TORCHX_RANK0_HOST``, the ``rank0_env`` macro), labels, pods (see
``_k8s_pods``) and the ``kubernetes``/``V1Pod``, ``kubernetes``/``VolcanoJob`` and
``kubernetes``/``JobSet`` overlays. App ids are ``{namespace}:{name}``. ``cancel`` aborts a Volcano
job (a ``bus.volcano.sh`` Command) or suspends a JobSet, keeping the object; ``delete`` removes it.
"""

from __future__ import annotations

import builtins
import functools
import logging
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from torchx_core.schedulers.api import (
    DescribeAppResponse,
    InvalidAppIdError,
    ListAppResponse,
    Scheduler,
    Stream,
    StructuredOpts,
    UnsupportedFeatureError,
    filter_regex,
    require_combined_streams,
)
from torchx_core.schedulers.ids import make_unique
from torchx_core.schedulers.kubernetes import _models as models
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes._client import (
    KubeClients,
    KubernetesJobExistsError,
    KubernetesSpecError,
    context_namespace,
    kubeconfig_context,
)
from torchx_core.schedulers.kubernetes._log_lines import aware, response_lines, until_lines
from torchx_core.schedulers.kubernetes._models import (  # noqa: F401 - TorchX's public names
    RETRY_POLICIES,
    pod_labels,
    role_to_pod,
    sanitize_for_serialization,
)
from torchx_core.schedulers.kubernetes._models import (  # noqa: F401 - TorchX private, kept
    apply_pod_overlay as _apply_pod_overlay,
)
from torchx_core.schedulers.kubernetes._pods import (  # noqa: F401 - TorchX's public names
    ANNOTATION_ISTIO_SIDECAR,
    LABEL_APP_NAME,
    LABEL_INSTANCE_TYPE,
    LABEL_KUBE_APP_NAME,
    LABEL_ORGANIZATION,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME,
    LABEL_VERSION,
    PLACEHOLDER_FIELD_PATH,
    RESERVED_MEMMB,
    RESERVED_MILLICPU,
)
from torchx_core.schedulers.kubernetes._status import (  # noqa: F401 - tests read them here
    CANCELLED_ANNOTATION,
    VOLCANO_STATES,
    VOLCANO_TASK_STATES,
    _default_replica,
    _jobset_state,
    _roles_of,
    _volcano_state,
    _volcano_task_states,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
    runopts,
)
from torchx_core.specs.errors import InvalidRunConfigException
from torchx_core.specs.overlays import apply_overlay, get_overlay
from torchx_core.util.strings import normalize_str
from torchx_core.util.yaml_emitter import dump_yaml
from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin

#: Named after the public module path (``kubernetes_scheduler``), the logger TorchX users configure.
logger: logging.Logger = logging.getLogger("torchx_core.schedulers.kubernetes_scheduler")

VOLCANO_GROUP, VOLCANO_VERSION, VOLCANO_PLURAL = "batch.volcano.sh", "v1alpha1", "jobs"
VOLCANO_BUS_GROUP, VOLCANO_BUS_PLURAL = "bus.volcano.sh", "commands"
JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RANK0_ENV = "TORCHX_RANK0_HOST"
REPLICA_ID_ENV = "TORCHX_REPLICA_ID"

JOB_KINDS = ("volcano", "jobset")

#: Pods take their name as hostname, a DNS label: at most 63 characters.
MAX_POD_NAME_LEN = 63


@dataclass
class KubernetesOpts(StructuredOpts):
    """Run options of the ``kubernetes`` scheduler."""

    namespace: str | None = None
    """Kubernetes namespace (default: the kubeconfig context's namespace, else `default`)."""
    job_kind: str = "volcano"
    """`volcano` (a Volcano Job, the default) or `jobset` (a JobSet: no Volcano; Kueue works)."""
    queue: str | None = None
    """Volcano queue, or Kueue LocalQueue (jobset: sets the kueue.x-k8s.io/queue-name label)."""
    service_account: str | None = None
    """Service account the pods run as."""
    image_pull_secrets: list[str] | None = None
    """Secrets used to pull the images."""
    priority_class: str | None = None
    """Priority class of the pods (and of the Volcano job)."""
    image_pull_policy: str | None = None
    """Image pull policy of the containers (Always, IfNotPresent, Never)."""
    context: str | None = None
    """kubeconfig context to use (default: the current context)."""
    reserved_millicpu: int = pods.RESERVED_MILLICPU
    """CPU (millicores) a node keeps for Kubernetes: each container requests its cpu less this."""
    reserved_memmb: int = pods.RESERVED_MEMMB
    """Memory (MB) a node keeps for Kubernetes: each container requests its memory less this."""
    efa_device_count: int | None = None
    """EFA devices per pod: unset = as the resource says, 0 = none, N = N."""
    validate_spec: bool = False
    """Dry run: also have the API server validate the job (a server-side dry run; needs a
    cluster) and check that pod names fit in 63 characters."""


Opts = KubernetesOpts  # TorchX's name


@dataclass
class KubernetesJob:
    """The request: one custom resource (Volcano Job or JobSet) to create in ``namespace``."""

    resource: dict[str, Any]
    kind: str = "volcano"
    namespace: str = "default"
    images: list[str] = field(default_factory=list)
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Workspace images to push before creating the job, ``{local_id: (repository, tag)}``."""

    def __str__(self) -> str:
        return dump_yaml(self.resource)

    @property
    def name(self) -> str:
        name: str = self.resource["metadata"]["name"]
        return name


def rank0_host(kind: str, app_id: str, role0: Role) -> str:
    """The DNS name rank 0 gets from the job's headless service.

    Volcano names pods ``{job}-{task}-{index}`` (task ``{role}-0`` holds replica 0); JobSet names
    them ``{jobset}-{replicatedJob}-{jobIndex}-{podIndex}``; both use the job name as subdomain.
    """
    return f"{app_id}-{pods.dns_label(role0.name)}-0-0.{app_id}"


def _role_env(kind: str, app_id: str, app: AppDef) -> dict[str, str]:
    return {RANK0_ENV: rank0_host(kind, app_id, app.roles[0]), "TORCHX_APP_ID": app_id}


def _values(app_id: str, replica_id: str) -> macros.Values:
    return macros.Values(img_root="", app_id=app_id, replica_id=replica_id, rank0_env=RANK0_ENV)


def _check_retry_policy(app: AppDef, kind: str) -> None:
    for role in app.roles:
        if role.retry_policy == RetryPolicy.ROLE:
            raise UnsupportedFeatureError(
                f"role `{role.name}` uses RetryPolicy.ROLE, which the kubernetes scheduler"
                f" ({kind}) cannot express; use RetryPolicy.APPLICATION (restart the whole job)"
                " or RetryPolicy.REPLICA (replace failed pods)"
            )


def _volcano_policies(role: Role) -> list[dict[str, str]]:
    action = "RestartTask" if role.retry_policy == RetryPolicy.REPLICA else "RestartJob"
    return [{"event": "PodEvicted", "action": action}, {"event": "PodFailed", "action": action}]


def volcano_job(app: AppDef, app_id: str, opts: KubernetesOpts) -> dict[str, Any]:
    """Builds the Volcano Job for ``app`` (one task per replica)."""
    pod_opts = _pod_options(opts, scheduler_name="volcano")
    extra_env = _role_env("volcano", app_id, app)
    tasks: list[dict[str, Any]] = []
    min_available = 0
    for role_idx, role in enumerate(app.roles):
        min_replicas = role.min_replicas if role.min_replicas is not None else role.num_replicas
        min_available += min_replicas
        role_name = pods.dns_label(role.name)
        role_labels = pods.role_labels(app.name, app_id, role_idx, role)
        replica_pods = pods.replica_pods(
            role,
            values_of=lambda i: _values(app_id, str(i)),
            name_of=pods.replica_names(f"{app_id}-{role_name}"),
            labels_of=pods.replica_labels(role_labels),
            opts=pod_opts,
            extra_env=extra_env,
            container_name_of=pods.replica_container_names(role.name),
        )
        policies = _volcano_policies(role)
        for replica_id, pod in enumerate(replica_pods):
            tasks.append(
                {
                    "name": f"{role_name}-{replica_id}",
                    "replicas": 1,
                    "minAvailable": 1 if replica_id < min_replicas else 0,
                    "maxRetry": role.max_retries,
                    "policies": policies,
                    "template": models.PodTemplate(pods.pod_template(pod)),
                }
            )
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "minAvailable": min_available,
        "maxRetry": max((r.max_retries for r in app.roles), default=0),
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
        "tasks": tasks,
    }
    if opts.queue:
        spec["queue"] = opts.queue
    if opts.priority_class:
        spec["priorityClassName"] = opts.priority_class
    job = {
        "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
        "kind": "Job",
        "metadata": {
            "name": app_id,
            "namespace": opts.namespace,
            "labels": pods.object_labels(app.name, app_id),
        },
        "spec": spec,
    }
    _apply_app_overlay(app, job, "VolcanoJob")
    return job


def jobset(app: AppDef, app_id: str, opts: KubernetesOpts) -> dict[str, Any]:
    """Builds the JobSet for ``app`` (one Indexed Job per role)."""
    pod_opts = _pod_options(opts, scheduler_name=None)
    extra_env = _role_env("jobset", app_id, app)
    # the replica id is the Job's completion index, read through the downward API
    replica_env = [
        {
            "name": REPLICA_ID_ENV,
            "valueFrom": {
                "fieldRef": {
                    "fieldPath": f"metadata.annotations['{pods.JOB_COMPLETION_INDEX_ANNOTATION}']"
                }
            },
        }
    ]
    replicated_jobs = []
    max_restarts = 0
    for role_idx, role in enumerate(app.roles):
        replica_role = _values(app_id, f"$({REPLICA_ID_ENV})").apply(role)
        labels = pods.role_labels(app.name, app_id, role_idx, role)
        pod = pods.role_to_pod(replica_role, "", labels, pod_opts, extra_env, env_first=replica_env)
        template = models.PodTemplate(pods.pod_template(pod))
        del template["metadata"]["name"]
        replica_level = role.retry_policy == RetryPolicy.REPLICA
        if not replica_level:
            max_restarts = max(max_restarts, role.max_retries)
        job_spec: dict[str, Any] = {
            "parallelism": role.num_replicas,
            "completions": role.num_replicas,
            "completionMode": "Indexed",
            "backoffLimit": role.max_retries if replica_level else 0,
            "template": template,
        }
        replicated_jobs.append(
            {
                "name": pods.dns_label(role.name),
                "replicas": 1,
                "template": {"metadata": {"labels": dict(labels)}, "spec": job_spec},
            }
        )
    metadata: dict[str, Any] = {
        "name": app_id,
        "namespace": opts.namespace,
        "labels": pods.object_labels(app.name, app_id),
    }
    if opts.queue:
        metadata["labels"][KUEUE_QUEUE_LABEL] = opts.queue
    obj = {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": app_id},
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": replicated_jobs,
        },
    }
    _apply_app_overlay(app, obj, "JobSet")
    return obj


def _pod_options(opts: KubernetesOpts, scheduler_name: str | None) -> pods.PodOptions:
    return pods.PodOptions(
        service_account=opts.service_account,
        image_pull_secrets=list(opts.image_pull_secrets or []),
        priority_class=opts.priority_class,
        image_pull_policy=opts.image_pull_policy,
        scheduler_name=scheduler_name,
        reserved_millicpu=opts.reserved_millicpu,
        reserved_memmb=opts.reserved_memmb,
        efa_device_count=opts.efa_device_count,
    )


def _apply_app_overlay(app: AppDef, obj: dict[str, Any], kind: str) -> None:
    overlay = get_overlay(app, "kubernetes", kind)
    if overlay:
        apply_overlay(obj, overlay)


def app_to_resource(
    app: AppDef,
    queue: str,
    service_account: str | None,
    priority_class: str | None = None,
    reserved_millicpu: int = pods.RESERVED_MILLICPU,
    reserved_memmb: int = pods.RESERVED_MEMMB,
    efa_device_count: int | None = None,
) -> dict[str, Any]:
    """TorchX's builder: ``app`` as a Volcano Job dict whose task templates are ``V1Pod`` objects.

    The job is named ``normalize_str(make_unique(app.name))``; see
    :func:`torchx_core.schedulers.kubernetes._models.volcano_resource`. The scheduler's own
    request is :class:`KubernetesJob` (plain dicts); this builder is for code written against
    TorchX.
    """
    return models.volcano_resource(
        app,
        normalize_str(make_unique(app.name)),
        queue,
        service_account,
        priority_class,
        reserved_millicpu,
        reserved_memmb,
        efa_device_count,
    )


class KubernetesScheduler(DockerWorkspaceMixin, Scheduler[KubernetesJob]):
    """Runs apps on Kubernetes as Volcano Jobs or JobSets (see the module docstring).

    Workspaces are built as Docker images (:class:`DockerWorkspaceMixin`) and pushed to
    ``image_repo`` when the job is submitted, as in TorchX.

    Args:
        session_name: the runner session name.
        client: a ``kubernetes.client.ApiClient``; by default one is built from the in-cluster
            config or the kubeconfig on first use.
        docker_client: Docker client for workspace images (default ``docker.from_env()``)
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates

    def __init__(
        self, session_name: str, client: Any | None = None, docker_client: Any | None = None
    ) -> None:
        super().__init__("kubernetes", session_name, docker_client=docker_client)
        self._clients = KubeClients(client)

    def close(self) -> None:
        self._clients.close()
        self._close_docker_client()

    @property
    def _client(self) -> Any | None:
        """The ``ApiClient`` given to the constructor or built on first use (TorchX's name)."""
        return self._clients._client

    def _get_active_context(self, context: str | None = None) -> dict[str, Any] | None:
        """The kubeconfig's entry for ``context`` (default: the current context), if any."""
        return kubeconfig_context(context)

    def _namespace(self, opts: KubernetesOpts) -> str:
        """The ``namespace`` option, else the kubeconfig context's namespace, else ``default``."""
        return (
            opts.namespace or context_namespace(self._get_active_context(opts.context)) or "default"
        )

    # -- submission -------------------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return KubernetesOpts.as_runopts()

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[KubernetesJob]:
        opts = KubernetesOpts.from_cfg(self._scheduler_cfg(cfg))
        opts.namespace = self._namespace(opts)
        if opts.job_kind not in JOB_KINDS:
            raise InvalidRunConfigException(
                f"job_kind={opts.job_kind!r} is not valid; use one of {list(JOB_KINDS)}",
                "job_kind",
                None,
            )
        _check_retry_policy(app, opts.job_kind)
        images_to_push = self.dryrun_push_images(app, cfg)  # workspace images: their pushed names
        name = pods.unique_name(app.name)
        build = volcano_job if opts.job_kind == "volcano" else jobset
        resource = build(app, name, opts)
        req = KubernetesJob(
            resource=resource,
            kind=opts.job_kind,
            namespace=opts.namespace,
            images=sorted({r.image for r in app.roles}),
            images_to_push=images_to_push,
        )
        self._clients.context = opts.context
        if opts.validate_spec:
            self._validate_spec(req)
        return AppDryRunInfo(req, str)

    def _validate_spec(self, req: KubernetesJob) -> None:
        """The ``validate_spec`` checks: pod names fit the 63-character hostname limit, and the
        API server accepts the job (``dry_run="All"``: nothing is created)."""
        from torchx_core.schedulers.kubernetes._client import api_errors, kubernetes_client

        too_long = [n for n in _pod_names(req) if len(n) > MAX_POD_NAME_LEN]
        if too_long:
            raise KubernetesSpecError(
                f"Pod name {too_long[0]!r} ({len(too_long[0])} characters) exceeds 63 character"
                " limit (pods take it as their hostname); shorten the app or role name"
            )
        group, version, plural = _gvp(req.kind)
        client = kubernetes_client()
        try:
            with api_errors(f"validating {req.kind} {req.namespace}/{req.name}"):
                self._clients.custom().create_namespaced_custom_object(
                    group=group,
                    version=version,
                    namespace=req.namespace,
                    plural=plural,
                    body=req.resource,
                    dry_run="All",
                )
        except client.ApiException as e:
            if e.status in (400, 422):
                raise KubernetesSpecError(
                    f"Invalid job spec: the API server refused {req.kind} {req.name}: {e}; fix"
                    " the app (names, resources, overlays) or run with validate_spec=False"
                ) from e
            raise

    def schedule(self, dryrun_info: AppDryRunInfo[KubernetesJob]) -> str:
        from torchx_core.schedulers.kubernetes._client import api_errors, kubernetes_client, to_dict

        req = dryrun_info.request
        if req.images_to_push:
            self.push_images(req.images_to_push)
        group, version, plural = _gvp(req.kind)
        name = (req.resource.get("metadata") or {}).get("name", "")
        client = kubernetes_client()
        try:
            with api_errors(f"creating {req.kind} {req.namespace}/{name}"):
                resp = self._clients.custom().create_namespaced_custom_object(
                    group=group,
                    version=version,
                    namespace=req.namespace,
                    plural=plural,
                    body=req.resource,
                )
        except client.ApiException as e:
            if e.status == 409:
                existing = self._get_job_name_from_exception(e) or name
                raise KubernetesJobExistsError(
                    f"a {req.kind} named {existing!r} already exists in namespace {req.namespace};"
                    " submit again (the dry run picks a new unique name) or delete the old job"
                ) from e
            raise
        created = ((to_dict(resp) or {}).get("metadata") or {}).get("name") or name
        return f"{req.namespace}:{created}"

    def _get_job_name_from_exception(self, e: Any) -> str | None:
        """The job name in an ``ApiException``'s JSON body (``details.name``), as TorchX reads it
        for its conflict message; None (and an error logged) if the body does not hold one."""
        import json

        try:
            job_name = json.loads(e.body)["details"]["name"]
        except (TypeError, ValueError, KeyError) as err:
            logger.error("unable to retrieve the job name from the API error body: %s", err)
            return None
        return str(job_name)

    # -- inspection -------------------------------------------------------------------------

    def _get(self, app_id: str) -> tuple[str, dict[str, Any]] | None:
        """Finds the app's object: (kind, object) or None."""
        from torchx_core.schedulers.kubernetes._client import to_dict

        try:
            namespace, name = pods.parse_app_id(app_id)
        except InvalidAppIdError:
            return None  # no app can have this id
        calls = self._each_kind("get_namespaced_custom_object_status", namespace, name)
        for kind, missing, obj in calls:
            if not missing and obj is not None:
                return kind, to_dict(obj)
        return None

    def _each_kind(
        self, method: str, namespace: str, name: str, doing: str = "reading"
    ) -> Iterator[tuple[str, bool, Any]]:
        """Calls the custom-objects API ``method`` on the job ``namespace/name`` as each job kind,
        lazily: (kind, whether it answered 404, its answer)."""
        from torchx_core.schedulers.kubernetes._client import is_not_found

        call = getattr(self._clients.custom(), method)
        for kind in JOB_KINDS:
            group, version, plural = _gvp(kind)
            missing, obj = is_not_found(
                functools.partial(
                    call, group=group, version=version, namespace=namespace, plural=plural,
                    name=name,
                ),
                f"{doing} {kind} {namespace}/{name}",
            )  # fmt: skip
            yield kind, missing, obj

    def _pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self._clients.app_pods(namespace, pods.label_value(name), pods.LABEL_UNIQUE_NAME)

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        found = self._get(app_id)
        if found is None:
            return None
        kind, obj = found
        namespace, name = pods.parse_app_id(app_id)
        return self._describe_obj(app_id, kind, obj, self._pods(namespace, name))

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps: per namespace, one list by label per job kind and one pod
        list, whatever the number of apps."""
        from torchx_core.schedulers.kubernetes._client import api_errors, to_dict

        out: dict[str, DescribeAppResponse | None] = dict.fromkeys(app_ids)
        by_namespace: dict[str, dict[str, str]] = {}
        for app_id in out:
            try:
                namespace, name = pods.parse_app_id(app_id)
            except InvalidAppIdError:
                continue  # no app can have this id: None
            by_namespace.setdefault(namespace, {})[name] = app_id
        selector = f"{pods.LABEL_ORGANIZATION}={pods.MANAGED_BY}"
        custom = self._clients.custom()
        for namespace, names in by_namespace.items():
            found: dict[str, tuple[str, dict[str, Any]]] = {}
            for kind in JOB_KINDS:
                group, version, plural = _gvp(kind)
                with api_errors(f"listing {kind} jobs in {namespace}"):
                    resp = to_dict(
                        custom.list_namespaced_custom_object(
                            group, version, namespace, plural, label_selector=selector
                        )
                    )
                for obj in (resp or {}).get("items", []):
                    name = (obj.get("metadata") or {}).get("name", "")
                    if name in names:
                        found.setdefault(name, (kind, obj))
            if not found:
                continue
            app_pods: dict[str, list[dict[str, Any]]] = {}
            for pod in self._clients.app_pods(namespace, pods.MANAGED_BY, pods.LABEL_ORGANIZATION):
                label = ((pod.get("metadata") or {}).get("labels") or {}).get(
                    pods.LABEL_UNIQUE_NAME
                )
                app_pods.setdefault(label or "", []).append(pod)
            for name, (kind, obj) in found.items():
                out[names[name]] = self._describe_obj(
                    names[name], kind, obj, app_pods.get(pods.label_value(name), [])
                )
        return out

    def _describe_obj(
        self, app_id: str, kind: str, obj: dict[str, Any], app_pods: list[dict[str, Any]]
    ) -> DescribeAppResponse:
        state, restarts, msg = _volcano_state(obj) if kind == "volcano" else _jobset_state(obj)
        role_shape = _roles_of(kind, obj)
        replica_states = pods.replica_status_from_pods(app_pods)
        if kind == "volcano":
            # replicas whose pods are gone (or not listed yet): Volcano's per-task phase counts
            for key, task_state in _volcano_task_states(obj).items():
                replica_states.setdefault(key, (task_state, ""))
        roles_statuses = []
        for role_name, n in role_shape:
            replicas = []
            for i in range(n):
                rstate, host = replica_states.get((role_name, i), (_default_replica(state), ""))
                replicas.append(ReplicaStatus(id=i, state=rstate, role=role_name, hostname=host))
            roles_statuses.append(RoleStatus(role=role_name, replicas=replicas))
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=restarts,
            msg=msg,
            roles_statuses=roles_statuses,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        from torchx_core.schedulers.kubernetes._client import api_errors, to_dict

        opts = KubernetesOpts.from_cfg(dict(cfg or {}))
        opts.namespace = self._list_namespace(opts)
        by_kind: dict[str, builtins.list[ListAppResponse]] = {}
        custom = self._clients.custom()
        for kind in reversed(JOB_KINDS):  # Volcano last: its call is TorchX's (see _list_kwargs)
            group, version, plural = _gvp(kind)
            with api_errors(f"listing {kind} jobs in {opts.namespace}"):
                resp = to_dict(
                    custom.list_namespaced_custom_object(
                        group=group,
                        version=version,
                        namespace=opts.namespace,
                        plural=plural,
                        **_list_kwargs(kind),
                    )
                )
            by_kind[kind] = []
            for obj in (resp or {}).get("items", []):
                labels = (obj.get("metadata") or {}).get("labels") or {}
                if labels.get(pods.LABEL_ORGANIZATION) != pods.MANAGED_BY:
                    continue  # not launched by torchx
                state = (_volcano_state(obj) if kind == "volcano" else _jobset_state(obj))[0]
                meta = obj["metadata"]
                by_kind[kind].append(
                    ListAppResponse(
                        app_id=f"{meta.get('namespace', opts.namespace)}:{meta['name']}",
                        state=state,
                        name=labels.get(pods.LABEL_KUBE_APP_NAME, ""),
                    )
                )
        return [app for kind in JOB_KINDS for app in by_kind[kind]]

    def _list_namespace(self, opts: KubernetesOpts) -> str:
        """As :meth:`_namespace`; without a kubeconfig (in-cluster pods) ``default``."""
        from torchx_core.schedulers.kubernetes._client import kubernetes_client

        kubernetes_client()  # the package is needed from here on: a typed error if missing
        from kubernetes.config import ConfigException

        try:
            return self._namespace(opts)
        except ConfigException as e:
            logger.debug("no kubeconfig context (%s): listing namespace `default`", e)
            return opts.namespace or "default"

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
        from torchx_core.schedulers.kubernetes._client import api_errors

        require_combined_streams(streams, "kubernetes pod logs")
        namespace, name = pods.parse_app_id(app_id)
        replicas = pods.replica_status_from_pods(self._pods(namespace, name))
        pod_name = self._pod_name(namespace, name, role_name, k, replicas)
        kwargs: dict[str, Any] = {"follow": should_tail, "_preload_content": False}
        if until is not None:
            kwargs["timestamps"] = True
        if since is not None:
            delta = datetime.now(timezone.utc) - aware(since)
            kwargs["since_seconds"] = max(1, int(delta.total_seconds()))
        with api_errors(f"reading logs of pod {namespace}/{pod_name}"):
            resp = self._clients.core().read_namespaced_pod_log(pod_name, namespace, **kwargs)
        lines = response_lines(resp)
        if until is not None:
            lines = until_lines(lines, aware(until))
        return filter_regex(regex, lines) if regex else lines

    def _pod_name(
        self,
        namespace: str,
        name: str,
        role_name: str,
        k: int,
        replicas: Mapping[tuple[str, int], Any],
    ) -> str:
        for pod in self._pods(namespace, name):
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            rid = labels.get(
                pods.LABEL_REPLICA_ID,
                (meta.get("annotations") or {}).get(pods.JOB_COMPLETION_INDEX_ANNOTATION),
            )
            if labels.get(pods.LABEL_ROLE_NAME) == pods.label_value(role_name) and str(rid) == str(
                k
            ):
                pod_name: str = meta["name"]
                return pod_name
        known = sorted(f"{r}/{i}" for r, i in replicas)
        raise UnsupportedFeatureError(
            f"no pod for replica {role_name}/{k} of {namespace}:{name}; replicas with pods: {known}"
        )

    # -- lifecycle --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        from torchx_core.schedulers.kubernetes._client import api_errors

        found = self._get(app_id)
        if found is None:
            return
        kind, obj = found
        namespace, name = pods.parse_app_id(app_id)
        custom = self._clients.custom()
        if kind == "volcano":
            command: dict[str, Any] = {
                "apiVersion": f"{VOLCANO_BUS_GROUP}/{VOLCANO_VERSION}",
                "kind": "Command",
                "metadata": {
                    "generateName": f"{name[:50]}-abort-",
                    "namespace": namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
                            "kind": "Job",
                            "name": name,
                            "uid": (obj.get("metadata") or {}).get("uid", ""),
                            "controller": True,
                        }
                    ],
                },
                "action": "AbortJob",
                "target": {
                    "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
                    "kind": "Job",
                    "name": name,
                    "uid": (obj.get("metadata") or {}).get("uid", ""),
                },
            }
            command["metadata"]["name"] = f"{name[:50]}-abort-{secrets.token_hex(3)}"
            with api_errors(f"aborting Volcano job {namespace}/{name}"):
                custom.create_namespaced_custom_object(
                    VOLCANO_BUS_GROUP, VOLCANO_VERSION, namespace, VOLCANO_BUS_PLURAL, command
                )
        else:
            patch = {
                "metadata": {"annotations": {CANCELLED_ANNOTATION: "true"}},
                "spec": {"suspend": True},
            }
            with api_errors(f"suspending JobSet {namespace}/{name}"):
                custom.patch_namespaced_custom_object(
                    JOBSET_GROUP, JOBSET_VERSION, namespace, JOBSET_PLURAL, name, patch
                )

    # -- ownership (an annotation on the job object) -------------------------------------------

    def set_owner(self, app_id: str, owner: str) -> bool:
        """Records ``owner`` as the job object's ``torchx.pytorch.org/owner`` annotation."""
        from torchx_core.schedulers.kubernetes._client import api_errors

        found = self._get(app_id)
        if found is None:
            return False
        namespace, name = pods.parse_app_id(app_id)
        group, version, plural = _gvp(found[0])
        with api_errors(f"recording the owner of {found[0]} {namespace}/{name}"):
            self._clients.custom().patch_namespaced_custom_object(
                group, version, namespace, plural, name, pods.owner_patch(owner)
            )
        return True

    def submit_order(self, app_ids: Sequence[str]) -> builtins.list[str]:
        """Oldest job object first (``creationTimestamp``, ties in id order)."""
        return pods.by_creation(app_ids, lambda a: (self._get(a) or (None, None))[1])

    def get_owner(self, app_id: str) -> str | None:
        """The ``torchx.pytorch.org/owner`` annotation of the job object (None if unset)."""
        found = self._get(app_id)
        return None if found is None else pods.owner_of(found[1])

    def _delete_existing(self, app_id: str) -> None:
        namespace, name = pods.parse_app_id(app_id)
        calls = self._each_kind("delete_namespaced_custom_object", namespace, name, "deleting")
        for _kind, missing, _ in calls:  # the first kind that has the job; a 404 tries the next
            if not missing:
                return


def _pod_names(req: KubernetesJob) -> builtins.list[str]:
    """The longest pod name of each task (Volcano) or replicated job (JobSet) of ``req``."""
    name = req.name
    spec = req.resource.get("spec") or {}
    if req.kind == "volcano":
        return [f"{name}-{t.get('name', '')}-0" for t in spec.get("tasks") or []]
    return [
        f"{name}-{rj.get('name', '')}-0-{max(0, int(rj['template']['spec']['completions']) - 1)}"
        for rj in spec.get("replicatedJobs") or []
    ]


#: Seconds the API server may spend on a list call (TorchX's ``timeout_seconds``).
LIST_TIMEOUT_SECONDS = 30


def _list_kwargs(kind: str) -> dict[str, Any]:
    """The extra arguments of ``list``'s call per kind. Volcano: TorchX's call (every Volcano Job
    of the namespace, with ``timeout_seconds=30``; ``list`` keeps the ones torchx launched, by
    label). JobSet: the server selects torchx's by label."""
    if kind == "volcano":
        return {"timeout_seconds": LIST_TIMEOUT_SECONDS}
    return {"label_selector": f"{pods.LABEL_ORGANIZATION}={pods.MANAGED_BY}"}


def _gvp(kind: str) -> tuple[str, str, str]:
    if kind == "volcano":
        return VOLCANO_GROUP, VOLCANO_VERSION, VOLCANO_PLURAL
    return JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL


def create_scheduler(
    session_name: str,
    client: Any | None = None,
    docker_client: Any | None = None,
    **kwargs: Any,
) -> KubernetesScheduler:
    """Creates the ``kubernetes`` scheduler (``client``: an optional ``kubernetes`` ApiClient,
    ``docker_client``: an optional Docker client for workspace images)."""
    return KubernetesScheduler(
        session_name=session_name, client=client, docker_client=docker_client
    )
