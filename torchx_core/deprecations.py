"""Deprecation warnings for moved modules and retired functions (``torchx.deprecations``).

Both helpers warn with :class:`UserWarning`, not ``DeprecationWarning``, which Python hides
outside ``__main__``: users of a library see these. Imports nothing of torchx_core.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["deprecated", "deprecated_module"]

_F = TypeVar("_F", bound=Callable[..., Any])


def deprecated_module(old_import: str, new_import: str, *, stacklevel: int = 3) -> None:
    """Warns that module ``old_import`` moved to ``new_import``; call it from the old module.

    ``stacklevel=3`` points the warning at the importing line when called at module level of the
    old module.

    Example::

        # my_pkg/old_path.py
        from torchx_core.deprecations import deprecated_module

        deprecated_module(old_import="my_pkg.old_path", new_import="my_pkg.new_path")
        from my_pkg.new_path import *  # noqa: F403
    """
    warnings.warn(
        f"[Deprecated] {old_import} has moved to {new_import} and will be removed in a future"
        f" release; change the import:\n\n  - from {old_import} import ...\n"
        f"  + from {new_import} import ...\n",
        UserWarning,
        stacklevel=stacklevel,
    )


def deprecated(*, replacement: str | None = None) -> Callable[[_F], _F]:
    """Marks a function (or class) as deprecated: each call warns, naming ``replacement``.

    >>> @deprecated(replacement="new_add")
    ... def old_add(a, b):
    ...     return a + b
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     old_add(1, 2)
    3
    """

    def decorate(fn: _F) -> _F:
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
        use = f"; use {replacement} instead" if replacement else ""
        message = f"[Deprecated] {name} is deprecated and will be removed in a future release{use}"

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, UserWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
