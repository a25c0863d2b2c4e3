"""TorchX's public Kubernetes builders, returning ``kubernetes.client`` model objects.

TorchX users call ``role_to_pod`` (a ``V1Pod``) and ``app_to_resource`` (a Volcano Job dict whose
task templates are ``V1Pod`` objects) to inspect or post-process a job before creating it
themselves. These build TorchX's layout (one container per pod whose ``command`` is the
entrypoint plus the args; rank 0 found through Volcano's ``VC_<ROLE>_0_HOSTS``) from the same
resource, mount, env and label rules as this package's scheduler. The scheduler itself submits
the plain-dict request of :mod:`torchx_core.schedulers.kubernetes.scheduler`, which needs no
``kubernetes`` package for a dry run.

The ``kubernetes`` package is imported only when a builder is called.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from typing import Any

from torchx_core.schedulers.api import UnsupportedFeatureError
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes._client import kubernetes_client
from torchx_core.specs import AppDef, BindMount, DeviceMount, RetryPolicy, Role, VolumeMount, macros
from torchx_core.specs.overlays import apply_overlay, get_overlay
from torchx_core.util.strings import normalize_str

#: Volcano task policies per retry policy (replica retries are Volcano's per-task ``maxRetry``)
RETRY_POLICIES: Mapping[RetryPolicy, list[dict[str, str]]] = {
    RetryPolicy.REPLICA: [],
    RetryPolicy.APPLICATION: [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ],
}


def sanitize_for_serialization(obj: object) -> Any:
    """``obj`` (model objects, nested in dicts and lists) as JSON-able data with API field names."""
    return kubernetes_client().ApiClient().sanitize_for_serialization(obj)


def to_model(data: Any, klass: str) -> Any:
    """Builds the model ``klass`` (e.g. ``"V1Pod"``) from API-shaped data (camelCase keys)."""
    response = types.SimpleNamespace(data=json.dumps(data))
    return kubernetes_client().ApiClient().deserialize(response, klass)


class PodTemplate(dict[str, Any]):
    """A pod template of the scheduler's request: a plain dict (API field names, what is sent and
    printed) that also reads as TorchX's ``V1Pod`` (``template.spec.node_selector``).

    Attribute reads build the ``V1Pod`` from the dict's current content on each access (they
    need the ``kubernetes`` package), so they are a read-only view: change the dict, not the
    model object an attribute returns.
    """

    #: The ``V1Pod`` fields read as attributes; any other name is a plain dict's AttributeError
    #: (so ``hasattr`` probes, ``to_dict`` included, see a dict and import nothing).
    MODEL_FIELDS = frozenset({"api_version", "kind", "metadata", "spec", "status"})

    def __getattr__(self, name: str) -> Any:
        if name not in PodTemplate.MODEL_FIELDS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(to_model(self, "V1Pod"), name)


def apply_pod_overlay(pod: Any, overlay: dict[str, Any]) -> None:
    """Applies ``overlay`` (API field names, :mod:`torchx_core.specs.overlays` rules) to ``pod``.

    The pod's ``spec`` and ``metadata`` are replaced by the merged ones; ``overlay`` is not
    changed.
    """
    data = sanitize_for_serialization(pod)
    apply_overlay(data, overlay)
    merged = to_model(data, "V1Pod")
    pod.spec = merged.spec
    pod.metadata = merged.metadata


def pod_labels(
    app: AppDef, role_idx: int, role: Role, replica_id: int, app_id: str
) -> dict[str, str]:
    """The labels of the pod of replica ``replica_id`` of ``role`` (TorchX's label set).

    Values are cleaned as label values: characters outside ``[A-Za-z0-9_.-]`` become ``.`` (as
    in TorchX), non-alphanumeric ends are dropped (TorchX keeps a ``.`` there, which the API
    server refuses), at most 63 characters.
    """
    return {
        **pods.role_labels(app.name, app_id, role_idx, role),
        pods.LABEL_REPLICA_ID: str(replica_id),
    }


def _volumes(role: Role) -> tuple[list[Any], list[Any], bool]:
    """(V1Volume list, V1VolumeMount list, privileged) for ``/dev/shm`` and the role's mounts."""
    m = kubernetes_client()
    volumes = [m.V1Volume(name="dshm", empty_dir=m.V1EmptyDirVolumeSource(medium="Memory"))]
    mounts = [m.V1VolumeMount(name="dshm", mount_path="/dev/shm")]
    privileged = False
    for i, mount in enumerate(role.mounts):
        name = f"mount-{i}"
        if isinstance(mount, BindMount):
            source = {"host_path": m.V1HostPathVolumeSource(path=mount.src_path)}
            read_only = mount.read_only
        elif isinstance(mount, VolumeMount):
            claim = m.V1PersistentVolumeClaimVolumeSource(claim_name=mount.src)
            source = {"persistent_volume_claim": claim}
            read_only = mount.read_only
        elif isinstance(mount, DeviceMount):
            source = {"host_path": m.V1HostPathVolumeSource(path=mount.src_path)}
            read_only = not ({"w", "m"} & set(mount.permissions))
            privileged = True  # device access needs a privileged container
        else:
            raise TypeError(
                f"unknown mount type {type(mount).__name__} in role `{role.name}`; use"
                " specs.BindMount, specs.VolumeMount or specs.DeviceMount"
            )
        volumes.append(m.V1Volume(name=name, **source))
        mounts.append(m.V1VolumeMount(name=name, mount_path=mount.dst_path, read_only=read_only))
    return volumes, mounts, privileged


def _env(env: Mapping[str, str]) -> list[Any]:
    """``env`` as V1EnvVar objects (a ``PLACEHOLDER_FIELD_PATH`` value becomes a fieldRef)."""
    m = kubernetes_client()
    out = []
    for entry in pods.env_list(env):
        ref = (entry.get("valueFrom") or {}).get("fieldRef")
        if ref:
            source = m.V1EnvVarSource(
                field_ref=m.V1ObjectFieldSelector(field_path=ref["fieldPath"])
            )
            out.append(m.V1EnvVar(name=entry["name"], value_from=source))
        else:
            out.append(m.V1EnvVar(name=entry["name"], value=entry["value"]))
    return out


def role_to_pod(
    name: str,
    role: Role,
    service_account: str | None,
    reserved_millicpu: int = pods.RESERVED_MILLICPU,
    reserved_memmb: int = pods.RESERVED_MEMMB,
    efa_device_count: int | None = None,
) -> Any:
    """A ``V1Pod`` running ``role`` (macros already applied) in one container named ``name``.

    Limits are the role's resource; requests are less the node's reserve
    (``reserved_millicpu``, ``reserved_memmb``); ``efa_device_count`` overrides the EFA device
    count (0 removes it). The node selector holds the ``node.kubernetes.io/instance-type``
    capability if set; ``/dev/shm`` is a memory-backed volume.
    """
    m = kubernetes_client()
    requirements = pods.resource_requirements(
        role, reserved_millicpu, reserved_memmb, efa_device_count
    )
    volumes, volume_mounts, privileged = _volumes(role)
    caps = role.resource.capabilities or {}
    selector = (
        {pods.LABEL_INSTANCE_TYPE: caps[pods.LABEL_INSTANCE_TYPE]}
        if pods.LABEL_INSTANCE_TYPE in caps
        else {}
    )
    container = m.V1Container(
        command=[role.entrypoint, *role.args],
        image=role.image,
        name=name,
        env=_env(role.env),
        resources=m.V1ResourceRequirements(
            limits=requirements.get("limits", {}), requests=requirements.get("requests", {})
        ),
        ports=[
            m.V1ContainerPort(name=port_name, container_port=port)
            for port_name, port in role.port_map.items()
        ],
        volume_mounts=volume_mounts,
        security_context=m.V1SecurityContext(privileged=True)
        if privileged
        else m.V1SecurityContext(),
    )
    return m.V1Pod(
        spec=m.V1PodSpec(
            containers=[container],
            restart_policy="Never",
            service_account_name=service_account,
            volumes=volumes,
            node_selector=selector,
        ),
        metadata=m.V1ObjectMeta(annotations={pods.ANNOTATION_ISTIO_SIDECAR: "false"}, labels={}),
    )


def _task(
    app: AppDef, app_id: str, role_idx: int, role: Role, replica_id: int, pod_args: dict[str, Any]
) -> dict[str, Any]:
    """The Volcano task of one replica (its pod as a ``V1Pod`` template)."""
    rank0 = role_idx == 0 and replica_id == 0
    rank0_env = (
        "TORCHX_RANK0_HOST" if rank0 else f"VC_{normalize_str(app.roles[0].name)}_0_HOSTS".upper()
    )
    values = macros.Values(
        img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=rank0_env
    )
    name = normalize_str(f"{role.name}-{replica_id}")
    replica_role = values.apply(role)
    if rank0:
        replica_role.env["TORCHX_RANK0_HOST"] = "localhost"
    replica_role.env["TORCHX_IMAGE"] = replica_role.image
    pod = role_to_pod(name, replica_role, **pod_args)
    overlay = get_overlay(role, "kubernetes", "V1Pod")
    if overlay:
        apply_pod_overlay(pod, overlay)
    pod.metadata.labels.update(pod_labels(app, role_idx, role, replica_id, app_id))
    task: dict[str, Any] = {"replicas": 1, "name": name, "template": pod}
    if role.max_retries > 0:
        task["maxRetry"] = role.max_retries
        task["policies"] = RETRY_POLICIES[role.retry_policy]
    if role.min_replicas is not None:
        task["minAvailable"] = 1 if replica_id < role.min_replicas else 0  # the first are required
    return task


def volcano_resource(
    app: AppDef,
    app_id: str,
    queue: str,
    service_account: str | None,
    priority_class: str | None = None,
    reserved_millicpu: int = pods.RESERVED_MILLICPU,
    reserved_memmb: int = pods.RESERVED_MEMMB,
    efa_device_count: int | None = None,
) -> dict[str, Any]:
    """A Volcano Job named ``app_id`` with one task per replica (TorchX's ``app_to_resource``).

    Job retries are the smallest ``max_retries`` of the roles; ``RetryPolicy.ROLE`` cannot be
    expressed and raises :class:`UnsupportedFeatureError`.
    """
    for role in app.roles:
        if role.retry_policy not in RETRY_POLICIES:
            raise UnsupportedFeatureError(
                f"role `{role.name}` uses {role.retry_policy}, which a Volcano job cannot express;"
                " use RetryPolicy.APPLICATION or RetryPolicy.REPLICA"
            )
    pod_args = {
        "service_account": service_account,
        "reserved_millicpu": reserved_millicpu,
        "reserved_memmb": reserved_memmb,
        "efa_device_count": efa_device_count,
    }
    tasks = [
        _task(app, app_id, role_idx, role, replica_id, pod_args)
        for role_idx, role in enumerate(app.roles)
        for replica_id in range(role.num_replicas)
    ]
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "tasks": tasks,
        "maxRetry": min((role.max_retries for role in app.roles), default=0),
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": app_id},
        "spec": spec,
    }
