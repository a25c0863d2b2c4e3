"""App definition dataclasses: Resource, RetryPolicy, mounts, Workspace, macros, Role, AppDef.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
Pure data: nothing here does I/O at import time.
"""

from __future__ import annotations

import os
from enum import Enum

from torchx_core.specs._dc import data, field, field_names
from torchx_core.specs.errors import (
    InvalidMountError,
    InvalidResourceError,
    InvalidWorkspaceError,
    did_you_mean,
)

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from torchx_core.specs._status import AppDryRunInfo

# Resource.tags keys set by torchx_core.plugins.register.named_resource (see resource_tags)
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
# "use the whole host": schedulers that support it do not constrain the role
ALL: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    return Resource(cpu=-1, gpu=-1, memMB=-1)


_DEFAULT_CPU = 2
_DEFAULT_GPU = 0
_DEFAULT_MEM_MB = 1024


def _check_count(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidResourceError(
            f"resource({name}={value!r}): {name} must be a non-negative int (or None for the default)"
        )
    if value < 0:
        raise InvalidResourceError(
            f"resource({name}={value!r}): {name} must be >= 0 (or None for the default)"
        )
    return value


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,
    h: str | None = None,
) -> Resource:
    """Creates a Resource from raw specs or a named resource.

    When ``h`` is set, it takes precedence (raw specs are ignored). Unset raw specs default to
    ``cpu=2, gpu=0, memMB=1024``.

    >>> resource(cpu=4, gpu=1, memMB=8192)
    Resource(cpu=4, gpu=1, memMB=8192, capabilities={}, devices={}, tags={})

    Args:
        cpu: number of logical cpu cores
        gpu: number of gpus
        memMB: MB of ram
        h: a registered named resource (e.g. ``"gpu.small"``, ``"aws_p3.2xlarge"``)

    Raises:
        UnknownNamedResourceError: ``h`` is not a registered named resource
        InvalidResourceError: a raw value is not a non-negative int
    """
    if h is not None and h != "":
        if not isinstance(h, str):
            raise InvalidResourceError(f"resource(h={h!r}): h must be a named-resource name (str)")
        from torchx_core.specs.register import get_named_resources

        return get_named_resources(h)
    cpu_v = _check_count("cpu", cpu)
    gpu_v = _check_count("gpu", gpu)
    mem_v = _check_count("memMB", memMB)
    return Resource(
        cpu=cpu_v or _DEFAULT_CPU,
        gpu=gpu_v or _DEFAULT_GPU,
        memMB=mem_v or _DEFAULT_MEM_MB,
    )


