"""A package's lazy public face, written once: its module ``__getattr__`` and ``__dir__``.

A package that re-exports names from submodules it must not import eagerly (import time, heavy
optional dependencies) hands the name -> module table to :func:`lazy_exports`::

    _LAZY = {"Runner": "torchx_core.runner.api"}
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

Standard library only, and not even ``typing`` at run time: ``import torchx_core.specs`` uses it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str, exports: Mapping[str, str], namespace: dict[str, Any], cache: bool = True
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of the package ``module`` whose ``namespace`` is its
    ``globals()``: ``exports`` maps each lazy name to the module that defines it.

    The name is imported on first access; with ``cache`` it is then stored in ``namespace``
    (later accesses cost nothing), without it every access reads the defining module again (a
    test that replaces the name there is seen). An unknown name raises the ``AttributeError``
    Python itself raises; ``dir()`` lists the loaded names and every lazy one.
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(source), name)
        if cache:
            namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
