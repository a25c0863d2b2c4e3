"""torchx_core.notebook (the %%workspacefile cell magic) and torchx_core.version."""

from __future__ import annotations

from pathlib import Path

import pytest

import torchx_core
from torchx_core import notebook, version


def test_workspacefile_writes_cells_into_the_workspace(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(notebook.get_workspace())
    notebook.workspacefile("sub/train.py", "print('cell')\n")
    assert (root / "sub" / "train.py").read_text() == "print('cell')\n"
    assert "Added sub/train.py to workspace" in capsys.readouterr().out
    for bad in ("", "/etc/passwd", "../outside.py"):
        with pytest.raises(ValueError, match="relative file path inside the workspace"):
            notebook.workspacefile(bad, "x")


def test_version() -> None:
    assert version.__version__ == torchx_core.__version__
    assert version.TORCHX_IMAGE.startswith("ghcr.io/")


def test_the_package_version_is_torchx_core_version() -> None:
    """One source: pyproject.toml's version is dynamic, read by hatchling from ``__version__``."""
    import importlib.metadata
    import re

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.MULTILINE)
    assert not re.search(r"^version = ", pyproject, re.MULTILINE)
    assert '[tool.hatch.version]\npath = "torchx_core/__init__.py"\n' in pyproject
    assert importlib.metadata.version("torchx-suite") == torchx_core.__version__


def test_get_torchx_image_tags_the_given_version() -> None:
    """TorchX's ``version._get_torchx_image``: TorchX's image at the given version."""
    assert version._get_torchx_image("0.1.2") == "ghcr.io/pytorch/torchx:0.1.2"
