"""The local root's index by app name: look-up by name without reading every app's status.

::

    <root>/.index/<digest of name>   the ids of the apps submitted under that name, one a line
    <root>/.index/.complete          present once every app of the root is in the index

``AppLifecycle.attach`` looks for a step's app by name before submitting it; with the index that
reads one small file and the status of the few apps it names, whatever the number of apps in the
root (apps are kept for days). Every submit appends its id (one ``O_APPEND`` write of one line);
a root made before the index existed is indexed once, by a full scan, on its first look-up.
Stale ids (apps deleted or garbage-collected since) are skipped by the reader.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable

__all__ = ["INDEX", "add", "app_ids", "build", "ids_for"]

logger: logging.Logger = logging.getLogger(__name__)

INDEX = ".index"
_COMPLETE = ".complete"


def _dir(root: str) -> str:
    return os.path.join(root, INDEX)


def _file(root: str, name: str) -> str:
    import hashlib  # not on the status and dry-run paths (hashlib costs ~3 ms to import)

    return os.path.join(_dir(root), hashlib.sha256(name.encode()).hexdigest()[:32])


def add(root: str, name: str, app_id: str) -> None:
    """Records that ``app_id`` was submitted under ``name``.

    A failed write marks the index incomplete (the next look-up rebuilds it): an app missing
    from a complete index would be submitted a second time. An app without a name is skipped.
    """
    if not name:
        return
    try:
        os.makedirs(_dir(root), 0o700, exist_ok=True)
        fd = os.open(_file(root, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{app_id}\n".encode())
        finally:
            os.close(fd)
    except OSError as e:
        logger.warning("cannot index app %s under its name (%s); the index is rebuilt", app_id, e)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(_dir(root), _COMPLETE))


def app_ids(root: str, name: str) -> list[str] | None:
    """The ids submitted under ``name``, oldest first, or None while the index is incomplete."""
    if not os.path.exists(os.path.join(_dir(root), _COMPLETE)):
        return None
    try:
        with open(_file(root, name), encoding="utf-8") as f:
            ids = [line.strip() for line in f]
    except FileNotFoundError:
        return []
    return list(dict.fromkeys(i for i in ids if i))


def ids_for(root: str, name: str, scan: Callable[[], Iterable[tuple[str, str]]]) -> list[str]:
    """The ids submitted under ``name``; a root made before the index is indexed first, once,
    from ``scan()`` (every ``(app_id, name)`` of the root)."""
    if not os.path.isdir(root):
        return []
    ids = app_ids(root, name)
    if ids is None:
        build(root, scan())
        ids = app_ids(root, name) or []
    return ids


def build(root: str, named: Iterable[tuple[str, str]]) -> None:
    """Indexes every ``(app_id, name)`` of the root (a full scan), then marks it complete.

    Apps submitted meanwhile append their own line; a line written twice is read once.
    """
    by_name: dict[str, list[str]] = {}
    for app_id, name in named:
        if name:
            by_name.setdefault(name, []).append(app_id)
    os.makedirs(_dir(root), 0o700, exist_ok=True)
    for name, ids in by_name.items():
        with open(_file(root, name), "a", encoding="utf-8") as f:
            f.writelines(f"{i}\n" for i in ids)
    with open(os.path.join(_dir(root), _COMPLETE), "w", encoding="utf-8"):
        pass
