"""Plugin discovery, caching and diagnostics (import from :mod:`torchx_core.plugins`)."""

from __future__ import annotations

import enum
import importlib
import logging
import pkgutil
import re
import threading
from collections.abc import Callable, Iterable
from enum import auto
from types import ModuleType
from typing import Any, overload

from torchx_core.plugins._equality import normalize_value, plugins_equal
from torchx_core.plugins._probe import NAMESPACE_ROOT, namespace_installed, sources_from_env
from torchx_core.util import entrypoints

logger: logging.Logger = logging.getLogger(__name__)

#: module attribute where ``register.named_resource`` also records what it registered
NAMED_RESOURCES_ATTR: str = "NAMED_RESOURCES"


class PluginType(str, enum.Enum):
    """A kind of plugin; the value is its entry point group."""

    SCHEDULER = "torchx.schedulers"
    NAMED_RESOURCE = "torchx.named_resources"
    TRACKER = "torchx.tracker"

    @property
    def namespace(self) -> str:
        """The namespace package of this kind, e.g. ``torchx_plugins.schedulers``."""
        return f"{NAMESPACE_ROOT}.{self.value.removeprefix('torchx.')}"


class PluginSource(enum.IntFlag):
    """Discovery channels (combine with ``|``); ``TORCHX_PLUGINS_SOURCE`` holds the int value."""

    NONE = 0
    NAMESPACE_PKG = auto()
    ENTRYPOINT = auto()


class RegistrationError:
    """A plugin that could not be registered (a frozen record, compared by value).

    Import-level errors (a module fails to import) carry only ``module`` and ``error``;
    plugin-level errors (wrong namespace, duplicate name) also carry ``name`` and
    ``plugin_type`` (``"scheduler"``, ``"named_resource"``, ``"tracker"``).
    """

    __slots__ = ("error", "module", "name", "plugin_type")
    _FIELDS = ("module", "error", "name", "plugin_type")
    module: str
    error: str
    name: str | None
    plugin_type: str | None

    def __init__(
        self, module: str, error: str, name: str | None = None, plugin_type: str | None = None
    ) -> None:
        for key, value in zip(self._FIELDS, (module, error, name, plugin_type), strict=True):
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"RegistrationError is frozen: cannot set {key!r}")

    def _key(self) -> tuple[str | None, ...]:
        return (self.module, self.error, self.name, self.plugin_type)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RegistrationError) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"RegistrationError(module={self.module!r}, error={self.error!r},"
            f" name={self.name!r}, plugin_type={self.plugin_type!r})"
        )


EntryPoints = Callable[[str], Iterable[entrypoints.EntryPointLike]]


