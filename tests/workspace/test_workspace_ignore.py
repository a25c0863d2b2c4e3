"""Ignore files (``.torchxignore``, ``.dockerignore``) leave files out of a workspace copy, with
TorchX's rules: fnmatch patterns, ``!`` keeps, the last match decides, an ignored directory is
not entered, below a kept directory only the later patterns apply."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from torchx_core.specs import Workspace
from torchx_core.workspace.api import copy_workspace
from torchx_core.workspace.docker_workspace import build_context
from torchx_core.workspace.ignore import read_patterns


def _tree(root: Path, files: list[str], ignore_name: str, ignore_text: str) -> Path:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).touch()
    (root / ignore_name).write_text(ignore_text)
    return root


def _copied(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}


_FILES = [
    "ignoredir/bar",
    "ignoredir/recursive/bar",
    "three/part/ignore/foo/bar",
    "dir1/bar",
    "dir/ignorefileglob1",
    "dir/recursive/ignorefileglob2",
    "dir/ignorefile",
    "ignorefile",
    "ignorefilesuffix",
    "dir/file",
    "foo.sh",
    "unignore",
]
_RULES = """
    # comment

    # dirs/files
    ignoredir
    ignorefile
    three/part/ignore

    # globs
    */ignorefileglo*1
    **/ignorefileglob2
    dir?

    # inverse patterns
    unignore
    !unignore

    # ignore .
    .
"""


def test_torchxignore_rules(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", _FILES, ".torchxignore", _RULES)
    out = copy_workspace(str(src), tmp_path / "out")
    assert _copied(out) == {
        ".torchxignore",
        "dir/ignorefile",  # `ignorefile` names the top-level file only
        "ignorefilesuffix",
        "dir/file",
        "foo.sh",
        "unignore",
    }


def test_a_kept_directory_escapes_the_earlier_patterns(tmp_path: Path) -> None:
    files = [
        "Dockerfile.torchx",
        "timm_app.py",
        "bigfile",
        "some_dir/a",
        "some_dir/b",
        "some_dir/ignore1",
        "some_dir/ignore2",
        "some_dir/subdir/a",
        "some_dir/subdir/b",
        "some_dir/subdir/ignore3",
    ]
    rules = """
        *
        !timm_app.py
        **/a
        !some_dir
        **/ignore1
        some_dir/ignore2
        some_dir/subdir/ignore3
    """
    src = _tree(tmp_path / "src", files, ".dockerignore", rules)
    ctx, dockerfile = build_context(Workspace({str(src): ""}))
    with tarfile.open(fileobj=io.BytesIO(ctx.read())) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert dockerfile == "Dockerfile.torchx"  # never ignored
    assert names == {
        "Dockerfile.torchx",
        "timm_app.py",
        "some_dir/a",
        "some_dir/b",
        "some_dir/subdir/a",
        "some_dir/subdir/b",
    }


def test_the_docker_workspace_reads_dockerignore_not_torchxignore(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", ["secret.env", "main.py", "data/big"], ".dockerignore", "*.env\n")
    (src / ".torchxignore").write_text("main.py\n")
    ctx, _ = build_context(Workspace({str(src): ""}))
    with tarfile.open(fileobj=io.BytesIO(ctx.read())) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert "secret.env" not in names and {"main.py", "data/big"} <= names
    out = copy_workspace(str(src), tmp_path / "out")  # a directory copy reads .torchxignore
    assert "main.py" not in _copied(out) and "secret.env" in _copied(out)


def test_read_patterns_skips_comments_blank_lines_and_dot(tmp_path: Path) -> None:
    (tmp_path / ".torchxignore").write_text("# c\n\n  a  # trailing\n.\n!b\n")
    assert read_patterns(str(tmp_path), ".torchxignore") == ["a", "!b"]
    assert read_patterns(str(tmp_path), ".dockerignore") == []


def test_an_fsspec_url_project_is_copied_with_its_ignore_rules(tmp_path: Path) -> None:
    """TorchX reads workspaces through fsspec: ``memory://proj`` works as a directory does."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for f in ["specs2_proj/main.py", "specs2_proj/data/big", "specs2_proj/pkg/mod.py"]:
        fs.pipe(f"/{f}", b"x")
    fs.pipe("/specs2_proj/.dockerignore", b"data\n")
    try:
        ctx, dockerfile = build_context("memory://specs2_proj")
        with tarfile.open(fileobj=io.BytesIO(ctx.read())) as tar:
            names = {m.name for m in tar.getmembers() if m.isfile()}
        assert names == {".dockerignore", "main.py", "pkg/mod.py", dockerfile}
        out = copy_workspace(Workspace({"memory://specs2_proj": "sub"}), tmp_path / "out")
        assert _copied(out) == {
            "sub/.dockerignore",
            "sub/main.py",
            "sub/pkg/mod.py",
            "sub/data/big",
        }
    finally:
        fs.rm("/specs2_proj", recursive=True)
