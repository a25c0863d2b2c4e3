"""Pod construction shared by the Kubernetes-based schedulers (``kubernetes``, ``kubernetes_mcad``).

Everything here builds plain JSON-able dicts in the shape of the Kubernetes API objects (camelCase
keys, quantities as strings), so dry runs need no ``kubernetes`` package and the objects can be
validated against the Kubernetes OpenAPI schemas as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import InvalidAppIdError
from torchx_core.specs import (
    AppState,
    BindMount,
    DeviceMount,
    Role,
    VolumeMount,
    macros,
)
from torchx_core.specs.errors import InvalidOverlayError
from torchx_core.specs.overlays import JOIN, apply_overlay, get_overlay, validate_overlay

# Labels put on every object we create, as TorchX sets them on its pods (selectors written for
# TorchX jobs keep matching); `list` selects by managed-by, `describe` by instance (= app id).
LABEL_VERSION = "torchx.pytorch.org/version"
LABEL_APP_NAME = "torchx.pytorch.org/app-name"
LABEL_ROLE_INDEX = "torchx.pytorch.org/role-index"
LABEL_ROLE_NAME = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID = "torchx.pytorch.org/replica-id"
LABEL_KUBE_APP_NAME = "app.kubernetes.io/name"
LABEL_ORGANIZATION = "app.kubernetes.io/managed-by"
LABEL_UNIQUE_NAME = "app.kubernetes.io/instance"
MANAGED_BY = "torchx.pytorch.org"
# Istio's sidecar keeps a pod running after its container ended: TorchX disables it on its pods.
ANNOTATION_ISTIO_SIDECAR = "sidecar.istio.io/inject"
# the attempt that owns the app (see torchx_core.runner.lifecycle), on the app's job object
OWNER_ANNOTATION = "torchx.pytorch.org/owner"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"

# Kubernetes keeps some cpu and memory of every node for itself; TorchX sizes jobs as whole
# hosts, so a container requests this much less than its limit (run options override them).
RESERVED_MILLICPU = 100
RESERVED_MEMMB = 1024
EFA_DEVICE = "vpc.amazonaws.com/efa"

# Annotation the Job controller sets on pods of an indexed Job.
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

GPU_RESOURCE = "nvidia.com/gpu"
# Capabilities keys of a Resource that become node selectors.
NODE_SELECTOR_CAPABILITIES = (
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.product",
)
# Fields set through Role attributes: an overlay must not set them (set the Role field instead).
POD_OVERLAY_BLOCKLIST = ["containers"]
#: The one way a ``V1Pod`` overlay may touch ``spec.containers`` (as TorchX users add probes):
#: merge fields into the pod's container, found by name.
CONTAINER_JOIN = JOIN("containers", on="name")
#: Container fields that come from Role attributes: a ``CONTAINER_JOIN`` entry must not set them.
ROLE_CONTAINER_FIELDS = ("image", "command", "args", "env", "resources", "ports", "volumeMounts")

# Pod phases -> replica state.
POD_PHASE_STATES: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}

_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def dns_label(name: str, max_len: int = 63) -> str:
    """Lower-cases ``name`` into a valid DNS-1123 label (``a-z0-9-``, alphanumeric at both ends)."""
    s = _DNS_LABEL.sub("-", name.lower()).strip("-")
    s = s[:max_len].strip("-")
    return s or "x"


#: Object names are DNS-1123 labels: lowercase letters, digits and ``-``, at most 63.
NAME_RULES = IdRules(allowed="a-z0-9-", max_name_len=43, lower=True, suffix_len=10, fallback="x")


def unique_name(app_name: str) -> str:
    """A DNS-safe unique object name: the app name (trimmed) plus a random suffix."""
    return unique_id(app_name, NAME_RULES)


def label_value(value: str) -> str:
    """Makes ``value`` a valid label value (63 chars of ``[A-Za-z0-9_.-]``, alphanumeric ends).

    Each other character becomes ``.``, as TorchX cleans its pod labels (selectors written for
    TorchX jobs keep matching).

    >>> label_value("foo+bar"), label_value("0.8.0dev0+fb"), label_value("/a b/")
    ('foo.bar', '0.8.0dev0.fb', 'a.b')
    """
    s = re.sub(r"[^A-Za-z0-9_.-]", ".", value)[:63]
    return s.strip("_.-")


def owner_patch(owner: str) -> dict[str, Any]:
    """The merge patch that records ``owner`` on a job object (:data:`OWNER_ANNOTATION`)."""
    return {"metadata": {"annotations": {OWNER_ANNOTATION: owner}}}


def by_creation(app_ids: Sequence[str], get: Callable[[str], dict[str, Any] | None]) -> list[str]:
    """``app_ids`` oldest first by their object's ``creationTimestamp`` (``get`` reads the
    object; one second resolution, ties in id order; objects that are gone sort last)."""

    def key(app_id: str) -> tuple[int, str, str]:
        obj = get(app_id)
        created = str(((obj or {}).get("metadata") or {}).get("creationTimestamp") or "")
        return (0 if created else 1, created, app_id)

    return sorted(app_ids, key=key)


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """The owner recorded on a job object by :func:`owner_patch` (None if unset)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(OWNER_ANNOTATION) or None


