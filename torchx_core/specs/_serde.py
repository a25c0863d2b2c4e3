"""JSON-compatible dict form of AppDef (and AppStatus), used to store and ship app definitions.

Public entry points: :py:func:`appdef_to_dict`, :py:func:`appdef_from_dict` (re-exported by
:mod:`torchx_core.specs.api`) and ``AppDef.to_dict()`` / ``AppDef.from_dict()``.

The dict form keeps every field: roles (all fields, ``retry_policy`` by name), resources
(``capabilities``, ``devices``, ``tags`` and the named-resource name/fractional flag), mounts
(with a ``"type"`` of ``bind``/``volume``/``device``), workspace projects, metadata and
overrides. Overrides are stored *resolved*: the role's fields are read through them, and the
``overrides`` entry keeps only JSON-compatible values (callables/awaitables are dropped after
being resolved into the field values). Metadata values are kept as given, so ``json.dumps``
fails loudly on metadata that is not JSON-compatible.
"""

from __future__ import annotations

from collections.abc import Mapping

from torchx_core.specs._app import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    Workspace,
)
from torchx_core.specs._status import AppState, AppStatus, ReplicaStatus, RoleStatus
from torchx_core.specs.errors import AppDefSerializationError

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from typing import Any

FORMAT_VERSION = 1


def _jsonable(value: Any) -> bool:
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


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


def _mount_to_dict(m: BindMount | VolumeMount | DeviceMount) -> dict[str, Any]:
    if isinstance(m, BindMount):
        return {
            "type": "bind",
            "src_path": m.src_path,
            "dst_path": m.dst_path,
            "read_only": m.read_only,
        }
    if isinstance(m, VolumeMount):
        return {"type": "volume", "src": m.src, "dst_path": m.dst_path, "read_only": m.read_only}
    if isinstance(m, DeviceMount):
        return {
            "type": "device",
            "src_path": m.src_path,
            "dst_path": m.dst_path,
            "permissions": m.permissions,
        }
    raise AppDefSerializationError(
        f"mount {m!r} is not a BindMount, VolumeMount or DeviceMount; cannot serialize it"
    )


def role_to_dict(role: Role) -> dict[str, Any]:
    """Returns the dict form of a Role (fields read through its overrides)."""
    from torchx_core.specs._overrides import ResolvedOverride

    overrides = {
        k: v.value if isinstance(v, ResolvedOverride) else v for k, v in role.overrides.items()
    }
    overrides = {k: v for k, v in overrides.items() if _jsonable(v)}
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
        "mounts": [_mount_to_dict(m) for m in role.mounts],
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


