"""The ``kubernetes_mcad`` scheduler: one app = one MCAD ``AppWrapper``.

The AppWrapper (``workload.codeflare.dev/v1beta1``) wraps one Pod per replica (built like the
``kubernetes`` scheduler's pods), a headless Service giving the pods DNS names
(``{pod}.{app_id}``), and optionally a coscheduling PodGroup. MCAD queues the wrapper until the
cluster can fit it (``priority``, requeuing options) and then creates the items. App ids are
``{namespace}:{name}``; ``cancel`` and ``delete`` remove the wrapper (and with it, its pods).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchx_core.schedulers.api import (
    DescribeAppResponse,
    InvalidAppIdError,
    ListAppResponse,
    Scheduler,
    StructuredOpts,
    UnsupportedFeatureError,
)
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes._client import KubeClients, resolve_namespace
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RetryPolicy,
    RoleStatus,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.specs.overlays import apply_overlay, get_overlay
from torchx_core.util.yaml_emitter import dump_yaml

logger: logging.Logger = logging.getLogger(__name__)

MCAD_GROUP, MCAD_VERSION, MCAD_PLURAL = "workload.codeflare.dev", "v1beta1", "appwrappers"
PODGROUP_API = "scheduling.sigs.k8s.io/v1alpha1"
RANK0_ENV = "TORCHX_RANK0_HOST"

# AppWrapper `status.state` -> AppState ("" is a wrapper MCAD has not looked at yet).
MCAD_STATES: dict[str, AppState] = {
    "": AppState.SUBMITTED,
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Deleted": AppState.CANCELLED,
}


@dataclass
class MCADOpts(StructuredOpts):
    """Run options of the ``kubernetes_mcad`` scheduler."""

    namespace: str | None = None
    """Kubernetes namespace (default: the kubeconfig context's namespace, else `default`)."""
    priority: int | None = None
    """AppWrapper priority (higher is dispatched first)."""
    requeue_seconds: int = 300
    """Seconds MCAD waits for all pods to run before requeuing the wrapper."""
    max_requeues: int = 0
    """How many times MCAD may requeue the wrapper (0: unlimited as MCAD defines it)."""
    coscheduler_name: str | None = None
    """Scheduler name of a coscheduling plugin; adds a PodGroup and gang-schedules the pods."""
    service_account: str | None = None
    """Service account the pods run as."""
    image_pull_secrets: list[str] | None = None
    """Secrets used to pull the images."""
    priority_class: str | None = None
    """Priority class of the pods."""
    context: str | None = None
    """kubeconfig context to use (default: the current context)."""


@dataclass
class AppWrapperRequest:
    """The request: one AppWrapper (and its wrapped items) to create in ``namespace``."""

    resource: dict[str, Any]
    namespace: str
    images: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return dump_yaml(self.resource)

    @property
    def name(self) -> str:
        name: str = self.resource["metadata"]["name"]
        return name


def app_wrapper(app: AppDef, app_id: str, opts: MCADOpts) -> dict[str, Any]:
    """Builds the AppWrapper for ``app``: one pod per replica, a Service, maybe a PodGroup."""
    pod_opts = pods.PodOptions(
        service_account=opts.service_account,
        image_pull_secrets=list(opts.image_pull_secrets or []),
        priority_class=opts.priority_class,
        scheduler_name=opts.coscheduler_name,
    )
    role0 = pods.dns_label(app.roles[0].name)
    extra_env = {RANK0_ENV: f"{app_id}-{role0}-0.{app_id}", "TORCHX_APP_ID": app_id}
    items: list[dict[str, Any]] = []
    total = 0
    for role_idx, role in enumerate(app.roles):
        if role.retry_policy != RetryPolicy.APPLICATION and role.max_retries:
            raise UnsupportedFeatureError(
                f"role `{role.name}` uses {role.retry_policy}; kubernetes_mcad retries only whole"
                " apps (RetryPolicy.APPLICATION, through MCAD requeuing)"
            )
        total += role.min_replicas if role.min_replicas is not None else role.num_replicas
        role_name = pods.dns_label(role.name)
        role_labels = pods.role_labels(app.name, app_id, role_idx, role)
        if opts.coscheduler_name:
            role_labels["scheduling.x-k8s.io/pod-group"] = app_id
        for pod in pods.replica_pods(
            role,
            values_of=lambda i: macros.Values(
                img_root="", app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV
            ),
            name_of=pods.replica_names(f"{app_id}-{role_name}"),
            labels_of=pods.replica_labels(role_labels),
            opts=pod_opts,
            extra_env=extra_env,
            subdomain=app_id,
        ):
            pod["metadata"]["namespace"] = opts.namespace
            items.append({"replicas": 1, "generictemplate": pod})
    items.append({"replicas": 1, "generictemplate": _service(app, app_id, opts.namespace)})
    if opts.coscheduler_name:
        items.append({"replicas": 1, "generictemplate": _pod_group(app, app_id, opts, total)})
    spec: dict[str, Any] = {
        "schedulingSpec": {
            "minAvailable": total,
            "requeuing": {
                "timeInSeconds": opts.requeue_seconds,
                "maxNumRequeuings": opts.max_requeues,
            },
        },
        "resources": {"GenericItems": items},
    }
    if opts.priority is not None:
        spec["priority"] = opts.priority
    wrapper = {
        "apiVersion": f"{MCAD_GROUP}/{MCAD_VERSION}",
        "kind": "AppWrapper",
        "metadata": {
            "name": app_id,
            "namespace": opts.namespace,
            "labels": pods.object_labels(app.name, app_id),
        },
        "spec": spec,
    }
    overlay = get_overlay(app, "kubernetes_mcad", "AppWrapper")
    if overlay:
        apply_overlay(wrapper, overlay)
    return wrapper


def _service(app: AppDef, app_id: str, namespace: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": app_id,
            "namespace": namespace,
            "labels": pods.object_labels(app.name, app_id),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {pods.LABEL_UNIQUE_NAME: pods.label_value(app_id)},
        },
    }


