"""Named resources: ``named_resources``, ``get_named_resources``, ``named_resource``, ``resource``.

Sources, merged on first lookup (never at import time):

1. the built-in tables :mod:`~torchx_core.specs.named_resources_generic` and
   :mod:`~torchx_core.specs.named_resources_aws`, then the ``NAMED_RESOURCES`` of the module
   named by the ``TORCHX_CUSTOM_NAMED_RESOURCES`` environment variable (as in TorchX);
2. named-resource plugins from the one plugin registry (:mod:`torchx_core.plugins`): the
   ``torchx.named_resources`` entry point group (each entry point names a no-argument function
   returning a :py:class:`Resource`, or a Resource), the ``torchx_plugins.named_resources``
   namespace package (``@register.named_resource``), and resources registered in code with
   :py:func:`named_resource`::

       [project.entry-points."torchx.named_resources"]
       gpu_x_1 = "my_module.resources:gpu_x_1"

A plugin replaces a built-in of the same name (logged, unless it builds an equal resource); a
plugin that fails to load is recorded (see ``named_resources.broken``) and skipped.

Every resource handed out is a fresh object whose ``get_resource_name()`` returns its name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from torchx_core.specs._app import Resource
from torchx_core.specs.errors import InvalidResourceError, UnknownNamedResourceError

logger: logging.Logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "torchx.named_resources"
CUSTOM_NAMED_RESOURCES_ENV = "TORCHX_CUSTOM_NAMED_RESOURCES"
_BUILTIN_MODULES = (
    "torchx_core.specs.named_resources_generic",
    "torchx_core.specs.named_resources_aws",
)

ResourceFactory = Callable[[], Resource]


class _NamedResources(Mapping[str, Resource]):
    """Read-only, lazily loaded mapping of name -> Resource (a fresh copy per lookup).

    The built-in tables and the ``TORCHX_CUSTOM_NAMED_RESOURCES`` module are read on the first
    lookup and cached (``reset()`` drops the cache); plugins are read from the registry on each
    lookup (the registry caches its own discovery). A plugin module that looks a named resource
    up while it is being imported gets a ``RuntimeError`` (the registry records it as that
    plugin's load error), as in TorchX.

    Args:
        plugins: the plugin registry to read named-resource plugins from (default: the
            process-wide one)
    """

    def __init__(self, plugins: Any = None) -> None:
        self._plugins = plugins
        self._factories: dict[str, ResourceFactory] | None = None
        self._overrides_logged: set[str] = set()
        self._lock = threading.RLock()
        self._loading = False

    def _registry(self) -> Any:
        plugins = self._plugins
        if plugins is None:
            with self._lock:
                if self._plugins is None:
                    from torchx_core.plugins import registry

                    self._plugins = registry()
                plugins = self._plugins
        return plugins

    def _load(self) -> dict[str, ResourceFactory]:
        """The built-in and ``TORCHX_CUSTOM_NAMED_RESOURCES`` factories (cached)."""
        factories = self._factories
        if factories is not None:
            return factories
        with self._lock:
            if self._factories is None:
                import importlib

                # TorchX's sentinels: "NULL" and "MISSING" name the null resource ("not set")
                loaded: dict[str, ResourceFactory] = {"NULL": _null, "MISSING": _null}
                for mod_name in _BUILTIN_MODULES:
                    loaded.update(importlib.import_module(mod_name).NAMED_RESOURCES)
                loaded.update(_custom_named_resources())
                self._factories = loaded
            return self._factories

    def reset(self) -> None:
        """Drops the cached tables: the next lookup reads them again (as TorchX's ``reset``)."""
        with self._lock:
            self._factories = None
            self._overrides_logged.clear()

    def _all(self) -> dict[str, ResourceFactory]:
        from torchx_core.plugins import PluginType, plugins_equal

        with self._lock:  # re-entrant on this thread only: a plugin's import-time lookup
            if self._loading:
                raise RuntimeError(
                    "re-entrant named-resource lookup: the named-resource plugins are being"
                    " discovered on this thread, so a plugin module is looking a named resource"
                    " up at import time; the set is incomplete mid-scan, so move the lookup into"
                    " the factory function's body"
                )
            self._loading = True
            try:
                merged = dict(self._load())
                found = self._registry().get(PluginType.NAMED_RESOURCE)
            finally:
                self._loading = False
        for name, obj in found.items():
            factory = _as_factory(obj)
            if factory is None:
                continue
            if name in merged and name not in self._overrides_logged:
                self._overrides_logged.add(name)
                if not plugins_equal(merged[name], factory, PluginType.NAMED_RESOURCE):
                    logger.warning(
                        "named resource %r from a plugin replaces the built-in one", name
                    )
            merged[name] = factory
        return merged

    def __getitem__(self, name: str) -> Resource:
        factory = self._all().get(name) if isinstance(name, str) else None
        if factory is None:
            raise UnknownNamedResourceError(str(name), self._all(), self.broken)
        res = factory()
        if not isinstance(res, Resource):
            raise InvalidResourceError(
                f"named resource {name!r}: its factory {factory!r} returned {res!r}, not a Resource"
            )
        return res._set_named(name, res.is_fractional())

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._all()

    def __repr__(self) -> str:
        return f"named_resources({', '.join(sorted(self._all()))})"

    @property
    def broken(self) -> Mapping[str, str]:
        """Named-resource plugins that failed to load: ``{name or module: error}``."""
        from torchx_core.plugins import PluginType

        out = {
            e.name or e.module: e.error
            for e in self._registry().load_errors(PluginType.NAMED_RESOURCE)
        }
        for name, obj in self._registry().get(PluginType.NAMED_RESOURCE).items():
            if _as_factory(obj) is None:
                out[name] = f"{obj!r} is neither a Resource nor a function returning one"
        return out

    def _register(self, name: str, factory: ResourceFactory, clobber: bool) -> None:
        from torchx_core.plugins import PluginType

        if not clobber and name in self._all():
            raise InvalidResourceError(
                f"named resource {name!r} is already registered; pass clobber=True to replace it"
            )
        self._registry().add(PluginType.NAMED_RESOURCE, name, factory, replace=True)

    def _unregister(self, name: str) -> None:
        from torchx_core.plugins import PluginType

        self._registry().remove(PluginType.NAMED_RESOURCE, name)


def _custom_named_resources() -> Mapping[str, ResourceFactory]:
    """``NAMED_RESOURCES`` of the module named by ``TORCHX_CUSTOM_NAMED_RESOURCES`` (TorchX's
    variable); unset: none."""
    import importlib
    import os

    mod_name = os.environ.get(CUSTOM_NAMED_RESOURCES_ENV)
    if not mod_name:
        return {}
    hint = (
        f"set {CUSTOM_NAMED_RESOURCES_ENV} to an importable module that defines"
        " NAMED_RESOURCES = {name: factory}, or unset it"
    )
    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        raise InvalidResourceError(
            f"{CUSTOM_NAMED_RESOURCES_ENV}={mod_name!r}: cannot import it ({e}); {hint}"
        ) from e
    table = getattr(module, "NAMED_RESOURCES", {})
    if not isinstance(table, Mapping):
        raise InvalidResourceError(
            f"{CUSTOM_NAMED_RESOURCES_ENV}={mod_name!r}: its NAMED_RESOURCES is"
            f" {type(table).__name__}, not a mapping; {hint}"
        )
    return table


def _null() -> Resource:
    from torchx_core.specs._app import NULL_RESOURCE

    return Resource.copy(NULL_RESOURCE)


def _as_factory(obj: object) -> ResourceFactory | None:
    if isinstance(obj, Resource):
        return _constant(obj)
    return obj if callable(obj) else None


def _constant(res: Resource) -> ResourceFactory:
    def factory() -> Resource:
        return Resource.copy(res)

    return factory


named_resources: _NamedResources = _NamedResources()
_NamedResourcesLibrary = _NamedResources  # TorchX's name of the class


def get_named_resources(res: str) -> Resource:
    """Returns the Resource registered under ``res`` (e.g. ``"gpu.small"``).

    Raises:
        UnknownNamedResourceError: no such named resource (the message lists the known ones)
    """
    return named_resources[res]


def _fraction(base: Resource, k: int, name: str) -> Resource:
    if not isinstance(k, int) or isinstance(k, bool) or k < 2:
        raise InvalidResourceError(
            f"named resource {name!r}: fractional {k!r} must be an int >= 2 (the divisor)"
        )
    for label, value in (("cpu", base.cpu), ("gpu", base.gpu)):
        if value > 0 and value % k:
            raise InvalidResourceError(
                f"named resource {name!r}: {label}={value} is not divisible by fractional {k}"
            )
    return Resource(
        cpu=base.cpu // k,
        gpu=base.gpu // k,
        memMB=base.memMB // k,
        capabilities=dict(base.capabilities),
        devices={d: n // k for d, n in base.devices.items() if n // k > 0},
        tags=dict(base.tags),
    )


def named_resource(
    name: str,
    resource: Resource | ResourceFactory | None = None,
    *,
    fractionals: Iterable[int] = (),
    clobber: bool = False,
) -> Any:
    """Registers a named resource (usable as ``resource(h=name)``), optionally with fractions.

    Works as a call or as a decorator on a no-argument function returning a Resource::

        named_resource("my_gpu", Resource(cpu=64, gpu=8, memMB=512_000), fractionals=[2, 4, 8])

        @named_resource("my_host")
        def my_host() -> Resource:
            return Resource(cpu=32, gpu=0, memMB=128_000)

    For each divisor ``k`` in ``fractionals`` a slice named ``f"{name}/{k}"`` is registered
    holding ``1/k`` of the cpu, gpu, memory and devices; its ``is_fractional()`` is True.

    Args:
        name: the resource name
        resource: a Resource or a factory; omit to use as a decorator
        fractionals: divisors for fractional slices (ints >= 2 dividing cpu and gpu)
        clobber: replace an existing registration of the same name instead of raising

    Returns:
        The decorated function (decorator form) or None.

    Raises:
        InvalidResourceError: the name is taken (and not ``clobber``) or a fractional is invalid
    """
    if not isinstance(name, str) or not name:
        raise InvalidResourceError(f"named resource name must be a non-empty str, got {name!r}")

    def register(res: Resource | ResourceFactory) -> None:
        factory: ResourceFactory = _constant(res) if isinstance(res, Resource) else res
        if not callable(factory):
            raise InvalidResourceError(
                f"named resource {name!r}: expected a Resource or a function returning one,"
                f" got {res!r}"
            )
        base = factory()
        divisors = list(fractionals)
        fracs = {
            f"{name}/{k}": _constant(_fraction(base, k, name)._set_named(None, True))
            for k in divisors
        }
        named_resources._register(name, factory, clobber)
        for frac_name, frac_factory in fracs.items():
            named_resources._register(frac_name, frac_factory, clobber)

    if resource is None:

        def decorator(fn: ResourceFactory) -> ResourceFactory:
            register(fn)
            return fn

        return decorator
    register(resource)
    return None


_DEFAULT_CPU = 2
_DEFAULT_GPU = 0
_DEFAULT_MEM_MB = 1024


def _check_count(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidResourceError(
            f"resource({name}={value!r}): {name} must be a non-negative int"
            " (or None for the default)"
        )
    if value < 0:
        raise InvalidResourceError(
            f"resource({name}={value!r}): {name} must be >= 0 (or None for the default)"
        )
    return value


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,
    h: str | None = None,
) -> Resource:
    """Creates a Resource from raw specs or a named resource.

    When ``h`` is set, it takes precedence (raw specs are ignored). Unset raw specs default to
    ``cpu=2, gpu=0, memMB=1024``.

    >>> resource(cpu=4, gpu=1, memMB=8192)
    Resource(cpu=4, gpu=1, memMB=8192, capabilities={}, devices={}, tags={})

    Args:
        cpu: number of logical cpu cores
        gpu: number of gpus
        memMB: MB of ram
        h: a registered named resource (e.g. ``"gpu.small"``, ``"aws_p3.2xlarge"``)

    Raises:
        UnknownNamedResourceError: ``h`` is not a registered named resource
        InvalidResourceError: a raw value is not a non-negative int
    """
    if h is not None and h != "":
        if not isinstance(h, str):
            raise InvalidResourceError(f"resource(h={h!r}): h must be a named-resource name (str)")
        return get_named_resources(h)
    cpu_v = _check_count("cpu", cpu)
    gpu_v = _check_count("gpu", gpu)
    mem_v = _check_count("memMB", memMB)
    return Resource(
        cpu=cpu_v or _DEFAULT_CPU,
        gpu=gpu_v or _DEFAULT_GPU,
        memMB=mem_v or _DEFAULT_MEM_MB,
    )
