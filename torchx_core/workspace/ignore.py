"""Ignore files of a workspace (``.torchxignore``, ``.dockerignore``), read as TorchX reads them.

One pattern a line; ``#`` starts a comment; blank lines and ``.`` are skipped. A path relative
to the project root is tested with :func:`fnmatch.fnmatch` (so ``*`` also crosses ``/``) against
every pattern in order, the last match deciding: a pattern ignores, ``!pattern`` keeps. An
ignored directory is not entered. Below a kept directory, only the patterns after the last one
that matched the directory apply (``*`` then ``!some_dir`` keeps all of ``some_dir``).
``Dockerfile.torchx`` is never ignored.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath

__all__ = [
    "DOCKER_IGNORE",
    "TORCHX_IGNORE",
    "IgnoreRules",
    "last_match",
    "parse_patterns",
    "read_patterns",
]

TORCHX_IGNORE = ".torchxignore"
DOCKER_IGNORE = ".dockerignore"
_NEVER_IGNORED = frozenset({".", "Dockerfile.torchx"})


def parse_patterns(text: str) -> list[str]:
    """The patterns of an ignore file's text."""
    lines = [line.partition("#")[0].strip() for line in text.splitlines()]
    return [line for line in lines if line and line != "."]


def read_patterns(root: str, ignore_file: str) -> list[str]:
    """The patterns of ``root/ignore_file`` (none if the file does not exist)."""
    path = os.path.join(root, ignore_file)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return parse_patterns(f.read())


def last_match(rel: str, patterns: list[str]) -> tuple[int, bool]:
    """``(index of the last pattern matching rel or -1, whether rel is ignored)``."""
    index, ignored = -1, False
    if rel in _NEVER_IGNORED:
        return index, ignored
    rel = posixpath.normpath(rel)
    for i, pattern in enumerate(patterns):
        keep = pattern.startswith("!")
        if fnmatch.fnmatch(rel, pattern[1:] if keep else pattern):
            index, ignored = i, not keep
    return index, ignored


class IgnoreRules:
    """The rules of one project directory, as a :func:`shutil.copytree` ``ignore`` callback.

    Args:
        root: the project directory
        ignore_file: the name of its ignore file (``.torchxignore`` or ``.dockerignore``)
    """

    def __init__(self, root: str, ignore_file: str) -> None:
        self.root = os.path.abspath(root)
        self.patterns = read_patterns(self.root, ignore_file)
        self._first: dict[str, int] = {self.root: 0}  # directory -> first pattern that applies

    def __call__(self, directory: str, names: list[str]) -> set[str]:
        """The entries of ``directory`` to skip."""
        if not self.patterns:
            return set()
        directory = os.path.abspath(directory)
        first = self._first.get(directory, 0)
        rel_dir = os.path.relpath(directory, self.root).replace(os.sep, "/")
        skipped: set[str] = set()
        for name in names:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            index, ignored = last_match(rel, self.patterns[first:])
            if ignored:
                skipped.add(name)
            elif os.path.isdir(os.path.join(directory, name)):
                self._first[os.path.join(directory, name)] = first + index + 1
        return skipped
