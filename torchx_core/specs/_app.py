"""App definition dataclasses: Resource, RetryPolicy, mounts, Workspace, macros, Role, AppDef.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
Pure data: nothing here does I/O at import time.
"""

from __future__ import annotations

import os
from enum import Enum

from torchx_core.specs._dc import data, field, field_names
from torchx_core.specs._mounts import (
    BindMount,
    DeviceMount,
    VolumeMount,
    mount_from_dict,
    mount_to_dict,
)
from torchx_core.specs._serde import FORMAT_VERSION, jsonable, opt, req
from torchx_core.specs.errors import AppDefSerializationError, InvalidWorkspaceError

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from torchx_core.specs._status import AppDryRunInfo


# Resource.tags keys set by torchx_core.plugins.register.named_resource (see resource_tags)
def _is_url(text: str) -> bool:
    """True if ``text`` starts with a URL scheme and ``://`` (``s3://b``, ``memory://p``)."""
    scheme, sep, _ = text.partition("://")
    return bool(
        sep and scheme and scheme[0].isalpha() and all(c.isalnum() or c in "+.-" for c in scheme)
    )


_TAG_NAME = "torchx/named_resources.name"
_TAG_FRACTIONAL = "torchx/named_resources.is_fractional"

# MiB in a GiB (Resource.memMB is in MiB): ``Resource(cpu=8, gpu=1, memMB=32 * GiB)``
GiB: int = 1024

# sentinel value used to represent missing string attributes, such as image or entrypoint
MISSING: str = "<MISSING>"
# sentinel value used to represent "unset" optional string attributes
NONE: str = "<NONE>"
# sentinel value for an attribute a scheduler cannot read back (the literal is the contract:
# schedulers may write it without importing torchx)
UNKNOWN: str = "<UNKNOWN>"


def TORCHX_HOME(*subdir_paths: str) -> Path:
    """The torchx dot-directory (``$TORCHX_HOME``, else ``~/.torchx``), or a sub-directory of it.

    The directory is created if it does not exist.

    >>> import os, pathlib
    >>> prev = os.environ.pop("TORCHX_HOME", None)
    >>> TORCHX_HOME("conda-pack-out") == pathlib.Path.home() / ".torchx" / "conda-pack-out"
    True
    >>> if prev is not None:
    ...     os.environ["TORCHX_HOME"] = prev
    """
    from pathlib import Path

    home = Path(os.environ.get("TORCHX_HOME") or Path.home() / ".torchx")
    path = home.joinpath(*subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


@data
class Resource:
    """Represents resource requirements for a Role.

    Prefer :py:func:`resource` with named resources (t-shirt sizes) over raw values.

    >>> Resource(cpu=4, gpu=1, memMB=8192)
    Resource(cpu=4, gpu=1, memMB=8192, capabilities={}, devices={}, tags={})

    Args:
        cpu: number of logical cpu cores
        gpu: number of gpus
        memMB: MB of ram
        capabilities: additional hardware specs (interpreted by scheduler)
        devices: named devices with their quantities (e.g. ``{"vpc.amazonaws.com/efa": 1}``)
        tags: metadata tags (not interpreted by schedulers)
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)
    tags: dict[str, object] = field(default_factory=dict)

    # Set by the named-resource registry on the instances it creates. Plain instance
    # attributes (not dataclass fields: no annotation) so that repr and equality stay
    # TorchX-compatible.
    _resource_name = None
    _fractional = False

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Copies a resource, merging in the given capabilities (the given ones win).

        Args:
            original: the resource to copy
            capabilities: capabilities to add or replace
        """
        merged = dict(original.capabilities)
        merged.update(capabilities)
        res = Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities=merged,
            devices=dict(original.devices),
            tags=dict(original.tags),
        )
        res._set_named(original.get_resource_name(), original.is_fractional())
        return res

    def get_resource_name(self) -> str | None:
        """Return the registered named-resource name, or None.

        Set automatically by ``register.named_resource()`` on every resource it creates.
        """
        return self._resource_name or self.tags.get(_TAG_NAME)  # type: ignore[return-value]

    def is_fractional(self) -> bool:
        """Return True if this resource is a fractional slice of a base resource.

        Set automatically by ``register.named_resource()`` when ``fractionals`` is given.
        """
        return bool(self._fractional or self.tags.get(_TAG_FRACTIONAL, False))

    def _set_named(self, name: str | None, fractional: bool = False) -> Resource:
        self.__dict__["_resource_name"] = name
        self.__dict__["_fractional"] = fractional
        return self


