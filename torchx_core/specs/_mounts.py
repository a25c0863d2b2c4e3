"""Mount types (bind, volume, device), :py:func:`parse_mounts` and their dict form.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
Pure data: nothing here does I/O at import time.
"""

from __future__ import annotations

import os
from enum import Enum

from torchx_core.specs._dc import data
from torchx_core.specs._serde import opt, req
from torchx_core.specs.errors import AppDefSerializationError, InvalidMountError, did_you_mean

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


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
    for option in opts:
        if not isinstance(option, str):
            raise InvalidMountError(
                f"mount option {option!r} is not a string. Valid: {_MOUNT_FORMAT}"
            )
        for part in option.split(","):
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
            f"invalid mount type {typ!r}, must be one of bind, volume, device."
            f" Valid: {_MOUNT_FORMAT}"
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


def mount_to_dict(m: BindMount | VolumeMount | DeviceMount) -> dict[str, Any]:
    """Returns the dict form of a mount (with a ``"type"`` of ``bind``/``volume``/``device``)."""
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


def mount_from_dict(data: Mapping[str, Any], where: str) -> BindMount | VolumeMount | DeviceMount:
    """Builds a mount from :py:func:`mount_to_dict` output (``where`` names it in errors)."""
    typ = req(data, "type", str, where)
    if typ == "bind":
        return BindMount(
            req(data, "src_path", str, where),
            req(data, "dst_path", str, where),
            bool(data.get("read_only", False)),
        )
    if typ == "volume":
        return VolumeMount(
            req(data, "src", str, where),
            req(data, "dst_path", str, where),
            bool(data.get("read_only", False)),
        )
    if typ == "device":
        return DeviceMount(
            req(data, "src_path", str, where),
            req(data, "dst_path", str, where),
            opt(data, "permissions", str, where, "rwm"),
        )
    raise AppDefSerializationError(f"{where}.type: {typ!r} is not one of bind, volume, device")
