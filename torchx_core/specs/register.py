"""Named-resource registry: ``named_resources``, ``get_named_resources``, ``named_resource``.

Sources, merged on first lookup (never at import time):

1. the built-in tables :mod:`~torchx_core.specs.named_resources_generic` and
   :mod:`~torchx_core.specs.named_resources_aws`;
2. the ``torchx.named_resources`` entry point group; each entry point names a no-argument
   function returning a :py:class:`Resource` (a plugin replaces a built-in of the same name,
   with a logged warning; a plugin that fails to load is logged, recorded and skipped)::

       [project.entry-points."torchx.named_resources"]
       gpu_x_1 = "my_module.resources:gpu_x_1"

3. resources registered in code with :py:func:`named_resource`.

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
_BUILTIN_MODULES = (
    "torchx_core.specs.named_resources_generic",
    "torchx_core.specs.named_resources_aws",
)

ResourceFactory = Callable[[], Resource]


class _NamedResources(Mapping[str, Resource]):
    """Read-only, lazily loaded mapping of name -> Resource (a fresh copy per lookup)."""

    def __init__(self) -> None:
        self._factories: dict[str, tuple[ResourceFactory, bool]] | None = None
        self._registered: dict[str, tuple[ResourceFactory, bool]] = {}
        self._broken: dict[str, str] = {}
        self._lock = threading.Lock()

    def _load(self) -> dict[str, tuple[ResourceFactory, bool]]:
        factories = self._factories
        if factories is not None:
            return factories
        with self._lock:
            if self._factories is not None:
                return self._factories
            import importlib

            loaded: dict[str, tuple[ResourceFactory, bool]] = {}
            for mod_name in _BUILTIN_MODULES:
                mod = importlib.import_module(mod_name)
                for name, fn in mod.NAMED_RESOURCES.items():
                    loaded[name] = (fn, False)
            for name, fn in _load_entry_points(self._broken).items():
                if name in loaded:
                    logger.warning(
                        "named resource %r from entry point group %s replaces the built-in one",
                        name,
                        ENTRY_POINT_GROUP,
                    )
                loaded[name] = (fn, False)
            self._factories = loaded
            return loaded

    def _all(self) -> dict[str, tuple[ResourceFactory, bool]]:
        return {**self._load(), **self._registered}

    def __getitem__(self, name: str) -> Resource:
        entry = self._all().get(name) if isinstance(name, str) else None
        if entry is None:
            raise UnknownNamedResourceError(str(name), self._all(), self._broken)
        factory, fractional = entry
        res = factory()
        if not isinstance(res, Resource):
            raise InvalidResourceError(
                f"named resource {name!r}: its factory {factory!r} returned {res!r}, not a Resource"
            )
        return res._set_named(name, fractional or res.is_fractional())

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
        """Entry points that failed to load: ``{name: error}``."""
        self._load()
        return dict(self._broken)

    def _register(
        self, name: str, factory: ResourceFactory, fractional: bool, clobber: bool
    ) -> None:
        if not clobber and name in self._all():
            raise InvalidResourceError(
                f"named resource {name!r} is already registered; pass clobber=True to replace it"
            )
        self._registered[name] = (factory, fractional)

    def _unregister(self, name: str) -> None:
        self._registered.pop(name, None)


def _load_entry_points(broken: dict[str, str]) -> dict[str, ResourceFactory]:
    from importlib.metadata import entry_points

    out: dict[str, ResourceFactory] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
            logger.warning(
                "could not load named resource entry point %s = %s: %s", ep.name, ep.value, e
            )
            broken[ep.name] = f"{type(e).__name__}: {e}"
            continue
        if isinstance(obj, Resource):
            out[ep.name] = _constant(obj)
        elif callable(obj):
            out[ep.name] = obj
        else:
            broken[ep.name] = f"{ep.value} is neither a Resource nor a function returning one"
    return out


def _constant(res: Resource) -> ResourceFactory:
    def factory() -> Resource:
        return Resource.copy(res)

    return factory


named_resources: _NamedResources = _NamedResources()


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
        fracs = {f"{name}/{k}": _constant(_fraction(base, k, name)) for k in divisors}
        named_resources._register(name, factory, False, clobber)
        for frac_name, frac_factory in fracs.items():
            named_resources._register(frac_name, frac_factory, True, clobber)

    if resource is None:

        def decorator(fn: ResourceFactory) -> ResourceFactory:
            register(fn)
            return fn

        return decorator
    register(resource)
    return None