# sentinel value used for cases when resource does not matter (e.g. ignored)
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)
#: TorchX's ``specs.ALL``: the string ``"all"``, used as the "every scheduler" backend name
#: (it is not a Resource: as one it equalled NULL_RESOURCE, "no resource")
ALL: str = "all"


def _null_resource() -> Resource:
    return Resource(cpu=-1, gpu=-1, memMB=-1)


class RetryPolicy(str, Enum):
    """Defines the retry policy for the Roles in the AppDef.

    1. REPLICA: Replaces the replica instance. Surviving replicas are untouched.
    2. APPLICATION: Restarts the entire application.
    3. ROLE: Restarts the role when any error occurs in that role (not the whole job).

    All schedulers support ``APPLICATION``. As in TorchX, ``str(RetryPolicy.APPLICATION)`` is
    ``"RetryPolicy.APPLICATION"``; ``.value`` is ``"APPLICATION"``.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


@data
class Workspace:
    """Maps local project directories to remote workspace locations.

    At submit-time, files are copied/synced so that the remote job mirrors local code changes.

    >>> # copies ~/github/torch/** into $REMOTE_ROOT/torch/**
    >>> ws = Workspace(projects={"~/github/torch": "torch"})
    >>> # copies ~/github/torch/** into $REMOTE_ROOT/** (no sub-dir)
    >>> ws = Workspace(projects={"~/github/torch": ""})

    Args:
        projects: ``{local_path: remote_subdir}`` mapping.
    """

    projects: dict[str, str]

    def __bool__(self) -> bool:
        return bool(self.projects)

    def __hash__(self) -> int:
        # as TorchX: usable as a cache key (workspace builds shared by roles); do not change
        # `projects` while the workspace is a key
        return hash(frozenset(self.projects.items()))

    def is_unmapped_single_project(self) -> bool:
        """True if this is a single-project workspace with no target sub-directory."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    def merge_into(self, outdir: str | Path) -> None:
        """Copies each project into ``{outdir}/{target}``.

        Args:
            outdir: destination directory (created if missing)

        Raises:
            InvalidWorkspaceError: a project path does not exist
        """
        import shutil
        from pathlib import Path

        out = Path(outdir)
        for src, dst in self.projects.items():
            src_path = Path(src).expanduser()
            target = out / dst if dst else out
            if src_path.is_dir():
                shutil.copytree(src_path, target, dirs_exist_ok=True)
            elif src_path.is_file():
                if dst:
                    target.parent.mkdir(parents=True, exist_ok=True)
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    target = target / src_path.name
                shutil.copy2(src_path, target)
            else:
                raise InvalidWorkspaceError(
                    f"workspace project {src!r} does not exist (resolved to {src_path});"
                    " pass an existing local directory or file"
                )

    @staticmethod
    def from_str(workspace: str | None) -> Workspace | None:
        """Parses a CLI workspace string.

        ``"path"`` maps one project to the root; ``"a:b,c:d"`` (or ``;`` or one ``a: b`` per
        line, as in TorchX's YAML form; ``#`` lines are comments) maps ``a`` to ``b`` and ``c``
        to ``d``. A project may be an fsspec URL (``memory://proj``, ``s3://bucket/proj``), mapped
        with ``": "`` only (``s3://b/p: remote``). ``None`` or ``""`` return None.
        ``str(workspace)`` writes ``a:b;c:d``.

        >>> Workspace.from_str("~/proj")
        Workspace(projects={'~/proj': ''})
        >>> Workspace.from_str("~/a:a,~/b:b")
        Workspace(projects={'~/a': 'a', '~/b': 'b'})

        Raises:
            InvalidWorkspaceError: an entry has an empty local path, or a path is repeated
        """
        if workspace is None:
            return None
        if not isinstance(workspace, str):
            raise InvalidWorkspaceError(f"workspace must be a string, got {workspace!r}")
        # entries separated by ",", ";" or new lines ("path: remote" lines, as TorchX's YAML
        # form); a line starting with "#" is a comment
        lines = [ln for ln in workspace.splitlines() if not ln.lstrip().startswith("#")]
        text = ",".join(lines).replace(";", ",")
        entries = [e.strip() for e in text.split(",") if e.strip()]
        if not entries:
            return None
        projects: dict[str, str] = {}
        for entry in entries:
            if _is_url(entry):  # an fsspec URL ("s3://b/p"): only ": " maps it
                src, _, dst = entry.partition(": ")
            else:
                src, _, dst = entry.partition(":")
            src, dst = src.strip(), dst.strip()
            if not src:
                raise InvalidWorkspaceError(
                    f"workspace entry {entry!r} has an empty local path; use 'path' or"
                    " 'local:remote[,local2:remote2]'"
                )
            if src in projects:
                raise InvalidWorkspaceError(
                    f"workspace path {src!r} is given twice in {workspace!r}"
                )
            projects[src] = dst
        return Workspace(projects=projects)

    def __str__(self) -> str:
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{k}:{v}" if v else k for k, v in self.projects.items())


