"""Core TorchX types for defining distributed applications (``torchx.specs`` compatible).

The main types are :py:class:`AppDef`, :py:class:`Role` and :py:class:`Resource`. Components
are functions that return an AppDef which can then be launched via a Scheduler.

>>> import torchx_core.specs as specs
>>> app = specs.AppDef(
...     name="echo",
...     roles=[specs.Role(name="worker", image="/tmp", entrypoint="/bin/echo", args=["hello"])],
... )
>>> app.name
'echo'

Importing this package imports only the standard library. Named resources, the component
builders and the other submodules load on first use.
"""

from __future__ import annotations

from torchx_core.specs.api import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    TORCHX_HOME,
    UNKNOWN,
    AppDef,
    AppDefSerializationError,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    CfgVal,
    ComponentArgumentError,
    ComponentNotFoundException,
    ComponentValidationException,
    DeviceMount,
    GiB,
    InvalidMountError,
    InvalidOverlayError,
    InvalidResourceError,
    InvalidRunConfigException,
    InvalidWorkspaceError,
    MalformedAppHandleException,
    MissingDependencyError,
    MountType,
    OverlayTypeError,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    RunOptDefinitionError,
    TorchXError,
    UnknownAppException,
    UnknownNamedResourceError,
    UnknownSchedulerException,
    VolumeMount,
    Workspace,
    appdef_from_dict,
    appdef_from_json,
    appdef_to_dict,
    appdef_to_json,
    cases,
    get_type_name,
    import_optional,
    is_started,
    is_terminal,
    macros,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
    replica_pairs,
    runopt,
    runopts,
)
from torchx_core.util.lazy import lazy_exports

# names resolved lazily (on first attribute access) -> defining module
_LAZY: dict[str, str] = {
    "CapabilityKey": "torchx_core.specs.capabilities",
    "NA": "torchx_core.specs.metadata_keys",
    "TORCHX_CONTEXT_NAME": "torchx_core.specs.metadata_keys",
    "app_metadata": "torchx_core.specs.metadata_keys",
    "StructuredOpts": "torchx_core.specs.structured_opts",
    "named_resources": "torchx_core.specs.register",
    "get_named_resources": "torchx_core.specs.register",
    "named_resource": "torchx_core.specs.register",
    "resource": "torchx_core.specs.register",
    "_NamedResourcesLibrary": "torchx_core.specs.register",  # TorchX's name of its class
    "materialize_appdef": "torchx_core.specs.builders",
    "parse_args": "torchx_core.specs.builders",
}

__all__ = [
    "ALL",
    "MISSING",
    "NA",
    "NONE",
    "NULL_RESOURCE",
    "TORCHX_CONTEXT_NAME",
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
    "CapabilityKey",
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
    "app_metadata",
    "appdef_from_dict",
    "appdef_from_json",
    "appdef_to_dict",
    "appdef_to_json",
    "cases",
    "get_named_resources",
    "get_type_name",
    "import_optional",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "materialize_appdef",
    "named_resource",
    "named_resources",
    "parse_app_handle",
    "parse_args",
    "parse_mounts",
    "replica_pairs",
    "resource",
    "runopt",
    "runopts",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from torchx_core.specs.builders import materialize_appdef, parse_args
    from torchx_core.specs.capabilities import CapabilityKey
    from torchx_core.specs.metadata_keys import NA, TORCHX_CONTEXT_NAME, app_metadata
    from torchx_core.specs.register import (
        get_named_resources,
        named_resource,
        named_resources,
        resource,
    )
    from torchx_core.specs.structured_opts import StructuredOpts
