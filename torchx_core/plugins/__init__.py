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

from typing import TYPE_CHECKING

from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_core.plugins._equality import plugins_equal
    from torchx_core.plugins._probe import cannot_provide
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
    from torchx_core.plugins._registry import (
        PluginRegistry,
        PluginSource,
        PluginType,
        RegistrationError,
        registry,
    )

# every name is imported on first use: looking up a built-in scheduler on the launch path asks
# only `_probe` (no registry, no enum classes) when no plugin can carry its name
_SUBMODULE_OF = {
    **dict.fromkeys(
        (
            "PluginRegistry",
            "PluginSource",
            "PluginType",
            "RegistrationError",
            "registry",
        ),
        "_registry",
    ),
    "cannot_provide": "_probe",
    "plugins_equal": "_equality",
    **dict.fromkeys(
        (
            "EIGHTH",
            "HALF",
            "QUARTER",
            "SIXTEENTH",
            "WHOLE",
            "halve_mem_down_to",
            "powers_of_two_gpus",
            "register",
            "resource_tags",
        ),
        "_registration",
    ),
}


__getattr__, __dir__ = lazy_exports(
    __name__, {k: f"{__name__}.{m}" for k, m in _SUBMODULE_OF.items()}, globals(), cache=False
)


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
    "cannot_provide",
    "halve_mem_down_to",
    "plugins_equal",
    "powers_of_two_gpus",
    "register",
    "registry",
    "resource_tags",
]
