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


def test_a_missing_project_copies_nothing_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As TorchX: the mixin copies nothing from a workspace that does not exist (the runner is
    what refuses it, before any build); here a warning names it."""
    job_dir = tmp_path / "job"
    role = Role("r", image="orig", entrypoint="python")
    _Dir().build_workspace_and_update_role(role, "invalid", {"job_dir": str(job_dir)})
    assert role.image == str(job_dir) and list(job_dir.iterdir()) == []
    assert "workspace project invalid does not exist" in caplog.text


def test_torchx_copy_to_dir_reads_and_writes_fsspec_urls(project: Path) -> None:
    """TorchX's ``_copy_to_dir(workspace, target)``: either side may be an fsspec URL; the
    source's ``.torchxignore`` applies."""
    import fsspec

    from torchx_core.workspace.dir_workspace import _copy_to_dir

    (project / ".torchxignore").write_text("pkg\n")
    fs = fsspec.filesystem("memory")
    _copy_to_dir(str(project), "memory://copy_to_dir_dest")
    got = {p.partition("copy_to_dir_dest/")[2] for p in fs.find("/copy_to_dir_dest")}
    assert got == {".torchxignore", "main.py"}
    _copy_to_dir("memory://copy_to_dir_dest", "memory://copy_to_dir_again")
    assert fs.cat("/copy_to_dir_again/main.py") == b"print('hi')\n"