def env_var_name(name: str) -> str:
    """Upper-cases ``name`` into a valid environment variable name (``VC_<TASK>_HOSTS`` style)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def object_labels(app_name: str, app_id: str) -> dict[str, str]:
    """Labels shared by every object of one app (``app.kubernetes.io/instance`` = the app id)."""
    return {
        LABEL_KUBE_APP_NAME: label_value(app_name),
        LABEL_ORGANIZATION: MANAGED_BY,
        LABEL_UNIQUE_NAME: label_value(app_id),
    }


def role_labels(app_name: str, app_id: str, role_idx: int, role: Role) -> dict[str, str]:
    """Labels of the pods of one role: TorchX's pod labels (the replica id is added per pod)."""
    from torchx_core import __version__

    return {
        LABEL_VERSION: label_value(__version__),
        LABEL_APP_NAME: label_value(app_name),
        LABEL_ROLE_INDEX: str(role_idx),
        LABEL_ROLE_NAME: label_value(role.name),
        **object_labels(app_name, app_id),
    }


def parse_app_id(app_id: str) -> tuple[str, str]:
    """Splits a ``namespace:name`` app id; a bare name means the ``default`` namespace."""
    namespace, sep, name = app_id.partition(":")
    if not sep:
        return "default", app_id
    if not namespace or not name:
        raise InvalidAppIdError(
            f"invalid Kubernetes app id {app_id!r}; expected `<namespace>:<name>` (as returned by"
            " `torchx run`), e.g. `default:my-app-1a2b3c4d5e`",
            app_id,
        )
    return namespace, name


def cpu_quantity(cpu: float) -> str:
    """CPU cores as a quantity string (millicores below one core)."""
    milli = round(cpu * 1000)
    return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"


def resource_requirements(
    role: Role,
    reserved_millicpu: int = RESERVED_MILLICPU,
    reserved_memmb: int = RESERVED_MEMMB,
    efa_device_count: int | None = None,
) -> dict[str, Any]:
    """The container's ``resources`` from ``role.resource``, as TorchX computes them.

    Limits are the resource (cpu in millicores, memory in ``M``); requests are the limits less
    the node's reserve (``reserved_millicpu``, ``reserved_memmb``), so a pod sized to a whole
    node (e.g. ``aws_p4d.24xlarge``) fits next to the kubelet. GPUs are requested and limited
    alike; devices (EFA, Neuron) are limits only. ``efa_device_count`` overrides the EFA count
    (0 removes it).
    """
    res = role.resource
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if res.cpu is not None and res.cpu > 0:
        mcpu = int(res.cpu * 1000)
        limits["cpu"] = f"{mcpu}m"
        requests["cpu"] = f"{max(mcpu - reserved_millicpu, 0)}m"
    if res.memMB is not None and res.memMB > 0:
        limits["memory"] = f"{int(res.memMB)}M"
        requests["memory"] = f"{max(int(res.memMB) - reserved_memmb, 0)}M"
    if res.gpu is not None and res.gpu > 0:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(int(res.gpu))
    for device, count in (res.devices or {}).items():
        limits[device] = str(int(count))
    if efa_device_count is not None:
        if efa_device_count == 0:
            limits.pop(EFA_DEVICE, None)
        else:
            limits[EFA_DEVICE] = str(efa_device_count)
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def node_selector(role: Role) -> dict[str, str]:
    """Node selectors from the resource's capabilities."""
    caps = role.resource.capabilities or {}
    return {k: str(caps[k]) for k in NODE_SELECTOR_CAPABILITIES if k in caps}


