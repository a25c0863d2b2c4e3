"""copy_workspace copies projects, skips caches and special files, and keeps symlinks;
WorkspaceMixin's TorchX HEAD hooks (build_workspaces, caching_build_workspace_and_update_role)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

import pytest

from torchx_core.specs import CfgVal, InvalidWorkspaceError, Role, Workspace
from torchx_core.workspace.api import WorkspaceMixin, copy_workspace, workspace_digest


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


class _CachingBuilds(WorkspaceMixin[None]):
    """TorchX HEAD's recommended hook only: one build per (image, workspace) per call."""

    def __init__(self) -> None:
        self.builds: list[tuple[str, Workspace]] = []

    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
    ) -> None:
        assert role.workspace is not None
        key = (role.image, role.workspace)
        if key not in build_cache:
            self.builds.append(key)
            build_cache[key] = f"{role.image}:{len(self.builds)}"
        role.image = str(build_cache[key])


def test_build_workspaces_shares_one_cache_per_call_and_skips_roles_without_one() -> None:
    ws = Workspace({"/src/a": "", "/src/b": "b"})
    roles = [
        Role("none", image="foo"),
        Role("r1", image="bar", workspace=ws),
        Role("r2", image="bar", workspace=Workspace({"/src/b": "b", "/src/a": ""})),
        Role("r3", image="baz", workspace=ws),
    ]
    builder = _CachingBuilds()
    builder.build_workspaces(roles, cfg={})
    assert [r.image for r in roles] == ["foo", "bar:1", "bar:1", "baz:2"]
    assert builder.builds == [("bar", ws), ("baz", ws)]
    builder.build_workspaces([Role("r", image="bar", workspace=ws)], cfg={})
    assert len(builder.builds) == 3  # a new call, a new cache


def test_workspace_hashes_by_projects_and_a_mixin_without_a_build_hook_says_so() -> None:
    assert hash(Workspace({"a": "", "b": "x"})) == hash(Workspace({"b": "x", "a": ""}))
    assert len({Workspace({"a": ""}), Workspace({"a": ""}), Workspace({"a": "t"})}) == 2

    class NoBuild(WorkspaceMixin[None]):
        pass

    with pytest.raises(NotImplementedError, match="implement `caching_build_workspace"):
        NoBuild().build_workspaces([Role("r", image="i", workspace=Workspace({"a": ""}))], {})


def test_an_empty_workspace_string_is_a_typed_error(tmp_path: Path) -> None:
    from torchx_core.specs import InvalidWorkspaceError

    with pytest.raises(InvalidWorkspaceError, match="names no directory"):
        copy_workspace("", tmp_path / "out")


def test_a_torchx_build_hook_gets_a_path_merged_from_every_project(tmp_path: Path) -> None:
    """As TorchX: a scheduler that implements only ``build_workspace_and_update_role`` gets a
    path: the project's own for one project mapped to the root, else a temporary directory
    holding the projects merged (this package's hooks take the ``Workspace`` itself)."""
    for name, files in {"a": {"a.py": "A"}, "b": {"b.py": "B"}}.items():
        (tmp_path / name).mkdir()
        for f, text in files.items():
            (tmp_path / name / f).write_text(text)
    seen: list[tuple[str, set[str]]] = []

    class PathHook(WorkspaceMixin[None]):
        def build_workspace_and_update_role(
            self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
        ) -> None:
            assert isinstance(workspace, str)
            root = Path(workspace)
            seen.append((workspace, {str(p.relative_to(root)) for p in root.rglob("*.py")}))

    merged = Workspace({str(tmp_path / "a"): "", str(tmp_path / "b"): "b"})
    single = Workspace({str(tmp_path / "a"): ""})
    PathHook().build_workspaces(
        [Role("m", image="i", workspace=merged), Role("s", image="i", workspace=single)], {}
    )
    assert seen[0][1] == {"a.py", "b/b.py"} and not Path(seen[0][0]).exists()  # a temp dir
    assert seen[1] == (str(tmp_path / "a"), {"a.py"})


def test_copy_of_a_missing_project_raises_unless_missing_ok(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Strict by default (a scheduler copying at submit must not run an empty copy); TorchX's
    workspace mixins pass ``missing_ok`` and copy nothing, with a warning."""
    with pytest.raises(FileNotFoundError):
        copy_workspace(str(tmp_path / "gone"), tmp_path / "out")
    copy_workspace(str(tmp_path / "gone"), tmp_path / "out2", missing_ok=True)
    assert list((tmp_path / "out2").iterdir()) == [] and "gone does not exist" in caplog.text


def test_this_package_s_hooks_get_the_workspace_itself(tmp_path: Path) -> None:
    """Slurm points the role at the project (no copy): several projects without ``job_dir``
    stay refused instead of pointing at a merged temporary directory that is then deleted."""
    from torchx_core.schedulers.api import UnsupportedFeatureError
    from torchx_core.schedulers.slurm.scheduler import SlurmScheduler

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    ws = Workspace({str(tmp_path / "a"): "", str(tmp_path / "b"): "b"})
    with pytest.raises(UnsupportedFeatureError, match="maps several projects"):
        SlurmScheduler("t").build_workspaces([Role("r", image="i", workspace=ws)], {})
    role = Role("r", image="i", workspace=Workspace({str(tmp_path / "a"): ""}))
    SlurmScheduler("t").build_workspaces([role], {})
    assert role.image == str(tmp_path / "a")
