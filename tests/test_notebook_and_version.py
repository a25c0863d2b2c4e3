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