def _substitute_nested(obj: Any, values: macros.Values) -> Any:
    if isinstance(obj, str):
        return values.substitute(obj)
    if isinstance(obj, dict):
        return {k: _substitute_nested(v, values) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_substitute_nested(v, values) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_substitute_nested(v, values) for v in obj)
    return obj


class macros:
    """Template variables substituted at runtime in Role.args, Role.env, and Role.metadata.

    Macros in other Role fields are NOT substituted.

    Available macros:

    1. ``img_root`` - root directory of the pulled image
    2. ``app_id`` - application id as assigned by the scheduler
    3. ``replica_id`` - per-role replica index (0, 1, ...); a replacement replica keeps its id
    4. ``rank0_env`` - the *name* of the env var holding the rank-0 host address
    5. ``base_img_root`` - deprecated
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @data
    class Values:
        """Concrete values for the macros, applied by the scheduler per replica."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def apply(self, role: Role) -> Role:
            """Returns a deep copy of ``role`` with macros substituted in args, env and metadata.

            The copy shares ``role.overrides`` (as in TorchX): producers may not be copyable, and
            an override resolved through either role is then resolved for both.
            """
            import copy

            overrides = role.overrides
            if not overrides or _only_lock(overrides):  # nothing to share
                role = copy.deepcopy(role)
            else:
                role.overrides = {}
                try:
                    copied = copy.deepcopy(role)
                finally:
                    role.overrides = overrides
                copied.overrides = overrides
                role = copied
            role.args = [self.substitute(a) for a in role.args]
            role.env = {k: self.substitute(v) for k, v in role.env.items()}
            role.metadata = _substitute_nested(role.metadata, self)
            return role

        def substitute(self, arg: str) -> str:
            """Substitutes macro placeholders in ``arg`` (``$$`` escapes a literal ``$``)."""
            from string import Template

            if "$" not in arg:  # fast path: most args hold no macro
                return arg
            return Template(arg).safe_substitute(vars(self))

        def to_dict(self) -> dict[str, Any]:
            """Returns the macro values as a plain dict."""
            return {name: getattr(self, name) for name in field_names(type(self))}


_OVERRIDABLE: frozenset[str] = frozenset()
_object_getattribute = object.__getattribute__


def _only_lock(overrides: dict[str, Any]) -> bool:
    """True if ``overrides`` holds nothing but the resolution lock of ``_overrides``."""
    from torchx_core.specs._overrides import LOCK_KEY

    return all(k == LOCK_KEY for k in overrides)


def _resolve_override(overrides: dict[str, Any], name: str) -> Any:
    from torchx_core.specs._overrides import resolve

    return resolve(overrides, name)


@data
class Role:
    """A set of nodes that perform a specific duty within an AppDef.

    >>> trainer = Role(
    ...     name="trainer",
    ...     image="pytorch/torch:latest",
    ...     entrypoint="train.py",
    ...     args=["--lr", "0.01"],
    ...     num_replicas=4,
    ...     resource=Resource(cpu=4, gpu=1, memMB=8192),
    ... )

    Args:
        name: name of the role
        image: software bundle installed on the container (docker image, fbpkg, tar-ball, etc.)
        min_replicas: minimum replicas for elastic scaling; unset or unsupported runs num_replicas
        entrypoint: command to invoke inside the container
        args: arguments to the entrypoint
        env: environment variable mappings
        num_replicas: number of container replicas
        max_retries: max number of retries before giving up
        retry_policy: retry behavior upon failures
        resource: resource requirements per replica
        port_map: named port mappings (e.g. ``{"tensorboard": 8081}``)
        metadata: scheduler-specific data. Keys should follow ``$scheduler.$key``.
        mounts: bind, volume, or device mounts
        workspace: local project directories to mirror on the remote job
        overrides: ``{attribute: producer}`` read instead of the attribute: a callable or an
            awaitable, run once on the first read, the value written back into the dict (see
            ``torchx_core.specs._overrides``); a plain value is returned as it is
        base_image: deprecated (older TorchX releases); keyword only
    """

    name: str
    image: str
    min_replicas: int | None = None
    entrypoint: str = MISSING
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=_null_resource)
    port_map: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    mounts: list[BindMount | VolumeMount | DeviceMount] = field(default_factory=list)
    workspace: Workspace | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    base_image: str | None = field(default=None, repr=False, compare=False, kw_only=True)

    # Airflow renders these (and recurses into nested objects that declare template_fields).
    # No annotation on purpose: a plain class attribute, not a dataclass field.
    template_fields = ("args", "env", "image", "entrypoint", "metadata")

    def __getattribute__(self, attrname: str) -> Any:
        if attrname in _OVERRIDABLE:
            d = _object_getattribute(self, "__dict__")
            ov = d.get("overrides")
            if ov and attrname in ov:
                return _resolve_override(ov, attrname)
            if attrname in d:  # fast path: a plain instance attribute
                return d[attrname]
        return _object_getattribute(self, attrname)

    def pre_proc(self, scheduler: str, dryrun_info: AppDryRunInfo[Any]) -> AppDryRunInfo[Any]:
        """Hook for role-specific scheduler request modifications.

        Called per-role during ``Scheduler.submit_dryrun``, in the order of ``AppDef.roles``.
        The default returns ``dryrun_info`` unchanged.
        """
        return dryrun_info


