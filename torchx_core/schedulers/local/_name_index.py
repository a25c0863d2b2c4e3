"""The local root's index by app name: look-up by name without reading every app's status.

::

    <root>/.index/<digest of name>   the ids of the apps submitted under that name, one a line
    <root>/.index/.complete          present once every app of the root is in the index

``AppLifecycle.attach`` looks for a step's app by name before submitting it; with the index that
reads one small file and the status of the few apps it names, whatever the number of apps in the
root (apps are kept for days). Every submit appends its id (one ``O_APPEND`` write of one line);
a root made before the index existed is indexed once, by a full scan, on its first look-up.
Stale ids (apps deleted since) are skipped by the reader; the garbage collection drops the ids of
the apps it removes (:func:`forget`) and deletes the files it leaves empty.

Writers hold an exclusive ``flock`` on the index file: an append takes it around its one write,
:func:`forget` around its read and its replacement (a new file renamed over the old one, or the
unlink of an emptied one). A writer that got the lock of a file no longer at its path (replaced
or unlinked meanwhile) opens the path again, so no append lands in a file nobody reads and an
id appended by a submit racing the collection is never lost. Readers take no lock: a rename is
atomic.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading  # already imported by logging
from collections.abc import Callable, Iterable, Mapping

__all__ = ["INDEX", "add", "app_ids", "build", "forget", "ids_for"]

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
        _append(root, name, [app_id])
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
    for name, ids in by_name.items():
        _append(root, name, ids)
    with open(os.path.join(_dir(root), _COMPLETE), "w", encoding="utf-8"):
        pass


def forget(root: str, removed: Mapping[str, Iterable[str]]) -> None:
    """Drops the ids of removed apps (``{name: ids}``) from the index; deletes emptied files.

    Ids appended meanwhile (a submit of the same name racing the collection) are kept.
    """
    for name, ids in removed.items():
        if not name:
            continue
        try:
            _drop(_file(root, name), set(ids))
        except OSError as e:
            logger.debug("cannot drop removed apps from the index of %r: %s", name, e)


def _append(root: str, name: str, ids: list[str]) -> None:
    """Appends ``ids`` to the index file of ``name`` (one write) under its lock."""
    os.makedirs(_dir(root), 0o700, exist_ok=True)
    path = _file(root, name)
    data = "".join(f"{i}\n" for i in ids).encode()
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _current(fd, path):
                os.write(fd, data)
                return
        finally:
            os.close(fd)  # releases the lock


def _drop(path: str, removed: set[str]) -> None:
    """Rewrites ``path`` without the ids in ``removed`` (unlinks it when none is left)."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _current(fd, path):
                continue  # replaced or unlinked meanwhile: read the file now at the path
            with os.fdopen(os.dup(fd), encoding="utf-8") as f:
                lines = [line.strip() for line in f]
            kept = [i for i in lines if i and i not in removed]
            if len(kept) == len([i for i in lines if i]):
                return
            if not kept:
                os.unlink(path)
                return
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w", encoding="utf-8", opener=_private) as f:
                f.writelines(f"{i}\n" for i in kept)
            os.replace(tmp, path)
            return
        finally:
            os.close(fd)


def _current(fd: int, path: str) -> bool:
    """Whether the open file ``fd`` is still the one at ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


def _private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC, 0o600)