def tolerations(role: Role) -> list[dict[str, Any]]:
    """Tolerations: GPU pods tolerate the usual GPU taint; more come from capabilities."""
    out: list[dict[str, Any]] = []
    if role.resource.gpu and role.resource.gpu > 0:
        out.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    extra = (role.resource.capabilities or {}).get("tolerations")
    if isinstance(extra, list):
        out.extend(dict(t) for t in extra if isinstance(t, Mapping))
    return out


def volumes_and_mounts(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """Returns (volumes, volumeMounts, privileged) for the role's mounts plus ``/dev/shm``."""
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    privileged = False
    for i, m in enumerate(role.mounts):
        name = f"mount-{i}"
        if isinstance(m, BindMount):
            volumes.append({"name": name, "hostPath": {"path": m.src_path}})
            mounts.append({"name": name, "mountPath": m.dst_path, "readOnly": m.read_only})
        elif isinstance(m, VolumeMount):
            volumes.append(
                {
                    "name": name,
                    "persistentVolumeClaim": {"claimName": m.src, "readOnly": m.read_only},
                }
            )
            mounts.append({"name": name, "mountPath": m.dst_path, "readOnly": m.read_only})
        elif isinstance(m, DeviceMount):
            volumes.append({"name": name, "hostPath": {"path": m.src_path}})
            mounts.append(
                {"name": name, "mountPath": m.dst_path, "readOnly": "w" not in m.permissions}
            )
            privileged = True  # device access needs a privileged container
    return volumes, mounts, privileged


@dataclass
class PodOptions:
    """Pod-level settings that come from run options rather than from the Role."""

    service_account: str | None = None
    image_pull_secrets: list[str] = field(default_factory=list)
    priority_class: str | None = None
    image_pull_policy: str | None = None
    scheduler_name: str | None = None
    reserved_millicpu: int = RESERVED_MILLICPU
    reserved_memmb: int = RESERVED_MEMMB
    efa_device_count: int | None = None


#: an env value ``f"{PLACEHOLDER_FIELD_PATH}status.podIP"`` becomes a ``valueFrom.fieldRef`` of the
#: pod field ``status.podIP`` (TorchX's marker)
PLACEHOLDER_FIELD_PATH = "[FIELD_PATH]"


def env_var(name: str, value: object) -> dict[str, Any]:
    """One entry of a container's ``env``: a value, or a pod field (``PLACEHOLDER_FIELD_PATH``)."""
    text = str(value)
    if text.startswith(PLACEHOLDER_FIELD_PATH):
        field_path = text[len(PLACEHOLDER_FIELD_PATH) :]
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}
    return {"name": name, "value": text}


