"""The ``register`` decorators and the helpers for fractional named resources.

Import from :mod:`torchx_core.plugins`. Resources are handled by duck typing (``cpu``, ``gpu``,
``memMB``, ``tags``) so this module imports nothing from ``torchx_core.specs``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from torchx_core.plugins._registry import NAMED_RESOURCES_ATTR, PluginType

F = TypeVar("F", bound=Callable[..., object])

#: Share of a whole host (cpu, memory and gpus) a fractional named resource asks for.
WHOLE: float = 1.0
HALF: float = 0.5
QUARTER: float = 0.25
EIGHTH: float = 0.125
SIXTEENTH: float = 0.0625


class resource_tags:
    """``Resource.tags`` keys set on every resource made by ``register.named_resource``.

    Prefer ``Resource.get_resource_name()`` and ``Resource.is_fractional()`` to reading them.
    """

    RESOURCE_NAME: str = "torchx/named_resources.name"
    IS_FRACTIONAL: str = "torchx/named_resources.is_fractional"


def powers_of_two_gpus(resource: Any) -> dict[float, str]:
    """Fractions of ``resource`` down to one GPU, named by their GPU count.

    >>> from types import SimpleNamespace
    >>> powers_of_two_gpus(SimpleNamespace(gpu=8))
    {1.0: '8', 0.5: '4', 0.25: '2', 0.125: '1'}

    Raises:
        ValueError: ``resource.gpu`` is not a positive power of two
    """
    gpus = resource.gpu
    if gpus <= 0 or gpus & (gpus - 1):
        raise ValueError(
            f"powers_of_two_gpus needs a resource whose gpu count is a power of two > 0,"
            f" got gpu={gpus}"
        )
    out: dict[float, str] = {}
    fraction = WHOLE
    while (n := int(gpus * fraction)) > 0:
        out[fraction] = str(n)
        fraction /= 2
    return out


def halve_mem_down_to(*, minGiB: int) -> Callable[..., dict[float, str]]:
    """Fractions of a resource by halving its memory down to ``minGiB``, named by GiB.

    >>> from types import SimpleNamespace
    >>> halve_mem_down_to(minGiB=8)(SimpleNamespace(memMB=64 * 1024))
    {1.0: '64', 0.5: '32', 0.25: '16', 0.125: '8'}

    Args:
        minGiB: the smallest slice, in GiB; at least the odd part of the memory in GiB (so
            that every slice is a whole number of GiB)

    Raises:
        ValueError: (when applied) memMB is not a positive whole number of GiB, or ``minGiB``
            is below its odd part
    """

    def fractions(resource: Any) -> dict[float, str]:
        mem_mb = resource.memMB
        if mem_mb <= 0 or mem_mb % 1024:
            raise ValueError(
                f"halve_mem_down_to needs memMB to be a positive whole number of GiB"
                f" (a multiple of 1024), got memMB={mem_mb}"
            )
        gib = mem_mb // 1024
        odd = gib
        while odd % 2 == 0:
            odd //= 2
        if minGiB < odd:
            raise ValueError(
                f"halve_mem_down_to(minGiB={minGiB}): halving {gib} GiB below {odd} GiB gives"
                f" fractions of a GiB; use minGiB >= {odd}"
            )
        out: dict[float, str] = {}
        fraction = WHOLE
        while (n := int(gib * fraction)) >= minGiB:
            out[fraction] = str(n)
            fraction /= 2
        return out

    return fractions


class register:
    """Marks a function as a plugin for discovery under the ``torchx_plugins`` namespace.

    Put the decorated function in a module under ``torchx_plugins.<kind>`` (a namespace
    package: no ``__init__.py`` in ``torchx_plugins/`` nor in ``torchx_plugins/<kind>/``)::

        # torchx_plugins/schedulers/my_scheduler.py
        from torchx_core.plugins import register

        @register.scheduler()
        def my_scheduler(session_name: str, **kwargs) -> Scheduler: ...

    Args:
        type: the kind of plugin
        name: its name (default: the function's name)
    """

    def __init__(self, type: PluginType, name: str | None = None) -> None:
        self._type = type
        self._name = name

    def __call__(self, fn: F) -> F:
        fn._plugin_type = self._type  # type: ignore[attr-defined]
        fn._plugin_name = self._name or fn.__name__  # type: ignore[attr-defined]
        return fn

    @classmethod
    def scheduler(cls, name: str | None = None) -> register:
        """Registers a scheduler factory ``fn(session_name, **kwargs) -> Scheduler``."""
        return cls(PluginType.SCHEDULER, name=name)

    @classmethod
    def tracker(cls, name: str | None = None) -> register:
        """Registers a tracker factory ``fn(config: str | None) -> TrackerBase``."""
        return cls(PluginType.TRACKER, name=name)

    @classmethod
    def named_resource(
        cls,
        name: str | None = None,
        aliases: list[str] | None = None,
        fractionals: Callable[..., dict[float, str]] | dict[float, str] | None = None,
    ) -> _register_named_resource:
        """Registers a named resource factory (and its aliases and fractional variants).

        With ``fractionals`` (a ``{fraction: suffix}`` dict or a function of the whole
        resource returning one, e.g. :func:`powers_of_two_gpus`), the function must accept
        ``fractional: float`` (``WHOLE`` when called without it); each entry registers
        ``f"{name}_{suffix}"``, a zero-argument factory calling ``fn(fraction)``.

        Args:
            name: the resource name (default: the function's name)
            aliases: more names for the same (whole) resource
            fractionals: the fractional variants to register
        """
        return _register_named_resource(name=name, aliases=aliases, fractionals=fractionals)


class _register_named_resource(register):
    """``register.named_resource``: tags the factories and sets module attributes.

    Every factory registered (base, alias, variant) is a module attribute of the decorated
    function's module (``from my_mod import my_gpu_4``) and an entry of its
    ``NAMED_RESOURCES`` dict; the resources it returns carry :class:`resource_tags`.
    """

    def __init__(
        self,
        name: str | None = None,
        aliases: list[str] | None = None,
        fractionals: Callable[..., dict[float, str]] | dict[float, str] | None = None,
    ) -> None:
        super().__init__(PluginType.NAMED_RESOURCE, name=name)
        self._aliases = list(aliases or [])
        self._fractionals = fractionals

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:  # type: ignore[override]
        mod = sys.modules[fn.__module__]
        name = self._name or fn.__name__
        table: dict[str, Any] = mod.__dict__.setdefault(NAMED_RESOURCES_ATTR, {})

        def add(
            reg_name: str,
            factory: Callable[..., Any],
            attr: bool,
            base: str | None,
            alias: bool = False,
        ) -> None:
            if reg_name in table:
                raise ValueError(f"duplicate named resource `{reg_name}` in `{mod.__name__}`")
            factory.__module__ = fn.__module__
            factory.__qualname__ = reg_name
            factory._plugin_type = PluginType.NAMED_RESOURCE  # type: ignore[attr-defined]
            factory._plugin_name = reg_name  # type: ignore[attr-defined]
            if base is not None:
                factory._plugin_base_name = base  # type: ignore[attr-defined]
                factory._plugin_is_alias = alias  # type: ignore[attr-defined]
            table[reg_name] = factory
            if attr:
                if hasattr(mod, reg_name):
                    raise AttributeError(f"`{reg_name}` already exists in `{mod.__name__}`")
                setattr(mod, reg_name, factory)

        def factory(*args: Any, **kwargs: Any) -> Any:
            return _tagged(fn(*args, **kwargs), name, False)

        add(name, factory, name != fn.__name__, None)
        factory.__qualname__ = fn.__qualname__
        for alias in self._aliases:
            add(alias, _delegate(factory), True, name, alias=True)
        if self._fractionals:
            spec = self._fractionals
            table_of = spec if isinstance(spec, dict) else spec(fn())
            for fraction, suffix in table_of.items():
                frac_name = f"{name}_{suffix}"
                add(frac_name, _fraction_factory(fn, fraction, frac_name), True, name)
        return factory


def _tagged(resource: Any, name: str, fractional: bool) -> Any:
    resource.tags[resource_tags.RESOURCE_NAME] = name
    resource.tags[resource_tags.IS_FRACTIONAL] = fractional
    return resource


def _delegate(factory: Callable[..., Any]) -> Callable[..., Any]:
    def alias(*args: Any, **kwargs: Any) -> Any:
        return factory(*args, **kwargs)

    return alias


def _fraction_factory(fn: Callable[..., Any], fraction: float, name: str) -> Callable[[], Any]:
    def variant() -> Any:
        return _tagged(fn(fraction), name, fraction != WHOLE)

    return variant
