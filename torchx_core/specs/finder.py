"""Component lookup: builtins, ``torchx.components`` entry points, and ``path/to/file.py:fn``.

* Builtins are the public functions returning ``AppDef`` in the :mod:`torchx_core.components`
  module tree, named by their module path relative to it: ``dist.ddp`` is
  ``torchx_core/components/dist.py:ddp``.
* Each entry point of the ``torchx.components`` group names a module (package); its
  components are added under the entry point name as prefix (``foo = my_proj.components``
  gives ``foo.train`` for ``my_proj/components/train.py``... and ``foo.<fn>`` for functions in
  the package itself). A plugin component replaces a builtin of the same name (logged). An
  entry point that fails to load is logged and skipped.
* ``path/to/file.py:fn`` loads a component from a file; ``pkg.module:fn`` from a module.

Discovery runs on first lookup and is cached.
"""

from __future__ import annotations

import abc
import ast
import importlib
import inspect
import logging
import os
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from torchx_core.specs._app import AppDef
from torchx_core.specs.errors import (
    ComponentNotFoundException,
    ComponentValidationException,
    did_you_mean,
)
from torchx_core.specs.file_linter import (
    ComponentFunctionValidator,
    get_fn_docstring,
    validate,
)

logger: logging.Logger = logging.getLogger(__name__)

Validators = list[ComponentFunctionValidator] | None
BUILTINS_PACKAGE = "torchx_core.components"
ENTRY_POINT_GROUP = "torchx.components"

__all__ = [
    "ComponentNotFoundException",
    "ComponentValidationException",
    "ComponentsFinder",
    "CustomComponentsFinder",
    "ModuleComponentsFinder",
    "get_builtin_source",
    "get_component",
    "get_components",
    "is_namespace_package",
    "is_package",
    "module_relname",
]


@dataclass
class _Component:
    """A discovered component.

    Args:
        name: the name to run it by (``dist.ddp``, ``path/to/file.py:fn``)
        description: first part of its docstring
        fn_name: the function name
        fn: the component function
        validation_errors: linter findings (empty if the component is valid)
    """

    name: str
    description: str
    fn_name: str
    fn: Callable[..., AppDef]
    validation_errors: list[str] = field(default_factory=list)


def _returns_appdef(fn: Callable[..., Any]) -> bool:
    ann = getattr(fn, "__annotations__", {}).get("return")
    if ann is AppDef:
        return True
    return isinstance(ann, str) and ann.split(".")[-1] == "AppDef"


def _lint_errors(path: str, fn_name: str, validators: Validators = None) -> list[str]:
    """The linter's errors (``validators``: the linter's default checks if None); warnings
    (a validator may report a missing docstring as one) only show in the ``--help``."""
    return [m.description for m in validate(path, fn_name, validators) if m.severity == "error"]


def _make_component(
    name: str, fn: Callable[..., AppDef], validators: Validators = None
) -> _Component:
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    errors = _lint_errors(path, fn.__name__, validators) if path else []
    description, _ = get_fn_docstring(fn)
    return _Component(
        name=name,
        description=description.split("\n\n")[0].strip(),
        fn_name=fn.__name__,
        fn=fn,
        validation_errors=errors,
    )


def _module_components(
    module: ModuleType, prefix: str, validators: Validators = None
) -> dict[str, _Component]:
    out: dict[str, _Component] = {}
    for attr, obj in vars(module).items():
        if attr.startswith("_") or not inspect.isfunction(obj):
            continue
        if obj.__module__ != module.__name__ or not _returns_appdef(obj):
            continue
        name = f"{prefix}.{attr}" if prefix else attr
        out[name] = _make_component(name, obj, validators)
    return out


