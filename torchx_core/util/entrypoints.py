"""Entry points: load one (``load``), a group (``load_group``), or ask cheaply who declares one.

``load`` and ``load_group`` behave as TorchX's ``torchx.util.entrypoints``. Reading entry points
through :mod:`importlib.metadata` costs tens of milliseconds (the module and a scan of every
installed distribution), so the launch path first asks :func:`declared_names`, which reads the
``entry_points.txt`` files of the distributions on ``sys.path`` directly (about 2 ms) and never
imports anything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar, overload

__all__ = ["EntryPointLike", "T", "declared_names", "entry_points", "load", "load_group"]

T = TypeVar("T")

# distinguishes "no default given" from an explicit ``default=None``
_NO_DEFAULT: Any = object()


class EntryPointLike(Protocol):
    """What the registry needs of an entry point (``importlib.metadata.EntryPoint`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


def entry_points(group: str) -> list[EntryPointLike]:
    """The entry points of ``group`` (one per name: the first distribution on ``sys.path`` wins).

    Skips the :mod:`importlib.metadata` scan when no distribution declares the group, unless
    ``importlib.metadata.entry_points`` was replaced (tests fake entry points by patching it,
    e.g. ``torchx_core.util.entrypoints.metadata.entry_points`` as in TorchX): then it is asked.
    """
    replaced = _replaced_metadata()
    if replaced is not None:
        return list(replaced.entry_points().select(group=group))
    if not _declared(group):
        return []
    from importlib.metadata import entry_points as _eps

    return list(_eps(group=group))


def _replaced_metadata() -> Any:
    """:mod:`importlib.metadata` if it is loaded and its ``entry_points`` is not the stdlib's."""
    md = sys.modules.get("importlib.metadata")
    if md is not None and getattr(md.entry_points, "__module__", None) != md.__name__:
        return md
    return None


def __getattr__(name: str) -> Any:
    # TorchX's module holds `metadata` (importlib.metadata); loaded only when asked for, since
    # importing it costs milliseconds on every CLI start
    if name == "metadata":
        import importlib.metadata

        return importlib.metadata
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@overload
def load(group: str, name: str) -> object: ...


@overload
def load(group: str, name: str, default: T) -> T: ...


def load(group: str, name: str, default: Any = _NO_DEFAULT) -> Any:
    """Loads entry point ``name`` of ``group`` (``name = pkg.module:attr`` or ``pkg.module``).

    Args:
        group: the entry point group, e.g. ``"torchx.schedulers"``
        name: the entry point name
        default: returned when there is no such entry point

    Raises:
        KeyError: no such entry point and no ``default`` given
    """
    for ep in entry_points(group):
        if ep.name == name:
            return ep.load()
    if default is not _NO_DEFAULT:
        return default
    raise KeyError(f"entrypoint {group}.{name} not found")


def _deferred(ep: EntryPointLike) -> Callable[..., object]:
    def run(*args: object, **kwargs: object) -> object:
        obj = ep.load()
        if ":" not in ep.value:  # a module: loading it is the whole call
            return obj
        return obj(*args, **kwargs)

    return run


def load_group(group: str) -> dict[str, Callable[..., object]]:
    """All entry points of ``group`` as ``name -> deferred call`` (nothing is imported yet).

    ``load_group("foo")["bar"](x)`` imports ``bar``'s target and calls it with ``x``; when the
    target is a module, the call returns the module and ignores its arguments. An empty dict
    when the group has no entry points.
    """
    return {ep.name: _deferred(ep) for ep in entry_points(group)}


def declared_names(group: str, paths: Iterable[str] | None = None) -> set[str]:
    """Names declared under ``[group]`` by the distributions on ``paths`` (default ``sys.path``).

    Reads ``*.dist-info/entry_points.txt`` (and ``*.egg-info``) directly: no import, no load.
    """
    names: set[str] = set()
    header = f"[{group}]"
    for text in _entry_point_files(paths):
        if header not in text:
            continue
        inside = False
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("["):
                inside = line == header
            elif inside and "=" in line and not line.startswith(("#", ";")):
                names.add(line.split("=", 1)[0].strip())
    return names


def _declared(group: str) -> bool:
    header = f"[{group}]"
    return any(header in text for text in _entry_point_files(None))


_cache: tuple[tuple[tuple[str, int], ...], list[str]] | None = None


def _entry_point_files(paths: Iterable[str] | None) -> Iterable[str]:
    """The ``entry_points.txt`` texts of the distributions on ``paths`` (default ``sys.path``).

    For ``sys.path`` the texts are cached until a path entry or a directory's mtime changes
    (installing a distribution adds a ``*.dist-info`` directory, which changes it).
    """
    global _cache
    if paths is not None:
        return _read_entry_point_files(paths)
    key = tuple((entry, _mtime(entry)) for entry in sys.path)
    if _cache is None or _cache[0] != key:
        _cache = (key, _read_entry_point_files(sys.path))
    return _cache[1]


def _mtime(entry: str) -> int:
    try:
        return os.stat(entry or ".").st_mtime_ns
    except OSError:
        return -1


def _read_entry_point_files(paths: Iterable[str]) -> list[str]:
    texts: list[str] = []
    for entry in paths:
        try:
            with os.scandir(entry or ".") as it:
                dists = [e.path for e in it if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:  # not a directory (zip file, missing path)
            continue
        for dist in dists:
            text = _read_text(os.path.join(dist, "entry_points.txt"))
            if text is not None:
                texts.append(text)
    return texts


def _read_text(path: str) -> str | None:
    """The UTF-8 text of ``path``, None if it cannot be read.

    Raw ``os.open``/``os.read``: ``open()`` builds three file objects per call, which was half
    the cost of scanning a few hundred distributions on every CLI start.
    """
    if not os.access(path, os.R_OK):  # most distributions have none: no exception to build
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")
