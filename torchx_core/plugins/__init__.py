"""One registry for plugins: schedulers, named resources and trackers (``torchx.plugins``).

Plugins come from three channels, merged per kind on first use and cached:

1. modules under the ``torchx_plugins.<kind>`` namespace package (``schedulers``,
   ``named_resources``, ``tracker``) holding functions decorated with :class:`register`::

       # torchx_plugins/named_resources/my_cluster.py
       from torchx_core.plugins import register, powers_of_two_gpus, WHOLE
       from torchx_core.specs import Resource

       @register.named_resource(fractionals=powers_of_two_gpus)
       def my_gpu(fractional: float = WHOLE) -> Resource:
           return Resource(cpu=int(64 * fractional), gpu=int(8 * fractional),
                           memMB=int(512_000 * fractional))   # my_gpu, my_gpu_8 ... my_gpu_1

2. entry points of the groups ``torchx.schedulers``, ``torchx.named_resources`` and
   ``torchx.tracker`` (they win over a namespace plugin of the same name; the clash is
   recorded);
3. registrations made in code (:meth:`PluginRegistry.add`).

A plugin that fails to load is recorded, not raised: ``registry().load_errors()`` lists them,
``print(registry())`` shows everything. The scheduler and named-resource lookups
(:mod:`torchx_core.schedulers`, :mod:`torchx_core.specs`) read their plugins from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchx_core.plugins._registry import (
    PluginRegistry,
    PluginSource,
    PluginType,
    RegistrationError,
    registry,
)

if TYPE_CHECKING:
    from torchx_core.plugins._registration import (
        EIGHTH,
        HALF,
        QUARTER,
        SIXTEENTH,
        WHOLE,
        halve_mem_down_to,
        powers_of_two_gpus,
        register,
        resource_tags,
    )

# what plugin authors write with (`register`, the fractions) is imported on first use: a
# scheduler lookup on the launch path only needs the registry
_REGISTRATION_NAMES = frozenset(
    {
        "EIGHTH",
        "HALF",
        "QUARTER",
        "SIXTEENTH",
        "WHOLE",
        "halve_mem_down_to",
        "powers_of_two_gpus",
        "register",
        "resource_tags",
    }
)


def __getattr__(name: str) -> Any:
    if name in _REGISTRATION_NAMES:
        from torchx_core.plugins import _registration

        return getattr(_registration, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EIGHTH",
    "HALF",
    "QUARTER",
    "SIXTEENTH",
    "WHOLE",
    "PluginRegistry",
    "PluginSource",
    "PluginType",
    "RegistrationError",
    "halve_mem_down_to",
    "powers_of_two_gpus",
    "register",
    "registry",
    "resource_tags",
]