def _pod_group(app: AppDef, app_id: str, opts: MCADOpts, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {
            "name": app_id,
            "namespace": opts.namespace,
            "labels": pods.object_labels(app.name, app_id),
        },
        "spec": {"minMember": min_member},
    }


class KubernetesMCADScheduler(Scheduler[AppWrapperRequest]):
    """Runs apps on Kubernetes through MCAD AppWrappers (see the module docstring).

    Args:
        session_name: the runner session name.
        client: a ``kubernetes.client.ApiClient``; by default built from the kubeconfig.
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates

    def __init__(self, session_name: str, client: Any | None = None) -> None:
        super().__init__("kubernetes_mcad", session_name)
        self._clients = KubeClients(client)

    def close(self) -> None:
        self._clients.close()

    def _run_opts(self) -> runopts:
        return MCADOpts.as_runopts()

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[AppWrapperRequest]:
        opts = MCADOpts.from_cfg(cfg)
        opts.namespace = resolve_namespace(opts.namespace, opts.context)
        self._clients.context = opts.context
        app_id = pods.unique_name(app.name)
        req = AppWrapperRequest(
            resource=app_wrapper(app, app_id, opts),
            namespace=opts.namespace,
            images=sorted({r.image for r in app.roles}),
        )
        return AppDryRunInfo(req, str)

    def schedule(self, dryrun_info: AppDryRunInfo[AppWrapperRequest]) -> str:
        from torchx_core.schedulers.kubernetes._client import api_errors

        req = dryrun_info.request
        with api_errors(f"creating AppWrapper {req.namespace}/{req.name}"):
            self._clients.custom().create_namespaced_custom_object(
                MCAD_GROUP, MCAD_VERSION, req.namespace, MCAD_PLURAL, req.resource
            )
        return f"{req.namespace}:{req.name}"

    def _get(self, app_id: str) -> dict[str, Any] | None:
        from torchx_core.schedulers.kubernetes._client import is_not_found, to_dict

        try:
            namespace, name = pods.parse_app_id(app_id)
        except InvalidAppIdError:
            return None  # no app can have this id
        custom = self._clients.custom()
        missing, obj = is_not_found(
            lambda: custom.get_namespaced_custom_object(
                MCAD_GROUP, MCAD_VERSION, namespace, MCAD_PLURAL, name
            )
        )
        return None if missing else to_dict(obj)

    def describe(self, app_id: str) -> DescribeAppResponse | None:

        obj = self._get(app_id)
        if obj is None:
            return None
        namespace, name = pods.parse_app_id(app_id)
        status = obj.get("status") or {}
        state = MCAD_STATES.get(status.get("state") or "", AppState.UNKNOWN)
        mine = self._clients.app_pods(namespace, pods.label_value(name), pods.LABEL_UNIQUE_NAME)
        replica_states = pods.replica_status_from_pods(mine)
        shape: dict[str, int] = {}
        for item in ((obj.get("spec") or {}).get("resources") or {}).get("GenericItems") or []:
            tmpl = item.get("generictemplate") or {}
            if tmpl.get("kind") != "Pod":
                continue
            role = ((tmpl.get("metadata") or {}).get("labels") or {}).get(pods.LABEL_ROLE_NAME, "")
            shape[role] = shape.get(role, 0) + 1
        roles_statuses = []
        for role, n in shape.items():
            replicas = []
            for i in range(n):
                default = state if is_terminal(state) else AppState.PENDING
                rstate, host = replica_states.get((role, i), (default, ""))
                replicas.append(ReplicaStatus(id=i, state=rstate, role=role, hostname=host))
            roles_statuses.append(RoleStatus(role=role, replicas=replicas))
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=int(status.get("numberOfRequeueings") or 0),
            msg=str(status.get("message") or ""),
            roles_statuses=roles_statuses,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        from torchx_core.schedulers.kubernetes._client import api_errors, to_dict

        opts = MCADOpts.from_cfg(dict(cfg or {}))
        opts.namespace = resolve_namespace(opts.namespace, opts.context)
        with api_errors(f"listing AppWrappers in {opts.namespace}"):
            resp = to_dict(
                self._clients.custom().list_namespaced_custom_object(
                    MCAD_GROUP,
                    MCAD_VERSION,
                    opts.namespace,
                    MCAD_PLURAL,
                    label_selector=f"{pods.LABEL_ORGANIZATION}={pods.MANAGED_BY}",
                )
            )
        out = []
        for obj in (resp or {}).get("items", []):
            meta = obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            if labels.get(pods.LABEL_ORGANIZATION) != pods.MANAGED_BY:
                continue
            state = MCAD_STATES.get((obj.get("status") or {}).get("state") or "", AppState.UNKNOWN)
            out.append(
                ListAppResponse(
                    app_id=f"{meta.get('namespace', opts.namespace)}:{meta['name']}",
                    state=state,
                    name=labels.get(pods.LABEL_KUBE_APP_NAME, ""),
                )
            )
        return out

    def set_owner(self, app_id: str, owner: str) -> bool:
        """Records ``owner`` as the AppWrapper's ``torchx.pytorch.org/owner`` annotation."""
        from torchx_core.schedulers.kubernetes._client import api_errors

        if self._get(app_id) is None:
            return False
        namespace, name = pods.parse_app_id(app_id)
        with api_errors(f"recording the owner of AppWrapper {namespace}/{name}"):
            self._clients.custom().patch_namespaced_custom_object(
                MCAD_GROUP, MCAD_VERSION, namespace, MCAD_PLURAL, name, pods.owner_patch(owner)
            )
        return True

    def submit_order(self, app_ids: Sequence[str]) -> builtins.list[str]:
        """Oldest AppWrapper first (``creationTimestamp``, ties in id order)."""
        return pods.by_creation(app_ids, self._get)

    def get_owner(self, app_id: str) -> str | None:
        """The ``torchx.pytorch.org/owner`` annotation of the AppWrapper (None if unset)."""
        obj = self._get(app_id)
        return None if obj is None else pods.owner_of(obj)

    def _cancel_existing(self, app_id: str) -> None:
        self._delete_existing(app_id)

    def _delete_existing(self, app_id: str) -> None:
        from torchx_core.schedulers.kubernetes._client import is_not_found

        namespace, name = pods.parse_app_id(app_id)
        custom = self._clients.custom()
        is_not_found(
            lambda: custom.delete_namespaced_custom_object(
                MCAD_GROUP, MCAD_VERSION, namespace, MCAD_PLURAL, name
            )
        )


def create_scheduler(
    session_name: str, client: Any | None = None, **kwargs: Any
) -> KubernetesMCADScheduler:
    """Creates the ``kubernetes_mcad`` scheduler (``client``: an optional kubernetes ApiClient)."""
    return KubernetesMCADScheduler(session_name=session_name, client=client)
