"""Jupyter/IPython helpers: build a workspace from notebook cells (``torchx.notebook``).

In a notebook, ``import torchx_core.notebook`` registers the ``%%workspacefile`` cell magic::

    %%workspacefile train.py
    print("hello from the workspace")

Each cell is written under :func:`get_workspace`; run it with
``torchx run --workspace <that dir> ...`` or ``Runner.run(..., workspace=get_workspace())``.
TorchX keeps this workspace in fsspec's ``memory://`` filesystem; ours is a local directory,
so every scheduler's workspace support (directory copy, docker image) takes it as it is.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["get_workspace", "workspacefile"]

_WORKSPACE = os.path.join(tempfile.gettempdir(), f"torchx-notebook-workspace-{os.getpid()}")


def get_workspace() -> str:
    """The notebook's workspace directory (one per notebook process; created on first use)."""
    os.makedirs(_WORKSPACE, exist_ok=True)
    return _WORKSPACE


def workspacefile(line: str, cell: str) -> None:
    """Cell magic body: writes ``cell`` to ``line`` (a relative path) in the workspace.

    Raises:
        ValueError: the path is empty, absolute, or leaves the workspace
    """
    rel = line.strip()
    root = os.path.realpath(get_workspace())
    path = os.path.realpath(os.path.join(root, rel))
    if not rel or os.path.isabs(rel) or not path.startswith(root + os.sep):
        raise ValueError(
            f"%%workspacefile needs a relative file path inside the workspace, got {line!r}"
        )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(cell)
    print(f"Added {rel} to workspace {root}")


def _register_magic() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.register_magic_function(workspacefile, magic_kind="cell")


_register_magic()