_OVERRIDABLE = frozenset(field_names(Role)) - {"overrides"}


@data
class AppDef:
    """A distributed application composed of one or more Roles.

    >>> app = AppDef(name="my_train", roles=[Role(name="trainer", image="my_image:latest")])

    Args:
        name: name of the application
        roles: the roles of the application
        metadata: scheduler-specific metadata (treatment varies by scheduler)
    """

    name: str
    roles: list[Role] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    # plain class attribute (not a dataclass field); see Role.template_fields
    template_fields = ("name", "roles", "metadata")

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-compatible dict that :py:meth:`from_dict` turns back into an equal AppDef.

        See :py:func:`torchx_core.specs.api.appdef_to_dict` for what is kept.
        """
        return appdef_to_dict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> AppDef:
        """Builds an AppDef from the output of :py:meth:`to_dict`.

        Raises:
            AppDefSerializationError: ``data`` is not a valid AppDef dict
        """
        return appdef_from_dict(data)


def replica_pairs(app: AppDef, role: str | None = None) -> list[tuple[str, int]]:
    """``(role name, replica index)`` for every replica ``app`` asks for, in role order.

    >>> replica_pairs(AppDef("a", [Role("w", image="i", num_replicas=2), Role("ps", image="i")]))
    [('w', 0), ('w', 1), ('ps', 0)]

    Args:
        app: the app definition
        role: only this role's replicas (an unknown role gives ``[]``)
    """
    return [
        (r.name, k)
        for r in app.roles
        if role is None or r.name == role
        for k in range(r.num_replicas)
    ]


# The dict form (shared readers and the format version: _serde)


def resource_to_dict(res: Resource) -> dict[str, Any]:
    """Returns the dict form of a Resource."""
    return {
        "cpu": res.cpu,
        "gpu": res.gpu,
        "memMB": res.memMB,
        "capabilities": dict(res.capabilities),
        "devices": dict(res.devices),
        "tags": dict(res.tags),
        "name": res.get_resource_name(),
        "fractional": res.is_fractional(),
    }


def role_to_dict(role: Role) -> dict[str, Any]:
    """Returns the dict form of a Role (fields read through its overrides)."""
    from torchx_core.specs._overrides import ResolvedOverride

    overrides = {
        k: v.value if isinstance(v, ResolvedOverride) else v for k, v in role.overrides.items()
    }
    overrides = {k: v for k, v in overrides.items() if jsonable(v)}
    return {
        "name": role.name,
        "image": role.image,
        "min_replicas": role.min_replicas,
        "entrypoint": role.entrypoint,
        "args": list(role.args),
        "env": dict(role.env),
        "num_replicas": role.num_replicas,
        "max_retries": role.max_retries,
        "retry_policy": RetryPolicy(role.retry_policy).value,
        "resource": resource_to_dict(role.resource),
        "port_map": dict(role.port_map),
        "metadata": dict(role.metadata),
        "mounts": [mount_to_dict(m) for m in role.mounts],
        "workspace": dict(role.workspace.projects) if role.workspace is not None else None,
        "overrides": overrides,
        "base_image": role.base_image,
    }


def appdef_to_dict(app: AppDef) -> dict[str, Any]:
    """Returns a JSON-compatible dict of ``app``; :py:func:`appdef_from_dict` reverses it.

    >>> from torchx_core.specs import AppDef, Role
    >>> d = appdef_to_dict(AppDef("echo", [Role("r", image="img", args=["hi"])]))
    >>> appdef_from_dict(d) == AppDef("echo", [Role("r", image="img", args=["hi"])])
    True
    """
    return {
        "version": FORMAT_VERSION,
        "name": app.name,
        "roles": [role_to_dict(r) for r in app.roles],
        "metadata": dict(app.metadata),
    }


def resource_from_dict(data: Mapping[str, Any], where: str = "resource") -> Resource:
    """Builds a Resource from :py:func:`resource_to_dict` output."""
    res = Resource(
        cpu=req(data, "cpu", int, where),
        gpu=req(data, "gpu", int, where),
        memMB=req(data, "memMB", int, where),
        capabilities=dict(opt(data, "capabilities", dict, where, {})),
        devices=dict(opt(data, "devices", dict, where, {})),
        tags=dict(opt(data, "tags", dict, where, {})),
    )
    name = opt(data, "name", str, where, None)
    if name is not None or data.get("fractional"):
        res._set_named(name, bool(data.get("fractional")))
    return res


def role_from_dict(data: Mapping[str, Any], where: str = "role") -> Role:
    """Builds a Role from :py:func:`role_to_dict` output."""
    policy = opt(data, "retry_policy", str, where, "APPLICATION")
    try:
        retry_policy = RetryPolicy(policy)
    except ValueError:
        raise AppDefSerializationError(
            f"{where}.retry_policy: {policy!r} is not one of {[p.value for p in RetryPolicy]}"
        ) from None
    ws = opt(data, "workspace", dict, where, None)
    return Role(
        name=req(data, "name", str, where),
        image=req(data, "image", str, where),
        min_replicas=opt(data, "min_replicas", int, where, None),
        entrypoint=opt(data, "entrypoint", str, where, "<MISSING>"),
        args=list(opt(data, "args", list, where, [])),
        env=dict(opt(data, "env", dict, where, {})),
        num_replicas=opt(data, "num_replicas", int, where, 1),
        max_retries=opt(data, "max_retries", int, where, 0),
        retry_policy=retry_policy,
        resource=resource_from_dict(
            opt(data, "resource", dict, where, {"cpu": -1, "gpu": -1, "memMB": -1}),
            f"{where}.resource",
        ),
        port_map=dict(opt(data, "port_map", dict, where, {})),
        metadata=dict(opt(data, "metadata", dict, where, {})),
        mounts=[
            mount_from_dict(m, f"{where}.mounts[{i}]")
            for i, m in enumerate(opt(data, "mounts", list, where, []))
        ],
        workspace=Workspace(projects=dict(ws)) if ws is not None else None,
        overrides=dict(opt(data, "overrides", dict, where, {})),
        base_image=opt(data, "base_image", str, where, None),
    )


def appdef_from_dict(data: Mapping[str, Any]) -> AppDef:
    """Builds an AppDef from :py:func:`appdef_to_dict` output.

    Raises:
        AppDefSerializationError: ``data`` is not a valid AppDef dict (the message names the
            offending path, e.g. ``app.roles[0].resource.cpu``)
    """
    where = "app"
    version = opt(data, "version", int, where, FORMAT_VERSION)
    if version > FORMAT_VERSION:
        raise AppDefSerializationError(
            f"app: format version {version} is newer than this torchx-suite supports"
            f" ({FORMAT_VERSION}); upgrade torchx-suite"
        )
    roles = opt(data, "roles", list, where, [])
    return AppDef(
        name=req(data, "name", str, where),
        roles=[role_from_dict(r, f"{where}.roles[{i}]") for i, r in enumerate(roles)],
        metadata=dict(opt(data, "metadata", dict, where, {})),
    )


def appdef_to_json(app: AppDef) -> str:
    """Returns the JSON string of :py:func:`appdef_to_dict`."""
    import json

    return json.dumps(appdef_to_dict(app))


def appdef_from_json(text: str) -> AppDef:
    """Parses :py:func:`appdef_to_json` output.

    Raises:
        AppDefSerializationError: not valid JSON or not a valid AppDef dict
    """
    try:
        import json

        data = json.loads(text)
    except (TypeError, ValueError) as e:
        shown = text if len(str(text)) <= 80 else f"{str(text)[:77]}..."
        raise AppDefSerializationError(
            f"AppDef JSON {shown!r} is not valid JSON ({e}); pass the output of appdef_to_json"
        ) from None
    return appdef_from_dict(data)
