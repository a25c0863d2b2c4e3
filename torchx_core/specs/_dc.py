"""``data``: ``@dataclass`` with a shared ``__repr__``/``__eq__`` instead of generated ones.

``dataclasses`` compiles three functions per class (``__init__``, ``__repr__``, ``__eq__``)
with ``exec``; for the dozen classes defined when ``torchx_core.specs`` is imported that is a
noticeable part of the import time. ``data`` lets dataclasses generate only ``__init__`` and
installs one shared ``__repr__`` and ``__eq__`` that behave like the generated ones (same
output, same field selection, unhashable like ``eq=True`` dataclasses). Everything else is a
plain dataclass: ``dataclasses.fields/asdict/replace`` work unchanged.
"""

from __future__ import annotations

import reprlib
from dataclasses import Field, dataclass, field, fields

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T", bound=type)
else:

    def dataclass_transform(**_: object) -> Callable[[_T], _T]:
        return lambda fn: fn


_REPR: dict[type, tuple[str, ...]] = {}
_EQ: dict[type, tuple[str, ...]] = {}


def _repr_names(cls: type) -> tuple[str, ...]:
    names = _REPR.get(cls)
    if names is None:
        names = _REPR[cls] = tuple(f.name for f in fields(cls) if f.repr)
    return names


def _eq_names(cls: type) -> tuple[str, ...]:
    names = _EQ.get(cls)
    if names is None:
        names = _EQ[cls] = tuple(f.name for f in fields(cls) if f.compare)
    return names


@reprlib.recursive_repr()
def _dc_repr(self: Any) -> str:
    cls = type(self)
    body = ", ".join(f"{n}={getattr(self, n)!r}" for n in _repr_names(cls))
    return f"{cls.__qualname__}({body})"


def _dc_eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _eq_names(type(self))
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


@dataclass_transform(field_specifiers=(field, Field))
def data(cls: _T) -> _T:
    """Like ``@dataclass`` (defaults), with the shared ``__repr__``/``__eq__``."""
    own_repr = "__repr__" in cls.__dict__
    out: Any = dataclass(cls, repr=False, eq=False)
    if not own_repr:
        out.__repr__ = _dc_repr
    out.__eq__ = _dc_eq
    out.__hash__ = None  # eq=True dataclasses are unhashable
    return out  # type: ignore[no-any-return]
