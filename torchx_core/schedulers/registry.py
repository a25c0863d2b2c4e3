"""The scheduler registry: scheduler name -> factory, built-ins plus plugins, all lazy.

Built-in schedulers are a static table of ``"module:function"`` paths; a backend module is
imported only when its scheduler is first created. Plugins come from the one plugin registry
(:mod:`torchx_core.plugins`: the ``torchx.schedulers`` entry point group and the
``torchx_plugins.schedulers`` namespace package) and *add* to the built-ins. Discovery runs only
when it is needed (a name that is not built in, listing every scheduler, or a plugin that may
carry a built-in's name), never on the hot path of ``torchx run -s local_cwd`` when no plugin
declares that name.

TorchX's plugin forms are accepted: a plugin registered under a built-in's name with the same
factory (TorchX users re-register the built-ins to keep them) changes nothing; one with another
factory overrides the built-in, with a logged warning. A plugin that fails to load, or two
plugins with one name, are recorded (:meth:`SchedulerRegistry.plugin_errors`) and logged, not
fatal.

A factory is any callable ``factory(session_name, **kwargs) -> Scheduler``.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from torchx_core.specs.errors import (
    MissingDependencyError,
    TorchXError,
    UnknownSchedulerException,
    missing_dependency,
)

if TYPE_CHECKING:
    from torchx_core.plugins import PluginRegistry
    from torchx_core.schedulers.api import Scheduler
    from torchx_core.util.entrypoints import EntryPointLike

__all__ = [
    "DEFAULT_SCHEDULER_MODULES",
    "ENTRY_POINT_GROUP",
    "SchedulerFactory",
    "SchedulerRegistry",
    "SchedulerRegistryError",
    "default_registry",
]

logger: logging.Logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "torchx.schedulers"
DEFAULT_SCHEDULER = "local_cwd"

_S = "torchx_core.schedulers."

# name -> "module[:function]" (function defaults to ``create_scheduler``). Order matters: the
# first entry is the default scheduler.
DEFAULT_SCHEDULER_MODULES: Mapping[str, str] = MappingProxyType(
    {
        "local_cwd": _S + "local.scheduler:create_scheduler",
        "local": _S + "local.scheduler:create_dir_scheduler",
        "local_docker": _S + "docker.scheduler:create_scheduler",
        "docker": _S + "docker.scheduler:create_scheduler",
        "slurm": _S + "slurm.scheduler:create_scheduler",
        "lsf": _S + "lsf.scheduler:create_scheduler",
        "kubernetes": _S + "kubernetes.scheduler:create_scheduler",
        "kubernetes_mcad": _S + "kubernetes.mcad:create_scheduler",
        "aws_batch": _S + "aws.batch:create_scheduler",
        "aws_sagemaker": _S + "aws.sagemaker:create_scheduler",
        "ray": _S + "ray.scheduler:create_scheduler",
    }
)

# The torchx-suite extra that provides the third-party dependencies of a built-in backend.
_EXTRAS: Mapping[str, str] = MappingProxyType(
    {
        "local_docker": "docker",
        "docker": "docker",
        "kubernetes": "kubernetes",
        "kubernetes_mcad": "kubernetes",
        "aws_batch": "aws",
        "aws_sagemaker": "aws",
        "ray": "ray",
    }
)


class SchedulerRegistryError(TorchXError, ValueError):
    """The scheduler registry is inconsistent (e.g. two schedulers registered under one name)."""


class SchedulerFactory(Protocol):
    """Creates a scheduler: ``factory(session_name, **kwargs) -> Scheduler``."""

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]: ...


class DeferredFactory:
    """A factory that imports its backend module on first call.

    Args:
        name: the scheduler name
        target: ``"package.module"`` or ``"package.module:function"``
    """

    def __init__(self, name: str, target: str) -> None:
        self.name = name
        self.target = target
        self._fn: Callable[..., Scheduler[Any]] | None = None

    def load(self) -> Callable[..., Scheduler[Any]]:
        """Imports the backend and returns its factory function."""
        if self._fn is None:
            module_name, _, attr = self.target.partition(":")
            try:
                module = importlib.import_module(module_name)
            except MissingDependencyError:
                raise
            except ModuleNotFoundError as e:
                if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
                    raise SchedulerRegistryError(
                        f"scheduler `{self.name}` is registered as `{self.target}` but module"
                        f" `{module_name}` is not installed"
                    ) from e
                extra = _EXTRAS.get(self.name)
                if extra and e.name:
                    raise missing_dependency(
                        e.name, extra, f"the `{self.name}` scheduler", cause=e
                    ) from e
                raise
            fn = getattr(module, attr or "create_scheduler", None)
            if not callable(fn):
                raise SchedulerRegistryError(
                    f"scheduler `{self.name}`: `{module_name}` has no callable"
                    f" `{attr or 'create_scheduler'}`"
                )
            self._fn = fn
        return self._fn

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        return self.load()(session_name, **kwargs)

    def __repr__(self) -> str:
        return f"DeferredFactory({self.name!r}, {self.target!r})"


class SchedulerRegistry:
    """Scheduler name -> factory, merging the built-in table with plugins.

    Args:
        builtins: name -> ``"module[:function]"`` of the built-in schedulers
        group: the entry point group holding plugins
        entry_points: returns the entry points of a group (injectable for tests; given, it
            replaces plugin discovery with those entry points only)
        plugins: the plugin registry to read (default: the process-wide one)
    """

    def __init__(
        self,
        builtins: Mapping[str, str] = DEFAULT_SCHEDULER_MODULES,
        group: str = ENTRY_POINT_GROUP,
        entry_points: Callable[[str], Iterable[EntryPointLike]] | None = None,
        plugins: PluginRegistry | None = None,
    ) -> None:
        self._builtins: dict[str, DeferredFactory] = {
            name: DeferredFactory(name, target) for name, target in builtins.items()
        }
        self._group = group
        if plugins is None and entry_points is not None:
            from torchx_core.plugins import PluginRegistry, PluginSource

            plugins = PluginRegistry(
                plugin_sources=PluginSource.ENTRYPOINT, entry_points=entry_points
            )
        self._plugin_registry = plugins
        self._merged: dict[str, SchedulerFactory] | None = None
        self._plugin_names: list[str] = []
        self._overridden: list[str] = []
        self._bad: dict[str, str] = {}
        self._no_override: set[str] = set()
        self._lock = threading.Lock()

    def _plugins(self) -> PluginRegistry:
        if self._plugin_registry is None:
            from torchx_core.plugins import registry

            self._plugin_registry = registry()
        return self._plugin_registry

    # -- discovery ---------------------------------------------------------------------------

    def _scan(self) -> dict[str, SchedulerFactory]:
        with self._lock:
            if self._merged is not None:
                return self._merged
            merged: dict[str, SchedulerFactory] = dict(self._builtins)
            names: list[str] = []
            overridden: list[str] = []
            bad: dict[str, str] = {}
            for name, obj in self._plugins().get_group(self._group).items():
                try:
                    factory = _as_factory(name, obj)
                except SchedulerRegistryError as e:
                    bad[name] = str(e)
                    logger.warning("%s", e)
                    continue
                builtin = self._builtins.get(name)
                if builtin is not None:
                    if _same_factory(factory, builtin.target):
                        logger.debug("plugin `%s` re-registers the built-in scheduler", name)
                        continue
                    logger.warning(
                        "scheduler `%s` is overridden by the plugin %s (built-in: %s)",
                        name,
                        _describe(factory),
                        builtin.target,
                    )
                    overridden.append(name)
                else:
                    names.append(name)
                merged[name] = factory
            self._plugin_names = names
            self._overridden = overridden
            self._bad = bad
            self._merged = merged
            return merged

    def refresh(self) -> None:
        """Forgets the cached plugin scan (the next listing or plugin lookup rescans)."""
        with self._lock:
            self._merged = None
            self._plugin_names = []
            self._bad = {}
            self._no_override = set()
            self._plugins().clear()

    # -- lookup ------------------------------------------------------------------------------

    def builtin_names(self) -> list[str]:
        """The built-in scheduler names (no plugin discovery)."""
        return list(self._builtins)

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is a built-in scheduler (no plugin discovery)."""
        return name in self._builtins

    def names(self) -> list[str]:
        """Every scheduler name: built-ins first (default first), then plugins."""
        self._scan()
        return [*self._builtins, *self._plugin_names]

    def get(self, name: str) -> SchedulerFactory:
        """Returns the factory of scheduler ``name``.

        A built-in resolves without plugin discovery unless a plugin may carry its name.

        Raises:
            UnknownSchedulerException: no scheduler is registered under ``name`` (the message
                lists the valid names).
            SchedulerRegistryError: ``name`` is a plugin that failed to load.
        """
        builtin = self._builtins.get(name)
        if builtin is not None and self._merged is None and not self._may_override(name):
            return builtin
        factories = self._scan()
        if name in factories:
            return factories[name]
        errors = self.plugin_errors()
        if name in errors:
            raise SchedulerRegistryError(
                f"scheduler plugin `{name}` failed to load: {errors[name]}. Fix or"
                f" reinstall the package that provides it; `torchx schedulers` lists what loads"
            )
        raise UnknownSchedulerException(name, self.names())

    def _may_override(self, name: str) -> bool:
        if name in self._no_override:
            return False
        if self._plugin_registry is None and self._group == ENTRY_POINT_GROUP:
            from torchx_core.plugins import cannot_provide

            if cannot_provide(self._group, name):  # the registry is not even imported
                self._no_override.add(name)
                return False
        from torchx_core.plugins import PluginType

        kind = next((pt for pt in PluginType if pt.value == self._group), None)
        if kind is not None and not self._plugins().may_provide(kind, name):
            self._no_override.add(name)
            return False
        return True

    def factories(self) -> dict[str, SchedulerFactory]:
        """Every scheduler name -> factory (discovers plugins once)."""
        return dict(self._scan())

    def overridden(self) -> list[str]:
        """Built-in names a plugin overrides (after a scan)."""
        self._scan()
        return list(self._overridden)

    def plugin_errors(self) -> Mapping[str, str]:
        """Plugins that failed to load or clash: name (or module) -> error (after a scan)."""
        self._scan()
        errors = {
            e.name or e.module: e.error
            for e in self._plugins().errors
            if e.plugin_type in ("scheduler", self._group)
            or (e.plugin_type is None and e.module.startswith("torchx_plugins.schedulers"))
        }
        errors.update(self._bad)
        return MappingProxyType(errors)

    def view(self) -> LazyFactories:
        """A read-only mapping over this registry that only scans plugins when it must."""
        return LazyFactories(self)


