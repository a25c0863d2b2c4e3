"""Schedulers: the backends that run apps, looked up by name.

Built-in backends are listed in :data:`DEFAULT_SCHEDULER_MODULES` and imported only when first
used; plugins register under the ``torchx.schedulers`` entry point group and add to them::

    [project.entry-points."torchx.schedulers"]
    my_sched = "my_pkg.my_scheduler:create_scheduler"

See :mod:`torchx_core.schedulers.registry` for the rules (lazy scan, broken plugins, clashes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx_core.schedulers.registry import (
    DEFAULT_SCHEDULER,
    DEFAULT_SCHEDULER_MODULES,
    ENTRY_POINT_GROUP,
    SchedulerFactory,
    SchedulerRegistry,
    SchedulerRegistryError,
    default_registry,
)
from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_core.schedulers.api import Scheduler

__all__ = [
    "DEFAULT_SCHEDULER_MODULES",
    "Scheduler",
    "SchedulerFactory",
    "SchedulerRegistry",
    "SchedulerRegistryError",
    "get_default_scheduler_name",
    "get_scheduler_factories",
    "get_scheduler_factory",
]


def get_scheduler_factories(
    group: str = ENTRY_POINT_GROUP, skip_defaults: bool = False
) -> dict[str, SchedulerFactory]:
    """Returns every available scheduler name -> factory (built-ins first, then plugins).

    The first entry is the default scheduler. Scans the entry point group (cached).

    Args:
        group: the entry point group holding plugin schedulers
        skip_defaults: return only the plugins, without the built-ins
    """
    registry = default_registry() if group == ENTRY_POINT_GROUP else SchedulerRegistry(group=group)
    if skip_defaults:
        builtins = set(registry.builtin_names())
        return {k: v for k, v in registry.factories().items() if k not in builtins}
    return registry.factories()


def get_scheduler_factory(name: str) -> SchedulerFactory:
    """Returns the factory of scheduler ``name`` (built-ins resolve without an entry point scan).

    Raises:
        UnknownSchedulerException: when no scheduler has that name (lists the valid ones).
    """
    return default_registry().get(name)


def get_default_scheduler_name() -> str:
    """The default scheduler: ``local_cwd``."""
    return DEFAULT_SCHEDULER


__getattr__, __dir__ = lazy_exports(
    __name__, {"Scheduler": "torchx_core.schedulers.api"}, globals(), cache=False
)
