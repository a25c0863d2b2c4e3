"""When two same-name plugin registrations are the same plugin (import from
:mod:`torchx_core.plugins`).

Two portions of the ``torchx_plugins`` namespace (two installed distributions) may ship the same
named resource. Re-registering an equal value is idempotent; a different value is a recorded
duplicate. Values are compared structurally (:func:`normalize_value`) because generated types
(thrift enums and structs regenerated per distribution) compare by class identity.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchx_core.plugins._registry import PluginType

#: tag keys of ``register.named_resource`` (``resource_tags``), spelled here to keep this module
#: free of the registration module
_NAME_TAG = "torchx/named_resources.name"
_FRACTIONAL_TAG = "torchx/named_resources.is_fractional"
_RESOURCE_ATTRS = ("cpu", "gpu", "memMB", "capabilities", "devices", "tags")
#: ``PluginType.NAMED_RESOURCE`` (a ``str`` enum), by value: the registry imports this module
_NAMED_RESOURCE = "torchx.named_resources"


def normalize_value(v: Any) -> Any:
    """``v`` as plain, order-independent data: equal for semantically equal values.

    Enums (and ``int`` subclasses, as thrift-python enums are) become ``(type name, value)``,
    dataclasses and structs iterating as ``(field, value)`` pairs become field tuples, mappings
    and sets are sorted, sequences become tuples; anything else is compared by ``repr``.

    >>> normalize_value({8, 0}) == normalize_value({0, 8})
    True
    """
    if isinstance(v, enum.Enum):
        return ("enum", type(v).__name__, normalize_value(v.value))
    if v is None or type(v) in (str, int, float, bool, bytes):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return ("enum", type(v).__name__, int(v))
    fields = getattr(type(v), "__dataclass_fields__", None)
    if fields is not None and not isinstance(v, type):
        import dataclasses

        return (
            type(v).__name__,
            tuple((f.name, normalize_value(getattr(v, f.name))) for f in dataclasses.fields(v)),
        )
    if isinstance(v, dict):
        pairs = ((repr(normalize_value(k)), normalize_value(x)) for k, x in v.items())
        return ("dict", tuple(sorted(pairs, key=lambda kv: kv[0])))
    if isinstance(v, (set, frozenset)):
        return ("set", tuple(sorted((normalize_value(x) for x in v), key=repr)))
    if isinstance(v, (list, tuple)):
        return tuple(normalize_value(x) for x in v)
    return _struct_or_repr(v)


def _struct_or_repr(v: Any) -> Any:
    try:
        pairs = list(v)
    except TypeError:
        return repr(v)
    if pairs and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
        return (type(v).__name__, tuple((n, normalize_value(x)) for n, x in pairs))
    return repr(v)


def resource_key(r: Any) -> tuple[Any, ...]:
    """What makes two named resources equal: their fields, normalized.

    The name tag is dropped (only same-name registrations are compared) and so is a false
    ``is_fractional`` tag (an absent one means the same).
    """
    tags = dict(r.tags)
    tags.pop(_NAME_TAG, None)
    if not tags.get(_FRACTIONAL_TAG, False):
        tags.pop(_FRACTIONAL_TAG, None)
    return (
        r.cpu,
        r.gpu,
        r.memMB,
        normalize_value(r.capabilities),
        normalize_value(r.devices),
        normalize_value(tags),
    )


def plugins_equal(a: Any, b: Any, kind: PluginType) -> bool:
    """Whether two same-name registrations are the same plugin.

    The same object, or the same function (module and qualified name), always is. Named
    resources are also equal when their factories build equal resources (:func:`resource_key`,
    or :func:`normalize_value` for other values); a factory that raises never is. Other kinds
    are not called to find out.
    """
    if a is b or (_qualname(a) is not None and _qualname(a) == _qualname(b)):
        return True
    if kind != _NAMED_RESOURCE:
        return False
    try:
        va = a() if callable(a) else a
        vb = b() if callable(b) else b
        if all(hasattr(va, k) and hasattr(vb, k) for k in _RESOURCE_ATTRS):
            return resource_key(va) == resource_key(vb)
        return bool(normalize_value(va) == normalize_value(vb))
    except Exception:  # noqa: BLE001 - a factory that fails is never equal
        return False


def _qualname(obj: Any) -> str | None:
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if mod is None or qual is None or "<" in qual:
        return None
    return f"{mod}:{qual}"