class RetryPolicy(str, Enum):
    """Defines the retry policy for the Roles in the AppDef.

    1. REPLICA: Replaces the replica instance. Surviving replicas are untouched.
    2. APPLICATION: Restarts the entire application.
    3. ROLE: Restarts the role when any error occurs in that role (not the whole job).

    All schedulers support ``APPLICATION``.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"

    def __str__(self) -> str:
        return self.value


class MountType(str, Enum):
    """Kinds of mounts accepted by :py:func:`parse_mounts`."""

    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@data
class BindMount:
    """Bind-mounts a host path into the worker container.

    Args:
        src_path: the path on the host
        dst_path: the path in the worker environment/container
        read_only: whether the mount is read only
    """

    src_path: str
    dst_path: str
    read_only: bool = False


@data
class VolumeMount:
    """Mounts a persistent volume into the worker container.

    Args:
        src: the name or ID of the volume to mount
        dst_path: the path in the worker environment/container
        read_only: whether the mount is read only
    """

    src: str
    dst_path: str
    read_only: bool = False


@data
class DeviceMount:
    """Mounts a host device into the container.

    Args:
        src_path: the path on the host
        dst_path: the path in the worker environment/container
        permissions: the permissions to set on the device (any of ``r``, ``w``, ``m``)
    """

    src_path: str
    dst_path: str
    permissions: str = "rwm"


_MOUNT_FORMAT = (
    "type=bind,src=<host path>,dst=<container path>[,readonly] | "
    "type=volume,src=<name/id>,dst=<container path>[,readonly] | "
    "type=device,src=/dev/<dev>[,dst=<container path>][,perm=rwm]"
)
_MOUNT_KEYS: dict[str, set[str]] = {
    "bind": {"type", "src", "dst", "readonly"},
    "volume": {"type", "src", "dst", "readonly"},
    "device": {"type", "src", "dst", "perm"},
}
# Docker's spellings, accepted as in TorchX
_MOUNT_ALIASES: dict[str, str] = {
    "source": "src",
    "target": "dst",
    "destination": "dst",
    "read_only": "readonly",
}
_MOUNT_OPTIONS = sorted({*_MOUNT_ALIASES, *(k for keys in _MOUNT_KEYS.values() for k in keys)})


def parse_mounts(opts: list[str]) -> list[BindMount | VolumeMount | DeviceMount]:
    """Parses a list of options into typed mounts, in a format similar to Docker's bind mounts.

    Multiple mounts can be given in the same list; ``type`` must come first in each. Elements
    may also hold several comma separated options. Docker's spellings ``source``, ``target``,
    ``destination`` and ``read_only`` are aliases of ``src``, ``dst`` and ``readonly``; a bind
    mount's ``~`` is expanded to the home directory.

    Supported types::

        BindMount:   type=bind,src=<host path>,dst=<container path>[,readonly]
        VolumeMount: type=volume,src=<name/id>,dst=<container path>[,readonly]
        DeviceMount: type=device,src=/dev/<dev>[,dst=<container path>][,perm=rwm]

    >>> parse_mounts(["type=bind", "src=/a", "dst=/b", "readonly"])
    [BindMount(src_path='/a', dst_path='/b', read_only=True)]

    Args:
        opts: the options, e.g. ``["type=bind", "src=/host", "dst=/container"]``

    Raises:
        InvalidMountError: the options do not describe valid mounts
    """
    if isinstance(opts, str) or not isinstance(opts, (list, tuple)):
        raise InvalidMountError(
            f"parse_mounts expects a list of option strings, got {opts!r}. Valid: {_MOUNT_FORMAT}"
        )
    groups: list[dict[str, str]] = []
    for opt in opts:
        if not isinstance(opt, str):
            raise InvalidMountError(f"mount option {opt!r} is not a string. Valid: {_MOUNT_FORMAT}")
        for part in opt.split(","):
            part = part.strip()
            if not part:
                continue
            key, _, val = part.partition("=")
            key = _MOUNT_ALIASES.get(key.strip(), key.strip())
            if key not in _MOUNT_OPTIONS:
                raise InvalidMountError(
                    f"unknown mount option {key}, must be one of {_MOUNT_OPTIONS} (given:"
                    f" {part!r}).{did_you_mean(key, _MOUNT_OPTIONS)} Valid: {_MOUNT_FORMAT}"
                )
            if key == "type":
                groups.append({})
            elif not groups:
                raise InvalidMountError(
                    f"mount option {part!r} comes before any 'type=...'; type must be specified"
                    f" first. Valid: {_MOUNT_FORMAT}"
                )
            if key in groups[-1]:
                raise InvalidMountError(f"mount option {key!r} given twice in one mount: {opts!r}")
            groups[-1][key] = val.strip()
    return [_make_mount(g) for g in groups]


def _make_mount(opts: dict[str, str]) -> BindMount | VolumeMount | DeviceMount:
    typ = opts.get("type", "")
    if typ not in _MOUNT_KEYS:
        raise InvalidMountError(
            f"invalid mount type {typ!r}, must be one of bind, volume, device. Valid: {_MOUNT_FORMAT}"
        )
    unknown = set(opts) - _MOUNT_KEYS[typ]
    if unknown:
        raise InvalidMountError(
            f"unknown option(s) {sorted(unknown)} for a {typ} mount;"
            f" valid options: {sorted(_MOUNT_KEYS[typ])}"
        )
    src = opts.get("src", "")
    if not src:
        raise InvalidMountError(
            f"{typ} mount {opts!r} needs a non-empty src=. Valid: {_MOUNT_FORMAT}"
        )
    if typ == "device":
        perm = opts.get("perm", "rwm")
        bad = [c for c in perm if c not in "rwm"]
        if not perm or bad:
            raise InvalidMountError(
                f"device mount perm={perm!r} is invalid; use a combination of 'r', 'w', 'm'"
            )
        return DeviceMount(src_path=src, dst_path=opts.get("dst") or src, permissions=perm)
    dst = opts.get("dst", "")
    if not dst:
        raise InvalidMountError(
            f"{typ} mount {opts!r} needs a non-empty dst=. Valid: {_MOUNT_FORMAT}"
        )
    if opts.get("readonly", "") not in ("", "true", "True", "1"):
        raise InvalidMountError(
            f"readonly={opts['readonly']!r} is invalid; write 'readonly' (or readonly=true)"
        )
    read_only = "readonly" in opts
    if typ == "bind":
        return BindMount(src_path=os.path.expanduser(src), dst_path=dst, read_only=read_only)
    return VolumeMount(src=src, dst_path=dst, read_only=read_only)


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
        to ``d``. ``None`` or ``""`` return None. ``str(workspace)`` writes ``a:b;c:d``.

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
            if all(k == OVERRIDES_LOCK_KEY for k in overrides):  # nothing to share
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
#: the reserved key under which an overrides dict keeps its resolution lock (see _overrides)
OVERRIDES_LOCK_KEY = "<overrides resolution lock>"
_object_getattribute = object.__getattribute__


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

    def pre_proc(self, scheduler: str, dryrun_info: AppDryRunInfo) -> AppDryRunInfo:
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
        from torchx_core.specs._serde import appdef_to_dict

        return appdef_to_dict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> AppDef:
        """Builds an AppDef from the output of :py:meth:`to_dict`.

        Raises:
            AppDefSerializationError: ``data`` is not a valid AppDef dict
        """
        from torchx_core.specs._serde import appdef_from_dict

        return appdef_from_dict(data)