def env_list(
    env: Mapping[str, str], first: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Turns an env mapping into the API's list of ``{name, value}`` (``first`` entries first).

    >>> env_list({"A": "1", "IP": PLACEHOLDER_FIELD_PATH + "status.podIP"})[1]["valueFrom"]
    {'fieldRef': {'fieldPath': 'status.podIP'}}
    """
    out = list(first or [])
    out.extend(env_var(k, v) for k, v in env.items())
    return out


def _pod_overlay_spec(role: Role) -> dict[str, Any]:
    """The ``spec`` part of the role's ``kubernetes``/``V1Pod`` overlay ({} if none)."""
    overlay = get_overlay(role, "kubernetes", "V1Pod") or {}
    spec = overlay.get("spec")
    return spec if isinstance(spec, dict) else {}


def check_container_join(entries: Any, container_names: Sequence[str]) -> None:
    """Checks a ``CONTAINER_JOIN`` overlay: each entry names a container of the pod and sets no
    field a Role attribute sets. Raises one InvalidOverlayError listing every problem."""
    if not isinstance(entries, list):
        raise InvalidOverlayError(
            f"V1Pod.spec overlay JOIN('containers', on='name') takes a list of containers, got"
            f" {entries!r}"
        )
    problems = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if name not in container_names:
            problems.append(
                f"{entry!r} names no container of the pod (containers: {list(container_names)});"
                " an overlay merges into the role's container, it cannot add one"
            )
            continue
        owned = sorted(k for k in entry if k in ROLE_CONTAINER_FIELDS)
        if owned:
            problems.append(
                f"the entry for container {name!r} sets {owned}, which come from the Role"
                " (image, entrypoint, args, env, resource, port_map, mounts): set them there"
            )
    if problems:
        raise InvalidOverlayError("V1Pod.spec overlay JOIN('containers'): " + "; ".join(problems))


def role_to_pod(
    role: Role,
    name: str,
    labels: Mapping[str, str],
    opts: PodOptions,
    extra_env: Mapping[str, str] | None = None,
    env_first: list[dict[str, Any]] | None = None,
    restart_policy: str = "Never",
    hostname: str | None = None,
    subdomain: str | None = None,
    container_name: str | None = None,
) -> dict[str, Any]:
    """Builds a ``v1.Pod`` (as a dict) running one replica of ``role``.

    ``role`` must already have its macros substituted. Its container is ``container_name``
    (default: the role's name as a DNS label). The ``kubernetes``/``V1Pod`` overlay of the role
    is applied last; it may merge fields into the container (``CONTAINER_JOIN``), not replace it.
    """
    volumes, volume_mounts, privileged = volumes_and_mounts(role)
    container: dict[str, Any] = {
        "name": container_name or dns_label(role.name),
        "image": role.image,
        "command": [role.entrypoint],
        "args": list(role.args),
        "env": env_list({**role.env, **(extra_env or {})}, env_first),
        "volumeMounts": volume_mounts,
    }
    resources = resource_requirements(
        role, opts.reserved_millicpu, opts.reserved_memmb, opts.efa_device_count
    )
    if resources:
        container["resources"] = resources
    if role.port_map:
        container["ports"] = [
            {"name": dns_label(port_name, 15), "containerPort": int(port)}
            for port_name, port in role.port_map.items()
        ]
    if privileged:
        container["securityContext"] = {"privileged": True}
    if opts.image_pull_policy:
        container["imagePullPolicy"] = opts.image_pull_policy

    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "volumes": volumes,
    }
    if opts.service_account:
        spec["serviceAccountName"] = opts.service_account
    if opts.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in opts.image_pull_secrets]
    if opts.priority_class:
        spec["priorityClassName"] = opts.priority_class
    if opts.scheduler_name:
        spec["schedulerName"] = opts.scheduler_name
    selector = node_selector(role)
    if selector:
        spec["nodeSelector"] = selector
    tols = tolerations(role)
    if tols:
        spec["tolerations"] = tols
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain

    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels),
            "annotations": {ANNOTATION_ISTIO_SIDECAR: "false"},
        },
        "spec": spec,
    }
    overlay = get_overlay(role, "kubernetes", "V1Pod")
    if overlay:
        spec_overlay = _pod_overlay_spec(role)
        if CONTAINER_JOIN in spec_overlay:
            check_container_join(
                spec_overlay[CONTAINER_JOIN], [c["name"] for c in spec["containers"]]
            )
        validate_overlay(
            {k: v for k, v in spec_overlay.items() if k != CONTAINER_JOIN},
            blocklist=POD_OVERLAY_BLOCKLIST,
            overlay_name="V1Pod.spec",
            suggestion="set the container through Role fields (image, entrypoint, args, env)",
        )
        apply_overlay(pod, overlay)
    return pod


def replica_names(prefix: str) -> Callable[[int], str]:
    """``name_of`` for :func:`replica_pods`: ``<prefix>-<i>`` for replica ``i``."""
    return lambda i: f"{prefix}-{i}"


