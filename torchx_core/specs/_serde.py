"""Checked reads of the JSON-compatible dict forms (the bottom of the specs modules).

Each spec type keeps its own dict form beside it: ``Resource``, ``Role`` and ``AppDef`` in
``_app`` (public entry points :py:func:`appdef_to_dict` / :py:func:`appdef_from_dict`, re-exported
by :mod:`torchx_core.specs.api`, and ``AppDef.to_dict()`` / ``AppDef.from_dict()``), mounts in
``_mounts`` and ``AppStatus`` in ``_status``. This module holds what they share: the format
version and the key readers that raise :py:class:`AppDefSerializationError` naming the offending
path (e.g. ``app.roles[0].resource.cpu``). It imports no other spec module but ``errors``.

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

from torchx_core.specs.errors import AppDefSerializationError

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from typing import Any

FORMAT_VERSION = 1


def jsonable(value: Any) -> bool:
    """True if ``json.dumps`` accepts ``value``."""
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def req(data: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    """``data[key]``, checked to be one of ``types`` (``where`` names ``data`` in errors)."""
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


def opt(
    data: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str, default: Any
) -> Any:
    """Like :py:func:`req`, but ``default`` when ``key`` is missing or None."""
    if not isinstance(data, Mapping):
        raise AppDefSerializationError(f"{where}: expected an object, got {data!r}")
    if data.get(key) is None:
        return default
    return req(data, key, types, where)
