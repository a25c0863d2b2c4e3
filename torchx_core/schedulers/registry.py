"""The scheduler registry: scheduler name -> factory, built-ins plus plugins, all lazy.

Built-in schedulers are a static table of ``"module:function"`` paths; a backend module is
imported only when its scheduler is first created. Plugins come from the ``torchx.schedulers``
entry point group and *add* to the built-ins; the entry point group is scanned only when it is
needed (a name that is not built in, or listing every scheduler), never on the hot path of
``torchx run -s local_cwd``. A plugin that fails to load is recorded (see
:meth:`SchedulerRegistry.plugin_errors`) and logged, not fatal. A plugin whose name clashes with
a built-in or with another plugin is an error (:class:`SchedulerRegistryError`).

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
)

if TYPE_CHECKING:
    from torchx_core.schedulers.api import Scheduler

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
        "local_cwd": _S + "local_scheduler:create_scheduler",
        "local": _S + "local_scheduler:create_dir_scheduler",
        "local_docker": _S + "docker_scheduler:create_scheduler",
        "docker": _S + "docker_scheduler:create_scheduler",
        "slurm": _S + "slurm_scheduler:create_scheduler",
        "lsf": _S + "lsf_scheduler:create_scheduler",
        "kubernetes": _S + "kubernetes_scheduler:create_scheduler",
        "kubernetes_mcad": _S + "kubernetes_mcad_scheduler:create_scheduler",
        "aws_batch": _S + "aws_batch_scheduler:create_scheduler",
        "aws_sagemaker": _S + "aws_sagemaker_scheduler:create_scheduler",
        "ray": _S + "ray_scheduler:create_scheduler",
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


class _EntryPointLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


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
                    raise MissingDependencyError(
                        e.name.split(".")[0], extra, f"the `{self.name}` scheduler"
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


def _default_entry_points(group: str) -> Iterable[_EntryPointLike]:
    from importlib.metadata import entry_points

    return entry_points(group=group)


class SchedulerRegistry:
    """Scheduler name -> factory, merging the built-in table with entry-point plugins.

    Args:
        builtins: name -> ``"module[:function]"`` of the built-in schedulers
        group: the entry point group holding plugins
        entry_points: returns the entry points of a group (injectable for tests)
    """

    def __init__(
        self,
        builtins: Mapping[str, str] = DEFAULT_SCHEDULER_MODULES,
        group: str = ENTRY_POINT_GROUP,
        entry_points: Callable[[str], Iterable[_EntryPointLike]] = _default_entry_points,
    ) -> None:
        self._builtins: dict[str, DeferredFactory] = {
            name: DeferredFactory(name, target) for name, target in builtins.items()
        }
        self._group = group
        self._entry_points = entry_points
        self._plugins: dict[str, SchedulerFactory] | None = None
        self._plugin_errors: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- discovery ---------------------------------------------------------------------------

    def _scan(self) -> dict[str, SchedulerFactory]:
        with self._lock:
            if self._plugins is not None:
                return self._plugins
            plugins: dict[str, SchedulerFactory] = {}
            sources: dict[str, str] = {}
            errors: dict[str, str] = {}
            clashes: list[str] = []
            for ep in self._entry_points(self._group):
                if ep.name in self._builtins:
                    clashes.append(
                        f"plugin `{ep.name} = {ep.value}` clashes with the built-in scheduler"
                        f" `{ep.name}` ({self._builtins[ep.name].target})"
                    )
                    continue
                if ep.name in sources:
                    if sources[ep.name] != ep.value:
                        clashes.append(
                            f"plugin `{ep.name}` is registered twice: `{sources[ep.name]}` and"
                            f" `{ep.value}`"
                        )
                    continue
                sources[ep.name] = ep.value
                try:
                    plugins[ep.name] = _as_factory(ep.name, ep.load())
                except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
                    errors[ep.name] = f"{type(e).__name__}: {e}"
                    logger.warning(
                        "scheduler plugin `%s = %s` failed to load and is skipped: %s",
                        ep.name,
                        ep.value,
                        errors[ep.name],
                    )
            if clashes:
                raise SchedulerRegistryError(
                    "conflicting scheduler registrations in the `"
                    + self._group
                    + "` entry point group: "
                    + "; ".join(clashes)
                    + ". Rename the plugin scheduler(s) or uninstall the conflicting package."
                )
            self._plugin_errors = errors
            self._plugins = plugins
            return plugins

    def refresh(self) -> None:
        """Forgets the cached plugin scan (the next listing or plugin lookup rescans)."""
        with self._lock:
            self._plugins = None
            self._plugin_errors = {}

    # -- lookup ------------------------------------------------------------------------------

    def builtin_names(self) -> list[str]:
        """The built-in scheduler names (no entry point scan)."""
        return list(self._builtins)

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is a built-in scheduler (no entry point scan)."""
        return name in self._builtins

    def names(self) -> list[str]:
        """Every scheduler name: built-ins first (default first), then plugins."""
        return [*self._builtins, *self._scan()]

    def get(self, name: str) -> SchedulerFactory:
        """Returns the factory of scheduler ``name``.

        Built-ins resolve without scanning entry points.

        Raises:
            UnknownSchedulerException: no scheduler is registered under ``name`` (the message
                lists the valid names).
            SchedulerRegistryError: ``name`` is a plugin that failed to load, or plugins clash.
        """
        factory = self._builtins.get(name)
        if factory is not None:
            return factory
        plugins = self._scan()
        if name in plugins:
            return plugins[name]
        if name in self._plugin_errors:
            raise SchedulerRegistryError(
                f"scheduler plugin `{name}` failed to load: {self._plugin_errors[name]}. Fix or"
                f" reinstall the package that provides it; `torchx schedulers` lists what loads"
            )
        raise UnknownSchedulerException(name, self.names())

    def factories(self) -> dict[str, SchedulerFactory]:
        """Every scheduler name -> factory (scans entry points once)."""
        return {**self._builtins, **self._scan()}

    def plugin_errors(self) -> Mapping[str, str]:
        """Plugins that failed to load: name -> error (after a scan)."""
        self._scan()
        return MappingProxyType(dict(self._plugin_errors))

    def view(self) -> LazyFactories:
        """A read-only mapping over this registry that only scans plugins when it must."""
        return LazyFactories(self)


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