def replica_container_names(role_name: str) -> Callable[[int], str]:
    """``container_name_of`` for :func:`replica_pods`: ``<role>-<i>`` (TorchX's container names,
    e.g. ``trainer-0``), a DNS label."""
    return lambda i: f"{dns_label(role_name, 62 - len(str(i)))}-{i}"


def replica_labels(labels: Mapping[str, str]) -> Callable[[int], dict[str, str]]:
    """``labels_of`` for :func:`replica_pods`: ``labels`` plus replica ``i``'s id label."""
    return lambda i: {**labels, LABEL_REPLICA_ID: str(i)}


def replica_pods(
    role: Role,
    values_of: Callable[[int], macros.Values],
    name_of: Callable[[int], str],
    labels_of: Callable[[int], Mapping[str, str]],
    opts: PodOptions,
    extra_env: Mapping[str, str] | None = None,
    subdomain: str | None = None,
    container_name_of: Callable[[int], str] | None = None,
) -> list[dict[str, Any]]:
    """One pod per replica of ``role``, macros substituted per replica.

    The pod is built once per role; replicas share its unchanging parts (volumes, resources) and
    get their own args, env, name, labels and (with ``container_name_of``) container name. With
    ``subdomain`` each pod's hostname is its name. Roles whose metadata (overlays) hold macros,
    or whose overlay merges into the container by name, are built replica by replica.
    """
    per_replica = "${" in repr(role.metadata) or (
        container_name_of is not None and CONTAINER_JOIN in _pod_overlay_spec(role)
    )
    if per_replica:
        return [
            role_to_pod(
                values_of(i).apply(role),
                name_of(i),
                labels_of(i),
                opts,
                extra_env,
                hostname=name_of(i) if subdomain else None,
                subdomain=subdomain,
                container_name=container_name_of(i) if container_name_of else None,
            )
            for i in range(role.num_replicas)
        ]
    base = role_to_pod(role, "", {}, opts, extra_env, subdomain=subdomain)
    container, *other_containers = base["spec"]["containers"]
    out = []
    for i in range(role.num_replicas):
        sub = values_of(i).substitute
        replica_container = {
            **container,
            **({"name": container_name_of(i)} if container_name_of else {}),
            "args": [sub(a) for a in role.args],
            "env": [
                {"name": e["name"], "value": sub(e["value"])} if "value" in e else e
                for e in container["env"]
            ],
        }
        name = name_of(i)
        spec = {**base["spec"], "containers": [replica_container, *other_containers]}
        if subdomain:
            spec["hostname"] = name
        meta = {
            **base["metadata"],
            "name": name,
            "labels": {**base["metadata"]["labels"], **labels_of(i)},
        }
        out.append({**base, "metadata": meta, "spec": spec})
    return out


def pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A ``PodTemplateSpec`` (metadata + spec) from a pod dict."""
    return {"metadata": dict(pod["metadata"]), "spec": dict(pod["spec"])}


def replica_status_from_pods(
    pods: Sequence[Mapping[str, Any]],
) -> dict[tuple[str, int], tuple[AppState, str]]:
    """``{(role, replica_id): (state, hostname)}`` from pod objects (dicts) carrying our labels.

    The replica id comes from our replica-id label, else from the indexed-Job annotation.
    Of several pods for one replica (restarts), the newest wins.
    """
    out: dict[tuple[str, int], tuple[AppState, str]] = {}
    newest: dict[tuple[str, int], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        role = labels.get(LABEL_ROLE_NAME)
        rid = labels.get(LABEL_REPLICA_ID, annotations.get(JOB_COMPLETION_INDEX_ANNOTATION))
        if role is None or rid is None or not str(rid).isdigit():
            continue
        key = (role, int(rid))
        created = str(meta.get("creationTimestamp") or "")
        if key in newest and newest[key] > created:
            continue
        newest[key] = created
        phase = (pod.get("status") or {}).get("phase", "Unknown")
        host = (pod.get("spec") or {}).get("nodeName") or meta.get("name", "")
        out[key] = (POD_PHASE_STATES.get(phase, AppState.UNKNOWN), host)
    return out
