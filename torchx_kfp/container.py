"""KFP v2 container components from single-container AppDefs.

A KFP task is one pod with one main container, so this route takes an AppDef with exactly one
role and one replica. Anything larger (several roles, several replicas, an app on Slurm or Ray)
goes through the launcher (:func:`torchx_kfp.launch`), which runs the AppDef through the TorchX
Runner on any scheduler.

Example::

    from kfp import dsl
    from torchx_core import specs
    from torchx_kfp import container_from_app

    app = specs.AppDef("echo", roles=[specs.Role("echo", image="python:3.11",
        entrypoint="echo", args=["hi"], resource=specs.Resource(cpu=1, gpu=0, memMB=512))])

    @dsl.pipeline
    def pipeline() -> None:
        container_from_app(app)
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchx_core.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    MissingDependencyError,
    Resource,
    Role,
    VolumeMount,
    import_optional,
    macros,
)
from torchx_kfp.errors import InvalidKfpOptionsError, UnsupportedAppError

if TYPE_CHECKING:
    from kfp.dsl import PipelineTask

__all__ = [
    "ACCELERATOR_TYPE_CAPABILITY",
    "DEFAULT_ACCELERATOR_TYPE",
    "INSTANCE_TYPE_LABEL",
    "ContainerFactory",
    "ContainerOptions",
    "check_kfp_kubernetes_matches_kfp",
    "component_from_app",
    "container_from_app",
    "input_ref",
]

logger: logging.Logger = logging.getLogger(__name__)

ACCELERATOR_TYPE_CAPABILITY = "accelerator_type"
"""``Resource.capabilities`` key naming the accelerator (e.g. ``"nvidia.com/gpu"``)."""
DEFAULT_ACCELERATOR_TYPE = "nvidia.com/gpu"
"""Accelerator type used for ``Resource.gpu`` when nothing else names one."""
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""A capability under this key becomes a node selector (as with the kubernetes scheduler)."""
RANK0_ENV = "TORCHX_RANK0_HOST"
"""The env var that ``macros.rank0_env`` names; a single container is its own rank 0."""

_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "toleration_seconds"})
_INPUT_TYPES: Mapping[type, str] = {str: "str", int: "int", float: "float", bool: "bool"}
_INPUT_RE = re.compile(r"\{\{torchx_kfp\.inputs\.([A-Za-z_][A-Za-z0-9_]*)\}\}")