class PluginRegistry:
    """Plugins of every kind, discovered lazily per kind and cached.

    Channels, highest precedence first: registrations made in code (:meth:`add`), entry points
    (group = the :class:`PluginType` value), and modules under the ``torchx_plugins.<kind>``
    namespace package holding callables decorated with :class:`~torchx_core.plugins.register`.
    A plugin that fails to load is recorded as a :class:`RegistrationError` (see
    :meth:`load_errors`) and logged, never raised.

    Args:
        plugin_sources: the discovery channels to use (default: both)
        entry_points: returns the entry points of a group (injectable for tests)
    """

    def __init__(
        self,
        *,
        plugin_sources: PluginSource = PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT,
        entry_points: EntryPoints | None = None,
    ) -> None:
        self._sources = plugin_sources
        self._entry_points = entry_points
        self._cache: dict[str, dict[str, Any]] = {}
        self._errors: list[RegistrationError] = []
        self._added: dict[PluginType, dict[str, Any]] = {}
        self._merged: dict[PluginType, dict[str, Any]] = {}  # what `get` returns, per kind
        self._lock = threading.RLock()

    # -- public API ------------------------------------------------------------------------

    def get(self, plugin_type: PluginType) -> dict[str, Callable[..., Any]]:
        """Plugins of ``plugin_type``: name -> factory (discovered once, then cached).

        As in TorchX, repeated calls return the same cached dict (read it, do not change it;
        :meth:`info` returns a copy); :meth:`add`, :meth:`remove` and :meth:`clear` replace it.
        """
        merged = self._merged.get(plugin_type)
        if merged is not None:
            return merged
        with self._lock:
            found = self._discover(plugin_type.value, plugin_type)
            merged = {**found, **self._added.get(plugin_type, {})}
            self._merged[plugin_type] = merged
            return merged

    def get_group(self, group: str) -> dict[str, Any]:
        """Entry-point plugins of any group (e.g. a custom scheduler group): name -> object."""
        kind = next((pt for pt in PluginType if pt.value == group), None)
        return dict(self.get(kind)) if kind is not None else dict(self._discover(group, None))

    def may_provide(self, plugin_type: PluginType, name: str) -> bool:
        """Cheap check (nothing imported): could discovery yield a plugin called ``name``?

        True when ``name`` was added in code or is declared by an entry point, or when the
        namespace package of ``plugin_type`` is installed (its names are only known once its
        modules are imported).
        """
        if name in self._added.get(plugin_type, {}):
            return True
        if plugin_type.value in self._cache:
            return name in self._cache[plugin_type.value]
        if PluginSource.ENTRYPOINT in self._sources:
            if self._entry_points is not None:
                if any(ep.name == name for ep in self._entry_points(plugin_type.value)):
                    return True
            elif name in entrypoints.declared_names(plugin_type.value):
                return True
        return PluginSource.NAMESPACE_PKG in self._sources and namespace_installed()

    def add(
        self, plugin_type: PluginType, name: str, factory: Any, *, replace: bool = False
    ) -> None:
        """Registers ``factory`` under ``name`` in code (wins over discovered plugins).

        Raises:
            ValueError: ``name`` was already added in code and ``replace`` is False
        """
        with self._lock:
            group = self._added.setdefault(plugin_type, {})
            if name in group and not replace:
                raise ValueError(
                    f"{plugin_type.name.lower()} `{name}` is already registered; pass"
                    " replace=True to replace it"
                )
            group[name] = factory
            self._merged.pop(plugin_type, None)

    def remove(self, plugin_type: PluginType, name: str) -> None:
        """Forgets a registration made with :meth:`add` (no error when absent)."""
        with self._lock:
            self._added.get(plugin_type, {}).pop(name, None)
            self._merged.pop(plugin_type, None)

    @overload
    def info(self) -> dict[PluginType, dict[str, Callable[..., Any]]]: ...

    @overload
    def info(self, plugin_type: PluginType) -> dict[str, Callable[..., Any]]: ...

    def info(
        self, plugin_type: PluginType | None = None
    ) -> dict[PluginType, dict[str, Callable[..., Any]]] | dict[str, Callable[..., Any]]:
        """A copy of the plugins of one kind, or of every kind (discovering what is needed)."""
        if plugin_type is not None:
            return dict(self.get(plugin_type))
        return {pt: dict(self.get(pt)) for pt in PluginType}

    def clear(self) -> None:
        """Forgets what discovery found and its errors (the next lookup rediscovers).

        Registrations made in code with :meth:`add` are kept.
        """
        with self._lock:
            self._cache.clear()
            self._merged.clear()
            self._errors.clear()

    @property
    def errors(self) -> list[RegistrationError]:
        """Errors recorded by the discovery that already ran (no discovery is triggered)."""
        return list(self._errors)

    def load_errors(self, plugin_type: PluginType | None = None) -> list[RegistrationError]:
        """Runs discovery (of one kind or all) and returns the errors it recorded."""
        kinds = [plugin_type] if plugin_type is not None else list(PluginType)
        for pt in kinds:
            self.get(pt)
        if plugin_type is None:
            return list(self._errors)
        ns = plugin_type.namespace
        return [
            e
            for e in self._errors
            if e.plugin_type == plugin_type.name.lower()
            or e.module == ns
            or e.module.startswith(ns + ".")
            or (e.plugin_type is None and e.module == plugin_type.value)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Every plugin and error as plain data (for ``json.dumps``/YAML), as TorchX lays it out:
        ``{kind: [{"name", "module"[, "aliases"][, "fractionals"][, "error"]}], "errors": [...]}``
        (a named resource's aliases and fractionals are listed under it, not on their own)."""
        data: dict[str, Any] = {}
        all_plugins = self.info()
        for pt, group in all_plugins.items():
            aliases: dict[str, list[str]] = {}
            fractionals: dict[str, list[str]] = {}
            for name, fn in group.items():
                base = getattr(fn, "_plugin_base_name", None)
                if base is not None:
                    kind = aliases if getattr(fn, "_plugin_is_alias", False) else fractionals
                    kind.setdefault(base, []).append(name)
            listed = {c for d in (aliases, fractionals) for names in d.values() for c in names}
            items: list[dict[str, Any]] = []
            for name, fn in group.items():
                if name in listed:
                    continue
                item: dict[str, Any] = {"name": name, "module": _module_of(fn)}
                if name in aliases:
                    item["aliases"] = aliases[name]
                if name in fractionals:
                    item["fractionals"] = fractionals[name]
                items.append(item)
            items.extend(
                {"name": e.name, "module": e.module, "error": e.error}
                for e in self._errors
                if e.plugin_type == pt.name.lower()
            )
            data[pt.name.lower()] = items
        data["errors"] = [
            {"module": e.module, "error": e.error} for e in self._errors if e.plugin_type is None
        ]
        return data

    def __str__(self) -> str:
        """:meth:`to_dict` as YAML, in TorchX's layout: names and modules plain, lists inline,
        error texts double-quoted."""
        lines: list[str] = []
        for key, items in self.to_dict().items():
            if not items:
                lines.append(f"{key}: []")
                continue
            lines.append(f"{key}:")
            for item in items:
                first = True
                for k, v in item.items():
                    if isinstance(v, list):
                        text = f"[{', '.join(v)}]"
                    else:
                        text = _quote(str(v)) if k == "error" else _plain_or_quoted(str(v))
                    lines.append(f"  {'- ' if first else '  '}{k}: {text}")
                    first = False
        return "\n".join(lines)

    # -- discovery -------------------------------------------------------------------------

    def _discover(self, group: str, kind: PluginType | None) -> dict[str, Any]:
        cached = self._cache.get(group)
        if cached is not None:
            return cached
        with self._lock:
            if group in self._cache:
                return self._cache[group]
            found: dict[str, Any] = {}
            if kind is not None and PluginSource.NAMESPACE_PKG in self._sources:
                found = self._scan_namespace(kind)
            if PluginSource.ENTRYPOINT in self._sources:
                eps = self._load_entry_points(group, kind)
                for name in sorted(eps.keys() & found.keys()):
                    self._record(
                        _module_of(found[name]),
                        f"registered via both a `{group}` entry point and the"
                        f" `{kind.namespace if kind else group}` namespace package; the entry"
                        " point wins. Remove one of the registrations",
                        name,
                        kind,
                    )
                found.update(eps)
            self._cache[group] = found
            return found

    def _load_entry_points(self, group: str, kind: PluginType | None) -> dict[str, Any]:
        if self._entry_points is None and entrypoints.load_group is not _LOAD_GROUP:
            # replaced (TorchX users' tests patch `util.entrypoints.load_group` to fake entry
            # points): its answer is the group, as in TorchX
            return dict(entrypoints.load_group(group))
        eps = (
            self._entry_points(group)
            if self._entry_points is not None
            else entrypoints.entry_points(group)
        )
        loaded: dict[str, Any] = {}
        values: dict[str, str] = {}
        for ep in eps:
            if ep.name in values:
                if values[ep.name] != ep.value:
                    self._record(
                        ep.value,
                        f"entry point `{ep.name}` is declared twice (`{values[ep.name]}` and"
                        f" `{ep.value}`); keeping the first",
                        ep.name,
                        kind,
                    )
                continue
            values[ep.name] = ep.value
            try:
                loaded[ep.name] = ep.load()
            except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
                self._record(ep.value, f"{type(e).__name__}: {e}", ep.name, kind, group)
        return loaded

    def _scan_namespace(self, kind: PluginType) -> dict[str, Any]:
        if not namespace_installed():
            return {}
        return self._find_namespace_plugins(kind.namespace, kind)

    @staticmethod
    def _namespace_for_type(pt: PluginType) -> str:
        """The namespace package of ``pt`` (TorchX's name for :attr:`PluginType.namespace`).

        >>> PluginRegistry._namespace_for_type(PluginType.SCHEDULER)
        'torchx_plugins.schedulers'
        """
        return pt.namespace

    #: plain, order-independent form of a value, for comparing same-name registrations
    _normalize_value = staticmethod(normalize_value)

    def _find_namespace_plugins(
        self, namespace: str, expected_type: PluginType | None = None
    ) -> dict[str, Any]:
        """Plugins under the package ``namespace`` (sub-packages included): name -> factory.

        A namespace that is not installed yields nothing and no error; one that fails to
        import, or whose modules fail to import or to be listed, is recorded. With
        ``expected_type``, a plugin of another kind is recorded instead of collected.
        """
        try:
            pkg = importlib.import_module(namespace)
        except ModuleNotFoundError as e:
            if e.name and (namespace == e.name or namespace.startswith(e.name + ".")):
                return {}
            self._record(namespace, f"{type(e).__name__}: {e}")
            return {}
        except Exception as e:  # noqa: BLE001 - recorded, not raised
            self._record(namespace, f"{type(e).__name__}: {e}")
            return {}
        found: dict[str, Any] = {}
        if hasattr(pkg, "__path__"):
            self._scan_package(pkg, namespace, expected_type, found)
        return found

    def _scan_package(
        self, pkg: ModuleType, fqn: str, kind: PluginType | None, found: dict[str, Any]
    ) -> None:
        from pathlib import Path

        paths = list(getattr(pkg, "__path__", []))
        names: dict[str, bool] = {}
        try:
            for info in pkgutil.iter_modules(paths):
                names[info.name] = info.ispkg
        except Exception as e:  # noqa: BLE001 - a broken plugin package is recorded, not fatal
            self._record(fqn, f"failed to scan `{fqn}`: {e}")
            return
        for root in paths:  # implicit namespace sub-packages (no __init__.py)
            for child in sorted(Path(root).iterdir()) if Path(root).is_dir() else ():
                if child.is_dir() and child.name not in names and any(child.rglob("*.py")):
                    names[child.name] = True
        for name in names:  # TorchX's order: pkgutil's (by path entry), then implicit ones
            if name.startswith("_") or not name.isidentifier():
                continue
            sub = f"{fqn}.{name}"
            try:
                mod = importlib.import_module(sub)
            except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
                self._record(sub, f"{type(e).__name__}: {e}")
                continue
            self._collect_plugins_from_module(mod, sub, kind, found)
            if names[name]:
                self._scan_package(mod, sub, kind, found)

    def _collect_plugins_from_module(
        self,
        mod: ModuleType,
        fqn: str,
        expected_type: PluginType | None,
        discovered: dict[str, Any],
    ) -> None:
        """Adds the ``register``-decorated callables defined in ``mod`` (named ``fqn``) to
        ``discovered``; one of another kind than ``expected_type`` (when given), or a
        same-name one of a DIFFERENT value, is recorded instead (an equal one is skipped)."""
        for attr in dir(mod):
            obj = getattr(mod, attr, None)
            tag = getattr(obj, "_plugin_type", None)
            if tag is None or not callable(obj) or getattr(obj, "__module__", None) != fqn:
                continue
            actual = PluginType(tag)
            name = getattr(obj, "_plugin_name", attr)
            if expected_type is not None and actual != expected_type:
                kind = expected_type.name.lower()
                self._record(
                    fqn,
                    f"is a {actual.name.lower()} but is under the {kind} namespace \u2014 use"
                    f" @register.{kind}() or move to `{actual.namespace}`",
                    name,
                    actual,
                )
                continue
            if name in discovered:
                if plugins_equal(discovered[name], obj, actual):
                    continue
                self._record(
                    fqn,
                    "duplicate: already registered with a DIFFERENT value by"
                    f" `{_module_of(discovered[name])}`; keeping the first",
                    name,
                    expected_type or actual,
                )
                continue
            discovered[name] = obj

    def _record(
        self,
        module: str,
        error: str,
        name: str | None = None,
        kind: PluginType | None = None,
        group: str | None = None,
    ) -> None:
        if name is not None:
            logger.warning("plugin `%s` (%s) is skipped: %s", name, module, error)
        else:
            logger.warning("plugin module `%s` is skipped: %s", module, error)
        plugin_type = kind.name.lower() if kind is not None and name is not None else None
        if plugin_type is None and name is not None and group is not None:
            plugin_type = group
        self._errors.append(RegistrationError(module, error, name, plugin_type))


def _module_of(obj: Any) -> str:
    return str(getattr(obj, "__module__", None) or getattr(obj, "__name__", "unknown"))


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def _plain_or_quoted(value: str) -> str:
    """``value`` as TorchX writes names and modules (plain), quoted only where plain YAML would
    read something else (``yes``, ``1.0``, ``a: b``)."""
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return _quote(value)


_LOAD_GROUP = entrypoints.load_group  # what it is unless a test replaced it

_registry: PluginRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> PluginRegistry:
    """The process-wide :class:`PluginRegistry` (created on first use).

    ``TORCHX_PLUGINS_SOURCE`` selects the channels as a :class:`PluginSource` int: ``0`` none,
    ``1`` namespace packages, ``2`` entry points, ``3`` both (default).

    Raises:
        ValueError: ``TORCHX_PLUGINS_SOURCE`` is not one of 0, 1, 2, 3
    """
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = PluginRegistry(plugin_sources=_sources_from_env())
    return _registry


def _cache_clear() -> None:
    """Forgets the process-wide registry: the next :func:`registry` call builds a new one
    (TorchX's ``registry.cache_clear()``, which tests call between cases)."""
    global _registry
    with _registry_lock:
        _registry = None


registry.cache_clear = _cache_clear  # type: ignore[attr-defined]  # TorchX's lru_cache API


def _sources_from_env() -> PluginSource:
    return PluginSource(sources_from_env())
