"""What can be known about plugins without building the registry (nothing imported, no enums).

The launch path resolves a built-in scheduler through :func:`cannot_provide`: when no plugin can
carry the name, the registry (:mod:`torchx_core.plugins._registry`) is never imported.
"""

from __future__ import annotations

import os
import sys

from torchx_core.util import entrypoints

#: the namespace package plugins live under (``torchx_plugins.schedulers.my_sched``)
NAMESPACE_ROOT: str = "torchx_plugins"

#: ``TORCHX_PLUGINS_SOURCE`` bits (the values of ``PluginSource``)
_NAMESPACE_PKG = 1
_ENTRYPOINT = 2


def sources_from_env() -> int:
    """``TORCHX_PLUGINS_SOURCE`` as an int: 0 none, 1 namespace packages, 2 entry points, 3 both.

    Raises:
        ValueError: not one of 0, 1, 2, 3
    """
    every = _NAMESPACE_PKG | _ENTRYPOINT
    raw = os.environ.get("TORCHX_PLUGINS_SOURCE", str(every))
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= every:
        raise ValueError(
            f"TORCHX_PLUGINS_SOURCE={raw!r} is invalid; use 0 (no plugins), 1 (namespace"
            " packages only), 2 (entry points only) or 3 (both, the default)"
        )
    return value


def namespace_installed() -> bool:
    """Whether the ``torchx_plugins`` namespace package can be imported."""
    import importlib.util

    try:
        return importlib.util.find_spec(NAMESPACE_ROOT) is not None
    except (ImportError, ValueError):
        return False


def cannot_provide(group: str, name: str) -> bool:
    """True when no plugin of entry point ``group`` can be called ``name`` in the process-wide
    registry, decided without importing it; False when only the registry can tell.

    The registry may hold code registrations once it is imported, and an invalid
    ``TORCHX_PLUGINS_SOURCE`` must raise from the registry: both answer False.
    """
    if f"{__package__}._registry" in sys.modules:
        return False
    try:
        sources = sources_from_env()
    except ValueError:
        return False
    if sources & _ENTRYPOINT and name in entrypoints.declared_names(group):
        return False
    return not (sources & _NAMESPACE_PKG and namespace_installed())
