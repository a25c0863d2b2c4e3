"""The public ``torchx_core.specs.api`` module: TorchX's core data types.

The implementation is split into private modules (``_app``, ``_mounts``, ``_status``,
``_runopts``, ``_serde``), :mod:`torchx_core.specs.register` (``resource``) and
:mod:`torchx_core.specs.errors`; everything public is re-exported here and from
:mod:`torchx_core.specs`.

Pure data: importing this module imports only the standard library.

Beyond TorchX, AppDefs have a JSON-compatible dict form that round-trips every field (roles,
resources with capabilities/devices/tags and the named-resource name, mounts, retry policy,
workspace, metadata, JSON-compatible overrides): ``AppDef.to_dict()`` / ``AppDef.from_dict()``,
or :py:func:`appdef_to_dict` / :py:func:`appdef_from_dict` (and ``appdef_to_json`` /
``appdef_from_json``). ``AppStatus.to_json()`` / ``AppStatus.from_json()`` do the same for
statuses. Malformed input raises :py:class:`AppDefSerializationError` naming the offending path
(e.g. ``app.roles[0].resource.cpu``).
"""

from __future__ import annotations

from torchx_core.specs._app import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    TORCHX_HOME,
    UNKNOWN,
    AppDef,
    GiB,
    Resource,
    RetryPolicy,
    Role,
    Workspace,
    appdef_from_dict,
    appdef_from_json,
    appdef_to_dict,
    appdef_to_json,
    macros,
    replica_pairs,
)
from torchx_core.specs._mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts
from torchx_core.specs._runopts import CfgVal, cases, get_type_name, runopt, runopts
from torchx_core.specs._status import (  # _TERMINAL_STATES: TorchX's tests import it from here
    _TERMINAL_STATES,  # noqa: F401
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
    make_app_handle,
    parse_app_handle,
)
from torchx_core.specs.errors import (
    AppDefSerializationError,
    AppStatusError,
    ComponentArgumentError,
    ComponentNotFoundException,
    ComponentValidationException,
    InvalidMountError,
    InvalidOverlayError,
    InvalidResourceError,
    InvalidRunConfigException,
    InvalidWorkspaceError,
    MalformedAppHandleException,
    MissingDependencyError,
    OverlayTypeError,
    RunOptDefinitionError,
    TorchXError,
    UnknownAppException,
    UnknownNamedResourceError,
    UnknownSchedulerException,
    import_optional,
)
from torchx_core.util.lazy import lazy_exports

TYPE_CHECKING = False  # typing is not imported at run time

# Loaded on first use (module __getattr__ below): they are not needed to define an app and
# importing them eagerly would cost import time.
_LAZY: dict[str, str] = {
    "StructuredOpts": "torchx_core.specs.structured_opts",
    # beside the named-resource registry it reads (which loads logging and threading)
    "resource": "torchx_core.specs.register",
    # TorchX's overrides lock entry (its users' tests set or replace it)
    "_OVERRIDES_LOCK_KEY": "torchx_core.specs._overrides",
    "_OverridesLock": "torchx_core.specs._overrides",
}

__all__ = [
    "ALL",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "TORCHX_HOME",
    "UNKNOWN",
    "AppDef",
    "AppDefSerializationError",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "ComponentArgumentError",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "DeviceMount",
    "GiB",
    "InvalidMountError",
    "InvalidOverlayError",
    "InvalidResourceError",
    "InvalidRunConfigException",
    "InvalidWorkspaceError",
    "MalformedAppHandleException",
    "MissingDependencyError",
    "MountType",
    "OverlayTypeError",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "RunOptDefinitionError",
    "StructuredOpts",
    "TorchXError",
    "UnknownAppException",
    "UnknownNamedResourceError",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "appdef_from_dict",
    "appdef_from_json",
    "appdef_to_dict",
    "appdef_to_json",
    "cases",
    "get_type_name",
    "import_optional",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "parse_app_handle",
    "parse_mounts",
    "replica_pairs",
    "resource",
    "runopt",
    "runopts",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


if TYPE_CHECKING:
    from torchx_core.specs.register import resource
    from torchx_core.specs.structured_opts import StructuredOpts
