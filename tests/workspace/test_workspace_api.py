"""copy_workspace copies projects, skips caches and special files, and keeps symlinks."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from torchx_core.specs import InvalidWorkspaceError, Workspace
from torchx_core.workspace.api import copy_workspace, workspace_digest


def test_copy_skips_caches_and_special_files(tmp_path: Path) -> None:
    src = tmp_path / "proj"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (src / ".git").mkdir()
    (src / "link.py").symlink_to("pkg/mod.py")
    os.mkfifo(src / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "daemon.sock"))
    try:
        out = copy_workspace(Workspace(projects={str(src): "code"}), tmp_path / "out")
    finally:
        sock.close()
    copied = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert copied == ["code", "code/link.py", "code/pkg", "code/pkg/mod.py"]
    assert (out / "code" / "link.py").is_symlink()


def test_digest_changes_with_content(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("1")
    before = workspace_digest(str(tmp_path))
    (tmp_path / "a.py").write_text("2")
    assert workspace_digest(str(tmp_path)) != before


@pytest.mark.parametrize("text", ["", " , ", "# only a comment"])
def test_a_workspace_string_naming_no_directory_is_a_typed_error(text: str, tmp_path: Path) -> None:
    # Workspace.from_str gives None for these; as_workspace once returned that None as a Workspace
    with pytest.raises(InvalidWorkspaceError, match="names no directory") as err:
        copy_workspace(text, tmp_path / "out")
    assert repr(text) in str(err.value)