def _same_factory(factory: Any, target: str) -> bool:
    """Whether a plugin factory is the built-in ``"module[:function]"`` itself."""
    module, _, attr = target.partition(":")
    return getattr(factory, "__module__", None) == module and getattr(
        factory, "__qualname__", None
    ) == (attr or "create_scheduler")


def _describe(factory: Any) -> str:
    mod, qual = getattr(factory, "__module__", None), getattr(factory, "__qualname__", None)
    return f"`{mod}:{qual}`" if mod and qual else repr(factory)


def _as_factory(name: str, obj: Any) -> SchedulerFactory:
    """Accepts a factory function or a module exposing ``create_scheduler``."""
    if callable(obj):
        return obj  # type: ignore[no-any-return]  # a callable entry point is the factory
    fn = getattr(obj, "create_scheduler", None)
    if callable(fn):
        return fn  # type: ignore[no-any-return]  # the module's create_scheduler
    raise SchedulerRegistryError(
        f"plugin `{name}` must point at a factory `create_scheduler(session_name, **kwargs)` or"
        f" a module that defines one; got {type(obj).__name__}"
    )


class LazyFactories(Mapping[str, SchedulerFactory]):
    """``Mapping[str, SchedulerFactory]`` view of a registry.

    Item lookup of a built-in name does not scan entry points; iterating (or looking up a name
    that is not built in) does.
    """

    def __init__(self, registry: SchedulerRegistry) -> None:
        self._registry = registry

    def __getitem__(self, name: str) -> SchedulerFactory:
        try:
            return self._registry.get(name)
        except UnknownSchedulerException as e:
            raise KeyError(name) from e

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and self._registry.is_builtin(name):
            return True
        return name in self._registry.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry.names())

    def __len__(self) -> int:
        return len(self._registry.names())

    def __repr__(self) -> str:
        return f"LazyFactories(builtins={self._registry.builtin_names()})"


_default: SchedulerRegistry | None = None


def default_registry() -> SchedulerRegistry:
    """The process-wide registry (built-ins + the ``torchx.schedulers`` entry point group)."""
    global _default
    if _default is None:
        _default = SchedulerRegistry()
    return _default