def input_ref(name: str) -> str:
    """Returns the token that stands for the component input ``name`` in a role's args or env.

    Declare the input with ``component_from_app(app, inputs={name: type})``; the token is
    replaced by the KFP input placeholder when the component is built. References in args and
    the entrypoint are standard KFP; references in env values compile to the same placeholder
    (that a live KFP backend resolves them in env is unverified).

    >>> input_ref("lr")
    '{{torchx_kfp.inputs.lr}}'
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidKfpOptionsError(
            f"input name {name!r} must be a Python identifier (letters, digits, '_')"
        )
    return "{{torchx_kfp.inputs." + name + "}}"


def _check_str_map(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidKfpOptionsError(f"{name} must be a mapping of str to str, got {value!r}")
    return dict(value)


@dataclass(frozen=True)
class ContainerOptions:
    """Task settings that an AppDef does not carry, applied by :class:`ContainerFactory`.

    Settings under "kubernetes" need the ``kfp-kubernetes`` extra
    (torchx-suite's ``kfp-kubernetes`` extra); it is only imported when one is used
    (or when the role has volume mounts or an instance-type capability).

    Args:
        enable_caching: let KFP reuse a previous result for identical inputs (off by default:
            launching an app is a side effect)
        accelerator_type: accelerator for ``Resource.gpu``; default: the resource's
            ``"accelerator_type"`` capability, else ``"nvidia.com/gpu"``
        set_limits: also set cpu/memory/accelerator limits (equal to the requests)
        display_name: the task's display name (default: the app name)
        shm_size: kubernetes: mount a memory-backed empty dir on ``/dev/shm``; ``""`` means no
            size limit, ``"2Gi"`` limits it, ``None`` mounts nothing
        secret_volumes: kubernetes: ``{secret name: mount path}``
        secret_env: kubernetes: ``{secret name: {secret key: env var}}``
        node_selector: kubernetes: ``{label: value}``
        tolerations: kubernetes: dicts with keys among ``key``, ``operator``, ``value``,
            ``effect``, ``toleration_seconds``
        image_pull_secrets: kubernetes: names of image pull secrets
        pod_labels: kubernetes: labels for the task's pod
        pod_annotations: kubernetes: annotations for the task's pod
        timeout_seconds: kubernetes: the pod's active deadline

    Raises:
        InvalidKfpOptionsError: a value has the wrong type or shape
    """

    enable_caching: bool = False
    accelerator_type: str | None = None
    set_limits: bool = True
    display_name: str | None = None
    shm_size: str | None = None
    secret_volumes: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    image_pull_secrets: Sequence[str] = ()
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: int | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        for name in ("enable_caching", "set_limits"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be a bool, got {getattr(self, name)!r}")
        for name in ("accelerator_type", "display_name", "shm_size"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                problems.append(f"{name} must be a str or None, got {value!r}")
        for name in ("secret_volumes", "node_selector", "pod_labels", "pod_annotations"):
            try:
                _check_str_map(name, getattr(self, name))
            except InvalidKfpOptionsError as e:
                problems.append(str(e))
        if not isinstance(self.secret_env, Mapping):
            problems.append(f"secret_env must be a mapping, got {self.secret_env!r}")
        else:
            for secret, keys in self.secret_env.items():
                try:
                    _check_str_map(f"secret_env[{secret!r}]", keys)
                except InvalidKfpOptionsError as e:
                    problems.append(str(e))
        problems += _toleration_problems(self.tolerations)
        if isinstance(self.image_pull_secrets, str) or not all(
            isinstance(s, str) for s in self.image_pull_secrets
        ):
            problems.append(
                f"image_pull_secrets must be a list of str, got {self.image_pull_secrets!r}"
            )
        if self.timeout_seconds is not None and (
            not isinstance(self.timeout_seconds, int)
            or isinstance(self.timeout_seconds, bool)
            or self.timeout_seconds <= 0
        ):
            problems.append(f"timeout_seconds must be a positive int, got {self.timeout_seconds!r}")
        if problems:
            raise InvalidKfpOptionsError("Invalid ContainerOptions: " + "; ".join(problems))

    def uses_kubernetes(self) -> bool:
        """True if any setting needs the ``kfp-kubernetes`` extra."""
        return bool(
            self.shm_size is not None
            or self.secret_volumes
            or self.secret_env
            or self.node_selector
            or self.tolerations
            or self.image_pull_secrets
            or self.pod_labels
            or self.pod_annotations
            or self.timeout_seconds is not None
        )


def _toleration_problems(tolerations: object) -> list[str]:
    if isinstance(tolerations, (str, Mapping)) or not isinstance(tolerations, Sequence):
        return [f"tolerations must be a list of dicts, got {tolerations!r}"]
    problems = []
    for tol in tolerations:
        if not isinstance(tol, Mapping):
            problems.append(f"each toleration must be a dict, got {tol!r}")
            continue
        unknown = sorted(set(tol) - _TOLERATION_KEYS)
        if unknown:
            problems.append(
                f"toleration {dict(tol)!r} has unknown keys {unknown};"
                f" valid keys: {sorted(_TOLERATION_KEYS)}"
            )
    return problems


def _single_role(app: AppDef) -> Role:
    if not isinstance(app, AppDef):
        raise UnsupportedAppError(f"expected a torchx_core.specs.AppDef, got {type(app).__name__}")
    launcher_hint = (
        " A KFP container task is a single pod; run multi-role or multi-replica apps with the"
        " launcher step instead: torchx_kfp.launch(app, scheduler=...)."
    )
    if len(app.roles) != 1:
        raise UnsupportedAppError(
            f"AppDef {app.name!r} has {len(app.roles)} roles"
            f" ({', '.join(r.name for r in app.roles)}); a KFP container expresses exactly one."
            + launcher_hint
        )
    role = app.roles[0]
    if role.num_replicas != 1:
        raise UnsupportedAppError(
            f"Role {role.name!r} of AppDef {app.name!r} has num_replicas={role.num_replicas};"
            " a KFP container expresses exactly one replica." + launcher_hint
        )
    if not role.entrypoint or role.entrypoint == "<MISSING>":
        raise UnsupportedAppError(f"Role {role.name!r} has no entrypoint; set Role.entrypoint.")
    for mount in role.mounts:
        if isinstance(mount, (BindMount, DeviceMount)):
            raise UnsupportedAppError(
                f"Role {role.name!r} has a {type(mount).__name__} ({mount}); KFP tasks cannot"
                " mount host paths or devices. Use a VolumeMount (a PVC) or the launcher step."
            )
    return role


def _component_name(app_name: str) -> str:
    name = re.sub(r"[^a-z0-9_]+", "_", app_name.lower()).strip("_")
    if not name or not name[0].isalpha():
        name = "app_" + name
    return name


def _substitute_inputs(value: str, placeholders: Mapping[str, Any]) -> Any:
    """Replaces :func:`input_ref` tokens by KFP input placeholders (whole token: the object)."""
    whole = _INPUT_RE.fullmatch(value)
    if whole:
        return placeholders[whole.group(1)]
    return _INPUT_RE.sub(lambda m: str(placeholders[m.group(1)]), value)


def _check_input_refs(role: Role, inputs: Mapping[str, type]) -> None:
    texts = [role.entrypoint, *role.args, *role.env.values()]
    used = {m for text in texts for m in _INPUT_RE.findall(text)}
    undeclared = sorted(used - set(inputs))
    if undeclared:
        raise InvalidKfpOptionsError(
            f"Role {role.name!r} refers to undeclared inputs {undeclared}; declared:"
            f" {sorted(inputs)}. Pass inputs={{name: type}} to component_from_app."
        )


def _resolve_inputs(inputs: Mapping[str, type] | None) -> dict[str, type]:
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise InvalidKfpOptionsError(f"inputs must be a mapping of name to type, got {inputs!r}")
    problems = []
    for name, tp in inputs.items():
        if not isinstance(name, str) or not name.isidentifier():
            problems.append(f"input name {name!r} is not a Python identifier")
        if tp not in _INPUT_TYPES:
            problems.append(f"input {name!r} has type {tp!r}; valid: str, int, float, bool")
    if problems:
        raise InvalidKfpOptionsError("Invalid inputs: " + "; ".join(problems))
    return dict(inputs)


def _build_component(app: AppDef, role: Role, inputs: Mapping[str, type]) -> Any:
    dsl = import_optional("kfp.dsl", "kfp", "torchx_kfp")
    uses_rank0 = macros.rank0_env in " ".join([role.entrypoint, *role.args, *role.env.values()])
    values = macros.Values(img_root="", app_id=app.name, replica_id="0", rank0_env=RANK0_ENV)
    role = values.apply(role)
    env = dict(role.env)
    if uses_rank0:
        env.setdefault(RANK0_ENV, "localhost")
    entrypoint, args = role.entrypoint, list(role.args)

    def container_fn(*placeholders: Any) -> Any:
        by_name = dict(zip(inputs, placeholders, strict=True))
        return dsl.ContainerSpec(
            image=role.image,
            command=[_substitute_inputs(entrypoint, by_name)],
            args=[_substitute_inputs(a, by_name) for a in args] or None,
        )

    params = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=tp)
        for name, tp in inputs.items()
    ]
    container_fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=dsl.ContainerSpec
    )
    container_fn.__name__ = _component_name(app.name)
    container_fn.__qualname__ = container_fn.__name__
    container_fn.__doc__ = f"TorchX app {app.name!r}, role {role.name!r}."
    component = dsl.container_component(container_fn)
    # ContainerSpec has no env; the component's container implementation does (and the compiler
    # writes it into the IR's deploymentSpec), so the env travels with the component.
    env_placeholders = {name: f"{{{{$.inputs.parameters['{name}']}}}}" for name in inputs}
    component.component_spec.implementation.container.env = {
        k: _INPUT_RE.sub(lambda m: env_placeholders[m.group(1)], v) for k, v in env.items()
    } or None
    return component


class ContainerFactory:
    """Builds KFP tasks for a single-container AppDef and applies its settings on each task.

    Calling the factory inside a ``@dsl.pipeline`` function creates the task (passing
    ``*args, **kwargs`` to the component) and applies resources, retries, caching and, when
    asked, the Kubernetes platform settings. ``component`` is the plain KFP component (e.g. to
    save it as YAML); it carries image, command, args and env.

    Args:
        app: an AppDef with one role and one replica
        options: task settings the AppDef does not carry
        inputs: component inputs ``{name: type}`` (str, int, float, bool); refer to them in the
            role's entrypoint, args or env with :func:`input_ref`

    Raises:
        UnsupportedAppError: the app has several roles or replicas, no entrypoint, or host mounts
        InvalidKfpOptionsError: options or inputs are invalid
        MissingDependencyError: kfp is not installed
    """

    def __init__(
        self,
        app: AppDef,
        options: ContainerOptions | None = None,
        inputs: Mapping[str, type] | None = None,
    ) -> None:
        self.role = _single_role(app)
        if options is not None and not isinstance(options, ContainerOptions):
            raise InvalidKfpOptionsError(
                f"options must be a ContainerOptions, got {type(options).__name__}"
            )
        self.app = app
        self.options = options or ContainerOptions()
        self.inputs = _resolve_inputs(inputs)
        _check_input_refs(self.role, self.inputs)
        self._check_resource(self.role.resource)
        self.component = _build_component(app, self.role, self.inputs)

    def _check_resource(self, res: Resource) -> None:
        if res.gpu > 0 and res.devices:
            raise UnsupportedAppError(
                f"Role {self.role.name!r} asks for gpu={res.gpu} and devices {res.devices}; a KFP"
                " task takes a single accelerator kind. Use the launcher step for this app."
            )
        if len(res.devices) > 1:
            raise UnsupportedAppError(
                f"Role {self.role.name!r} asks for devices {res.devices}; a KFP task takes a"
                " single accelerator kind. Use the launcher step for this app."
            )

    def __call__(self, *args: Any, **kwargs: Any) -> PipelineTask:
        """Creates the task (inside a pipeline function) and applies the settings."""
        task = self.component(*args, **kwargs)
        self.apply(task)
        return task

    def apply(self, task: PipelineTask) -> PipelineTask:
        """Applies resources, retries, caching and Kubernetes settings to ``task``."""
        opts = self.options
        apply_resources(task, self.role.resource, opts.accelerator_type, opts.set_limits)
        if self.role.max_retries > 0:
            task.set_retry(num_retries=self.role.max_retries)
        task.set_caching_options(enable_caching=opts.enable_caching)
        task.set_display_name(opts.display_name or self.app.name)
        if self._needs_kubernetes():
            _apply_kubernetes(task, self.role, opts)
        return task

    def _needs_kubernetes(self) -> bool:
        return (
            self.options.uses_kubernetes()
            or any(isinstance(m, VolumeMount) for m in self.role.mounts)
            or INSTANCE_TYPE_LABEL in self.role.resource.capabilities
            or any(pod_overlay_settings(self.role))
        )


def apply_resources(
    task: PipelineTask,
    res: Resource,
    accelerator_type: str | None = None,
    set_limits: bool = True,
) -> PipelineTask:
    """Sets cpu, memory (``memMB`` as MiB) and accelerator requests/limits from ``res``.

    Negative values (``NULL_RESOURCE``) mean "not set" and are skipped.
    """
    if res.cpu > 0:
        task.set_cpu_request(str(res.cpu))
        if set_limits:
            task.set_cpu_limit(str(res.cpu))
    if res.memMB > 0:
        task.set_memory_request(f"{res.memMB}Mi")
        if set_limits:
            task.set_memory_limit(f"{res.memMB}Mi")
    count, kind = res.gpu, accelerator_type or res.capabilities.get(ACCELERATOR_TYPE_CAPABILITY)
    if count <= 0 and res.devices:
        ((kind, count),) = res.devices.items()
    if count > 0:
        task.set_accelerator_type(str(kind or DEFAULT_ACCELERATOR_TYPE))
        task.set_accelerator_limit(count)
    return task


_OVERLAY_SPEC_KEYS = frozenset({"nodeSelector", "tolerations"})


def pod_overlay_settings(role: Role) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Node selector and tolerations from the role's kubernetes ``V1Pod`` overlay.

    ``set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": ..., "tolerations":
    [...]}})`` is what the kubernetes scheduler reads; the same overlay reaches KFP tasks. Other
    pod fields have no KFP equivalent and are logged as ignored.
    """
    from torchx_core.specs.overlays import apply_overlay, get_overlay

    overlay = get_overlay(role, "kubernetes", "V1Pod")
    if not overlay:
        return {}, []
    pod: dict[str, Any] = {}
    apply_overlay(pod, overlay)
    spec = pod.get("spec") or {}
    ignored = sorted({*pod} - {"spec"} | {*spec} - _OVERLAY_SPEC_KEYS)
    if ignored:
        logger.warning(
            "role %s: V1Pod overlay fields %s have no KFP equivalent and are ignored (KFP takes"
            " %s)",
            role.name,
            ignored,
            sorted(_OVERLAY_SPEC_KEYS),
        )
    tolerations = []
    for tol in spec.get("tolerations") or []:
        tolerations.append(
            {("toleration_seconds" if k == "tolerationSeconds" else k): v for k, v in tol.items()}
        )
    problems = _toleration_problems(tolerations)
    if problems:
        raise InvalidKfpOptionsError(f"role {role.name!r} V1Pod overlay: " + "; ".join(problems))
    return _check_str_map("V1Pod overlay spec.nodeSelector", spec.get("nodeSelector") or {}), (
        tolerations
    )


def check_kfp_kubernetes_matches_kfp() -> None:
    """Raises :class:`~torchx_core.specs.MissingDependencyError` unless kfp-kubernetes has the
    installed kfp's minor version (each kfp-kubernetes minor is built for one kfp minor).

    Installing the ``kfp-kubernetes`` extra next to an older kfp can pick the newest
    kfp-kubernetes; ``pip install 'kfp-kubernetes==<kfp minor>.*'`` puts the matching one back.
    """
    from importlib import metadata

    try:
        kfp_version = metadata.version("kfp")
        kk_version = metadata.version("kfp-kubernetes")
    except metadata.PackageNotFoundError:  # the import already said what is missing
        return
    minor = ".".join(kfp_version.split(".")[:2])
    if ".".join(kk_version.split(".")[:2]) != minor:
        raise MissingDependencyError(
            "kfp",
            "kfp-kubernetes",
            f"torchx_kfp with kfp {kfp_version}",
            distribution="kfp-kubernetes",
            found=kk_version,
            required=f"=={minor}.*",
        )


def _apply_kubernetes(task: PipelineTask, role: Role, opts: ContainerOptions) -> None:
    kubernetes = import_optional(
        "kfp.kubernetes",
        "kfp-kubernetes",
        "torchx_kfp kubernetes settings",
        distribution="kfp-kubernetes",
    )
    check_kfp_kubernetes_matches_kfp()
    overlay_selector, overlay_tolerations = pod_overlay_settings(role)
    for mount in role.mounts:
        if isinstance(mount, VolumeMount):
            if mount.read_only:
                logger.warning(
                    "VolumeMount %s is read-only; kfp-kubernetes mounts PVCs read-write", mount.src
                )
            kubernetes.mount_pvc(task, pvc_name=mount.src, mount_path=mount.dst_path)
    if opts.shm_size is not None:
        kubernetes.empty_dir_mount(
            task,
            volume_name="dshm",
            mount_path="/dev/shm",
            medium="Memory",
            size_limit=opts.shm_size or None,
        )
    for secret, path in opts.secret_volumes.items():
        kubernetes.use_secret_as_volume(task, secret_name=secret, mount_path=path)
    for secret, keys in opts.secret_env.items():
        kubernetes.use_secret_as_env(task, secret_name=secret, secret_key_to_env=dict(keys))
    selector = {**overlay_selector, **opts.node_selector}
    instance_type = role.resource.capabilities.get(INSTANCE_TYPE_LABEL)
    if instance_type is not None:
        selector.setdefault(INSTANCE_TYPE_LABEL, str(instance_type))
    for label, value in selector.items():
        kubernetes.add_node_selector(task, label_key=label, label_value=value)
    for tol in [*overlay_tolerations, *opts.tolerations]:
        kubernetes.add_toleration(task, **dict(tol))
    if opts.image_pull_secrets:
        kubernetes.set_image_pull_secrets(task, list(opts.image_pull_secrets))
    for key, value in opts.pod_labels.items():
        kubernetes.add_pod_label(task, key, value)
    for key, value in opts.pod_annotations.items():
        kubernetes.add_pod_annotation(task, key, value)
    if opts.timeout_seconds is not None:
        kubernetes.set_timeout(task, opts.timeout_seconds)


def component_from_app(
    app: AppDef,
    options: ContainerOptions | None = None,
    inputs: Mapping[str, type] | None = None,
) -> ContainerFactory:
    """Returns a :class:`ContainerFactory` for a single-role, single-replica AppDef.

    Args:
        app: the AppDef
        options: task settings the AppDef does not carry (caching, kubernetes, ...)
        inputs: component inputs ``{name: type}``, referenced with :func:`input_ref`

    Raises:
        UnsupportedAppError: the app needs more than one container (use :func:`torchx_kfp.launch`)
    """
    return ContainerFactory(app, options=options, inputs=inputs)


def container_from_app(
    app: AppDef,
    *args: Any,
    options: ContainerOptions | None = None,
    inputs: Mapping[str, type] | None = None,
    **kwargs: Any,
) -> PipelineTask:
    """Creates a KFP task running ``app`` (call inside a ``@dsl.pipeline`` function).

    ``*args`` and ``**kwargs`` are passed to the component as its inputs.

    Raises:
        UnsupportedAppError: the app needs more than one container (use :func:`torchx_kfp.launch`)
    """
    return component_from_app(app, options=options, inputs=inputs)(*args, **kwargs)
