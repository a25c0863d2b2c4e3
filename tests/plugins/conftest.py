"""Fixtures: a real ``torchx_plugins`` namespace package and real entry points on sys.path."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def _forget_namespace() -> None:
    for name in [
        m for m in sys.modules if m == "torchx_plugins" or m.startswith("torchx_plugins.")
    ]:
        del sys.modules[name]


@pytest.fixture
def plugin_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], Path]]:
    """Returns ``write(relpath, source)`` writing files under a directory put on sys.path.

    ``write("torchx_plugins/schedulers/mine.py", ...)`` makes a namespace-package plugin;
    ``write("x-0.1.dist-info/entry_points.txt", ...)`` an entry point. The process-wide
    plugin registry is cleared before and after.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    _forget_namespace()
    from torchx_core.schedulers.registry import default_registry

    default_registry().refresh()  # also clears the plugin registry

    def write(rel: str, text: str) -> Path:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith("entry_points.txt"):
            name = path.parent.name.split("-")[0]
            (path.parent / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n"
            )
        return path

    yield write
    _forget_namespace()
    default_registry().refresh()
