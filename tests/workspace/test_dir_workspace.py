"""torchx_core.workspace.dir_workspace (DirWorkspaceMixin, TmpDirWorkspaceMixin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchx_core.specs import InvalidWorkspaceError, Role
from torchx_core.workspace import WorkspaceMixin
from torchx_core.workspace.dir_workspace import DirWorkspaceMixin, TmpDirWorkspaceMixin


class _Dir(DirWorkspaceMixin):
    pass


class _Tmp(TmpDirWorkspaceMixin):
    pass


@pytest.fixture
def project(tmp_path: Path) -> Path:
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "main.py").write_text("print('hi')\n")
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "junk.pyc").write_text("x")
    return src


def test_dir_workspace_copies_into_job_dir(project: Path, tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    role = Role("r", image="orig", entrypoint="python")
    mixin = _Dir()
    assert isinstance(mixin, WorkspaceMixin) and "job_dir" in dict(mixin.workspace_opts())
    mixin.build_workspace_and_update_role(role, str(project), {"job_dir": str(job_dir)})
    assert role.image == str(job_dir)
    assert (job_dir / "main.py").read_text() == "print('hi')\n"
    assert (job_dir / "pkg" / "mod.py").is_file() and not (job_dir / "__pycache__").exists()
    with pytest.raises(InvalidWorkspaceError, match="already exists"):
        mixin.build_workspace_and_update_role(role, str(project), {"job_dir": str(job_dir)})


def test_dir_workspace_without_job_dir_leaves_the_role(project: Path) -> None:
    role = Role("r", image="orig", entrypoint="python")
    _Dir().build_workspace_and_update_role(role, str(project), {})
    assert role.image == "orig"


def test_tmp_dir_workspace(project: Path) -> None:
    role = Role("r", image="orig", entrypoint="python")
    _Tmp().build_workspace_and_update_role(role, str(project), {})
    assert Path(role.image).name.startswith("torchx_workspace")
    assert (Path(role.image) / "pkg" / "mod.py").read_text() == "X = 1\n"
