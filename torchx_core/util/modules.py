"""Loading a module or one of its attributes by dotted path (``torchx.util.modules``).

Both helpers tell an absent module (an expected miss for optional code) from a broken one (it
exists but fails to import): :func:`load_module` stays silent on the first and warns on the
second; :func:`import_attr` returns its default on the first and raises on the second.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

__all__ = ["import_attr", "load_module"]

logger: logging.Logger = logging.getLogger(__name__)

T = TypeVar("T")


def _is_absent(error: BaseException, module_path: str) -> bool:
    """True if ``error`` says ``module_path`` itself (or a parent package of it) is missing."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    return missing is not None and (missing == module_path or module_path.startswith(missing + "."))


def load_module(path: str) -> ModuleType | Callable[..., object] | None:
    """The module or attribute named by ``path``, ``package.module[:attr]``; None if it cannot
    be loaded.

    Everything after the first ``:`` is the attribute name (``"os.path:join"`` is
    ``os.path.join``; ``"os.path:join:x"`` names no attribute). An absent module is silent; a
    module that exists but fails to import, or lacks the attribute, logs a warning naming the
    failure.

    >>> import os
    >>> load_module("os.path:join") is os.path.join
    True
    >>> load_module("no_such_package.mod") is None
    True
    """
    module_path, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_path)
        return getattr(module, attr) if attr else module
    except Exception as e:  # noqa: BLE001 - None on any failure, as documented
        if _is_absent(e, module_path):
            return None
        logger.warning("failed to load module `%s`: %s: %s", path, type(e).__name__, e)
        return None


def import_attr(name: str, attr: str, default: T) -> T:
    """``name.attr`` if module ``name`` is installed, else ``default`` (for optional
    dependencies: the caller always says what to use without it).

    >>> import_attr("no_such_package", "thing", default=42)
    42

    Raises:
        ModuleNotFoundError: ``name`` exists but fails importing one of its own dependencies.
        AttributeError: ``name`` imports but has no ``attr``.
    """
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if _is_absent(e, name):
            return default
        raise
    return getattr(module, attr)  # type: ignore[no-any-return]
