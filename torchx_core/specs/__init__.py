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

from torchx_core.specs.api import *
from torchx_core.specs.api import __all__ as _api_all

# names resolved lazily (on first attribute access) -> defining module
_LAZY: dict[str, str] = {
    "named_resources": "torchx_core.specs.register",
    "get_named_resources": "torchx_core.specs.register",
    "named_resource": "torchx_core.specs.register",
    "materialize_appdef": "torchx_core.specs.builders",
    "parse_args": "torchx_core.specs.builders",
}

__all__ = [*_api_all, *_LAZY]  # noqa: PLE0604 - both are lists of str


def __getattr__(name: str) -> object:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