def _req(data: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(data, Mapping):
        raise AppDefSerializationError(f"{where}: expected an object, got {data!r}")
    if key not in data:
        raise AppDefSerializationError(
            f"{where}: missing required key {key!r} (keys given: {sorted(data)})"
        )
    val = data[key]
    if not isinstance(val, types):
        names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise AppDefSerializationError(
            f"{where}.{key}: expected {names}, got {val!r} ({type(val).__name__})"
        )
    return val


def _opt(
    data: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str, default: Any
) -> Any:
    if not isinstance(data, Mapping):
        raise AppDefSerializationError(f"{where}: expected an object, got {data!r}")
    if data.get(key) is None:
        return default
    return _req(data, key, types, where)


def resource_from_dict(data: Mapping[str, Any], where: str = "resource") -> Resource:
    """Builds a Resource from :py:func:`resource_to_dict` output."""
    res = Resource(
        cpu=_req(data, "cpu", int, where),
        gpu=_req(data, "gpu", int, where),
        memMB=_req(data, "memMB", int, where),
        capabilities=dict(_opt(data, "capabilities", dict, where, {})),
        devices=dict(_opt(data, "devices", dict, where, {})),
        tags=dict(_opt(data, "tags", dict, where, {})),
    )
    name = _opt(data, "name", str, where, None)
    if name is not None or data.get("fractional"):
        res._set_named(name, bool(data.get("fractional")))
    return res


def _mount_from_dict(data: Mapping[str, Any], where: str) -> BindMount | VolumeMount | DeviceMount:
    typ = _req(data, "type", str, where)
    if typ == "bind":
        return BindMount(
            _req(data, "src_path", str, where),
            _req(data, "dst_path", str, where),
            bool(data.get("read_only", False)),
        )
    if typ == "volume":
        return VolumeMount(
            _req(data, "src", str, where),
            _req(data, "dst_path", str, where),
            bool(data.get("read_only", False)),
        )
    if typ == "device":
        return DeviceMount(
            _req(data, "src_path", str, where),
            _req(data, "dst_path", str, where),
            _opt(data, "permissions", str, where, "rwm"),
        )
    raise AppDefSerializationError(f"{where}.type: {typ!r} is not one of bind, volume, device")


def role_from_dict(data: Mapping[str, Any], where: str = "role") -> Role:
    """Builds a Role from :py:func:`role_to_dict` output."""
    policy = _opt(data, "retry_policy", str, where, "APPLICATION")
    try:
        retry_policy = RetryPolicy(policy)
    except ValueError:
        raise AppDefSerializationError(
            f"{where}.retry_policy: {policy!r} is not one of {[p.value for p in RetryPolicy]}"
        ) from None
    ws = _opt(data, "workspace", dict, where, None)
    return Role(
        name=_req(data, "name", str, where),
        image=_req(data, "image", str, where),
        min_replicas=_opt(data, "min_replicas", int, where, None),
        entrypoint=_opt(data, "entrypoint", str, where, "<MISSING>"),
        args=list(_opt(data, "args", list, where, [])),
        env=dict(_opt(data, "env", dict, where, {})),
        num_replicas=_opt(data, "num_replicas", int, where, 1),
        max_retries=_opt(data, "max_retries", int, where, 0),
        retry_policy=retry_policy,
        resource=resource_from_dict(
            _opt(data, "resource", dict, where, {"cpu": -1, "gpu": -1, "memMB": -1}),
            f"{where}.resource",
        ),
        port_map=dict(_opt(data, "port_map", dict, where, {})),
        metadata=dict(_opt(data, "metadata", dict, where, {})),
        mounts=[
            _mount_from_dict(m, f"{where}.mounts[{i}]")
            for i, m in enumerate(_opt(data, "mounts", list, where, []))
        ],
        workspace=Workspace(projects=dict(ws)) if ws is not None else None,
        overrides=dict(_opt(data, "overrides", dict, where, {})),
        base_image=_opt(data, "base_image", str, where, None),
    )


def appdef_from_dict(data: Mapping[str, Any]) -> AppDef:
    """Builds an AppDef from :py:func:`appdef_to_dict` output.

    Raises:
        AppDefSerializationError: ``data`` is not a valid AppDef dict (the message names the
            offending path, e.g. ``app.roles[0].resource.cpu``)
    """
    where = "app"
    version = _opt(data, "version", int, where, FORMAT_VERSION)
    if version > FORMAT_VERSION:
        raise AppDefSerializationError(
            f"app: format version {version} is newer than this torchx-suite supports"
            f" ({FORMAT_VERSION}); upgrade torchx-suite"
        )
    roles = _opt(data, "roles", list, where, [])
    return AppDef(
        name=_req(data, "name", str, where),
        roles=[role_from_dict(r, f"{where}.roles[{i}]") for i, r in enumerate(roles)],
        metadata=dict(_opt(data, "metadata", dict, where, {})),
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


def _state(value: Any, where: str) -> AppState:
    if isinstance(value, str) and value in AppState.__members__:
        return AppState[value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return AppState(value)
        except ValueError:
            pass
    raise AppDefSerializationError(
        f"{where}: {value!r} is not an AppState; valid: {list(AppState.__members__)}"
    )


def app_status_from_json(data: Mapping[str, Any]) -> AppStatus:
    """Builds an AppStatus from ``AppStatus.to_json()`` output (states by name or number)."""
    where = "status"
    roles = []
    for i, r in enumerate(_opt(data, "roles", list, where, [])):
        rw = f"{where}.roles[{i}]"
        replicas = [
            ReplicaStatus(
                id=_req(rep, "id", int, f"{rw}.replicas[{j}]"),
                state=_state(
                    _req(rep, "state", (str, int), f"{rw}.replicas[{j}]"),
                    f"{rw}.replicas[{j}].state",
                ),
                role=_req(rep, "role", str, f"{rw}.replicas[{j}]"),
                hostname=_opt(rep, "hostname", str, f"{rw}.replicas[{j}]", ""),
                structured_error_msg=_opt(
                    rep, "structured_error_msg", str, f"{rw}.replicas[{j}]", "<NONE>"
                ),
                hostaddr=_opt(rep, "hostaddr", str, f"{rw}.replicas[{j}]", None),
            )
            for j, rep in enumerate(_opt(r, "replicas", list, rw, []))
        ]
        roles.append(RoleStatus(role=_req(r, "role", str, rw), replicas=replicas))
    return AppStatus(
        state=_state(_req(data, "state", (str, int), where), f"{where}.state"),
        num_restarts=_opt(data, "num_restarts", int, where, 0),
        msg=_opt(data, "msg", str, where, ""),
        structured_error_msg=_opt(data, "structured_error_msg", str, where, "<NONE>"),
        # TorchX writes "url"; earlier releases of ours wrote "ui_url"
        ui_url=_opt(data, "url" if "url" in data else "ui_url", str, where, None),
        roles=roles,
    )