def _package_components(
    package: ModuleType, prefix: str, validators: Validators = None
) -> dict[str, _Component]:
    """Components of ``package`` and (if it is a package) every module below it."""
    out = _module_components(package, prefix, validators)
    paths = getattr(package, "__path__", None)
    if paths is None:
        return out
    for info in pkgutil.walk_packages(paths, prefix=package.__name__ + "."):
        rel = info.name[len(package.__name__) + 1 :]
        if any(part.startswith("_") or part in ("test", "tests") for part in rel.split(".")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as e:  # noqa: BLE001 - one broken module must not hide the rest
            logger.warning("skipping component module %s: %s", info.name, e)
            continue
        sub_prefix = f"{prefix}.{rel}" if prefix else rel
        out.update(_module_components(module, sub_prefix, validators))
    return out


#: the discovered components (None: not discovered yet). TorchX's name: its users' tests set
#: ``finder._components = None`` to have the next lookup discover again.
_components: dict[str, _Component] | None = None


class _Registry:
    """Discovers the components once and keeps them in :data:`_components`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def get(self) -> dict[str, _Component]:
        global _components
        comps = _components
        if comps is not None:
            return comps
        with self._lock:
            if _components is None:
                _components = _discover()
            return _components

    def clear(self) -> None:
        global _components
        _components = None


def _discover(validators: Validators = None) -> dict[str, _Component]:
    comps: dict[str, _Component] = {}
    try:
        builtins = importlib.import_module(BUILTINS_PACKAGE)
        comps.update(_package_components(builtins, "", validators))
    except ImportError as e:
        logger.warning("cannot import the builtin components %s: %s", BUILTINS_PACKAGE, e)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
            logger.warning("could not load component entry point %s = %s: %s", ep.name, ep.value, e)
            continue
        if isinstance(obj, ModuleType):
            # as TorchX: a `_`-prefixed name (`_0 = my_pkg`) adds the components without prefix
            prefix = "" if ep.name.startswith("_") else ep.name
            found = _package_components(obj, prefix, validators)
        elif inspect.isfunction(obj):
            found = {ep.name: _make_component(ep.name, obj, validators)}
        else:
            logger.warning(
                "component entry point %s = %s is neither a module nor a function",
                ep.name,
                ep.value,
            )
            continue
        for name in found.keys() & comps.keys():
            logger.warning(
                "component %r from entry point %s replaces the builtin one", name, ep.name
            )
        comps.update(found)
    return comps


_registry = _Registry()


def _load_components(validators: Validators) -> dict[str, _Component]:
    """Discovers every component now (uncached; TorchX's name), linted by ``validators``
    (the linter's default checks if None): the builtins, then the ``torchx.components`` entry
    points (which add to the builtins here; in TorchX they replace them)."""
    return _discover(validators)


def get_components() -> dict[str, _Component]:
    """Returns every known component (builtins and ``torchx.components`` entry points) by name."""
    return dict(_registry.get())


def _load_file(path: str, fn_name: str, name: str) -> Callable[..., Any]:
    import importlib.util

    abspath = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(abspath):
        raise ComponentNotFoundException(
            f"component {name!r}: file {path!r} does not exist (resolved to {abspath});"
            " use 'path/to/file.py:function'"
        )
    mod_name = "_torchx_component_" + "".join(c if c.isalnum() else "_" for c in abspath)
    spec = importlib.util.spec_from_file_location(mod_name, abspath)
    if spec is None or spec.loader is None:
        raise ComponentNotFoundException(f"component {name!r}: cannot load {abspath} as python")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise ComponentValidationException(
            f"component {name!r}: importing {abspath} failed: {e}"
        ) from e
    return _get_fn(module, fn_name, name)


def _get_fn(module: ModuleType, fn_name: str, name: str) -> Callable[..., Any]:
    fn = getattr(module, fn_name, None)
    if fn is None or not callable(fn):
        fns = [
            k for k, v in vars(module).items() if inspect.isfunction(v) and not k.startswith("_")
        ]
        raise ComponentNotFoundException(
            f"component {name!r}: {module.__name__} has no function {fn_name!r}."
            f"{did_you_mean(fn_name, fns)} Functions: {', '.join(fns) or 'none'}"
        )
    found: Callable[..., Any] = fn
    return found


def _custom_component(name: str) -> _Component:
    target, _, fn_name = name.rpartition(":")
    if not target or not fn_name:
        raise ComponentNotFoundException(
            f"component {name!r} is not of the form 'path/to/file.py:function' or 'module:function'"
        )
    if target.endswith(".py") or os.sep in target or os.path.isfile(target):
        fn = _load_file(target, fn_name, name)
        errors = _lint_errors(os.path.expanduser(target), fn_name)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ComponentNotFoundException(
                f"component {name!r}: cannot import module {target!r} ({e});"
                " use 'path/to/file.py:function' or an importable 'module:function'"
            ) from e
        fn = _get_fn(module, fn_name, name)
        comp = _make_component(name, fn)
        return comp
    description, _ = get_fn_docstring(fn)
    return _Component(name, description.split("\n\n")[0].strip(), fn_name, fn, errors)


def get_component(name: str) -> _Component:
    """Finds a component by name: a builtin/plugin name (``dist.ddp``) or ``path/file.py:fn``.

    Raises:
        ComponentNotFoundException: no such component (with suggestions)
        ComponentValidationException: the component does not follow the component standard
    """
    if not isinstance(name, str) or not name:
        raise ComponentNotFoundException(f"component name must be a non-empty str, got {name!r}")
    if ":" in name:
        comp = _custom_component(name)
    else:
        comps = _registry.get()
        if name not in comps:
            raise ComponentNotFoundException(
                f"Component `{name}` not found.{did_you_mean(name, comps)} Run `torchx builtins`"
                " to list the available components, pass a file as 'path/to/file.py:function',"
                f" or register yours via the `{ENTRY_POINT_GROUP}` entry point group."
            )
        comp = comps[name]
    if comp.validation_errors:
        raise ComponentValidationException(
            f"component {name!r} does not follow the component standard: "
            + "; ".join(comp.validation_errors)
            + ". A component annotates each argument with str, int, float, bool, list[X] or"
            " dict[K, V] of those, or Optional of them (`*args: str` for trailing arguments),"
            " and returns AppDef"
        )
    return comp


def get_builtin_source(name: str) -> str:
    """The source of a component with the imports of its module that precede it, as TorchX
    prints it (``torchx builtins --print``): saved to a file, it runs as a component of one's
    own (a template to edit). The module-level helpers and constants it uses (directly or
    through each other) are copied too, between the imports and the function.

    Raises:
        ComponentNotFoundException: no such component
    """
    fn = get_component(name).fn
    fn_src = inspect.getsource(fn)
    path = inspect.getsourcefile(fn)
    if path is None:
        return fn_src
    with open(path, encoding="utf-8") as f:
        module_src = f.read()
    first_line = fn.__code__.co_firstlineno
    body = ast.parse(module_src).body
    imports = [
        ast.get_source_segment(module_src, node) or ""
        for node in body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno < first_line
    ]
    helpers = [
        ast.get_source_segment(module_src, node, padded=True) or ""
        for node in _used_definitions(body, fn.__name__)
    ]
    return "\n".join([*imports, "", "", *[f"{h}\n\n" for h in helpers], fn_src])


def _used_definitions(body: list[ast.stmt], fn_name: str) -> list[ast.stmt]:
    """The module-level functions, classes and assignments (other than ``fn_name``) that the
    function ``fn_name`` uses, directly or through each other, in module order."""
    defined: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defined[t.id] = node
    root = defined.get(fn_name)
    if root is None:
        return []
    used: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in defined and sub.id != fn_name:
                dep = defined[sub.id]
                if id(dep) not in used:
                    used.add(id(dep))
                    todo.append(dep)
    return [node for node in body if id(node) in used]


# -- TorchX's finder classes and module helpers ------------------------------------------------


def is_namespace_package(module: ModuleType) -> bool:
    """Whether ``module`` is a namespace package (no ``__init__.py``: no ``__file__``)."""
    return getattr(module, "__file__", None) is None


def is_package(module: ModuleType) -> bool:
    """Whether ``module`` is a package, regular or namespace (it has a ``__path__``)."""
    return hasattr(module, "__path__")


def module_relname(module: ModuleType, relative_to: ModuleType) -> str:
    """``module``'s dotted name relative to ``relative_to`` (``""`` for the same module).

    >>> import torchx_core.components as c, torchx_core.components.dist as d
    >>> module_relname(d, relative_to=c), module_relname(d, relative_to=d)
    ('dist', '')

    Raises:
        ValueError: ``module`` is not ``relative_to`` or a submodule of it.
    """
    name, base = module.__name__, relative_to.__name__
    if name == base:
        return ""
    if not name.startswith(base + "."):
        raise ValueError(f"`{name}` is not a submodule of `{base}`")
    return name[len(base) + 1 :]


class ComponentsFinder(abc.ABC):
    """Finds components (functions returning an AppDef that pass the component linter)."""

    @abc.abstractmethod
    def find(self, validators: list[Any] | None) -> list[_Component]:
        """The components found (``validators``: the linter's, TorchX's argument; ignored)."""


class ModuleComponentsFinder(ComponentsFinder):
    """The components of a module, or of a package and every module below it, named by their
    module path relative to it, under ``group`` (``group.sub.fn``) when given.

    Args:
        module: the module or package, or its dotted name
        group: the name prefix (default: none)
    """

    def __init__(self, module: ModuleType | str, group: str = "") -> None:
        self.module = importlib.import_module(module) if isinstance(module, str) else module
        self.group = group

    def find(self, validators: list[Any] | None = None) -> list[_Component]:
        """Every component found below the module, in module order."""
        return list(_package_components(self.module, self.group, validators).values())


class CustomComponentsFinder(ComponentsFinder):
    """The component ``function_name`` of the file ``filepath``, named ``filepath:function_name``.

    Raises (from :meth:`find`):
        ComponentNotFoundException: the file has no such function.
        ComponentValidationException: the file cannot be loaded.
    """

    def __init__(self, filepath: str, function_name: str) -> None:
        self._filepath = filepath
        self._function_name = function_name

    def find(self, validators: list[Any] | None = None) -> list[_Component]:
        """A list holding the one component (with its linter errors, if any)."""
        return [_custom_component(f"{self._filepath}:{self._function_name}")]
