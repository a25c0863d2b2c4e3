"""Workspaces: mirror local project directories into what a job runs.

A scheduler that supports workspaces mixes in :class:`WorkspaceMixin` and implements
``build_workspace_and_update_role``, which turns ``role.workspace`` into something the scheduler
can run (a directory, an image) and points ``role.image`` at it.
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from torchx_core.specs import CfgVal, Role, Workspace, runopts
from torchx_core.workspace.ignore import TORCHX_IGNORE, IgnoreRules, last_match, parse_patterns

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["TORCHX_IGNORE", "WorkspaceMixin", "copy_workspace", "workspace_digest"]

T = TypeVar("T")

logger: logging.Logger = logging.getLogger(__name__)

# Files never copied into a workspace.
_IGNORED = (".git", "__pycache__", "*.pyc", ".venv", ".mypy_cache", ".pytest_cache")


class WorkspaceMixin(abc.ABC, Generic[T]):
    """Mixed into schedulers that can run a role from a workspace.

    Implement :meth:`build_workspace_and_update_role` (one role at a time) or, as TorchX HEAD
    recommends, :meth:`caching_build_workspace_and_update_role` (with a cache shared by the roles
    of one :meth:`build_workspaces` call, so roles with the same image and workspace can share
    one build).
    """

    def workspace_opts(self) -> runopts:
        """Run options specific to building workspaces."""
        return runopts()

    def build_workspaces(self, roles: list[Role], cfg: Mapping[str, CfgVal]) -> None:
        """Builds the workspace of every role that has one and updates the roles in place
        (``role.image``, maybe ``role.env``); roles without a workspace are left alone."""
        build_cache: dict[object, object] = {}
        for role in roles:
            if role.workspace:
                self.caching_build_workspace_and_update_role(role, cfg, build_cache)

    #: True if :meth:`build_workspace_and_update_role` takes the role's :class:`Workspace` itself
    #: (this package's mixins and schedulers); False (TorchX's contract, the default) hands it a
    #: path: the project's, or a temporary directory holding every project merged
    _hook_takes_workspace: ClassVar[bool] = False

    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
    ) -> None:
        """Builds ``role.workspace`` for ``role``; ``build_cache`` lives for one
        :meth:`build_workspaces` call (what to cache is the implementation's choice).

        The default calls :meth:`build_workspace_and_update_role` as TorchX does: with the
        project's path for a single project mapped to the root, else with a temporary directory
        the projects are merged into (deleted when the hook returns).
        """
        workspace = role.workspace
        if not workspace:
            return
        if self._hook_takes_workspace:
            self.build_workspace_and_update_role(role, workspace, cfg)
        elif workspace.is_unmapped_single_project():
            self.build_workspace_and_update_role(role, str(workspace), cfg)
        else:
            import tempfile

            with tempfile.TemporaryDirectory(suffix="torchx_workspace_") as outdir:
                copy_workspace(workspace, outdir)
                self.build_workspace_and_update_role(role, outdir, cfg)

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Builds ``workspace`` for ``role`` and updates ``role.image`` (in place).

        Raises:
            NotImplementedError: the scheduler implements neither build hook.
        """
        raise NotImplementedError(
            f"{type(self).__name__} builds no workspace: implement"
            " `caching_build_workspace_and_update_role` (or `build_workspace_and_update_role`)"
        )


def _ignore(directory: str, names: list[str]) -> set[str]:
    """Names ``copytree`` skips: caches and VCS folders, and special files (sockets, FIFOs,
    devices), which cannot be copied and never belong in a workspace."""
    import fnmatch
    import stat

    skipped = {n for n in names if any(fnmatch.fnmatch(n, p) for p in _IGNORED)}
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            skipped.add(name)  # vanished while copying
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            skipped.add(name)
    return skipped


def as_workspace(workspace: Workspace | str) -> Workspace:
    """Accepts a Workspace or its CLI string form (``path`` or ``src:dst,src2:dst2``).

    Raises:
        InvalidWorkspaceError: the string names no directory (empty, or only comments)
    """
    if isinstance(workspace, Workspace):
        return workspace
    ws = Workspace.from_str(workspace)
    if ws is None:
        from torchx_core.specs.errors import InvalidWorkspaceError

        raise InvalidWorkspaceError(
            f"workspace {workspace!r} names no directory; give a local path (`~/proj`) or"
            " `local:remote` pairs separated by `,` (`~/a:a,~/b:b`)"
        )
    return ws


def copy_workspace(
    workspace: Workspace | str,
    outdir: str | os.PathLike[str],
    ignore_file: str = TORCHX_IGNORE,
    *,
    missing_ok: bool = False,
) -> Path:
    """Copies every project of ``workspace`` into ``outdir`` (created if missing).

    Each project directory's ``ignore_file`` (``.torchxignore``; the Docker workspace reads
    ``.dockerignore``) names what is left out, as in TorchX (see :mod:`.ignore`). A local
    project that does not exist raises ``FileNotFoundError``; with ``missing_ok`` (TorchX's
    workspace mixins) it copies nothing, with a warning.
    """
    import shutil
    from pathlib import Path

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    ws = as_workspace(workspace)
    for src, dst in ws.projects.items():
        target = out / dst if dst else out
        if "://" in src:
            _copy_fsspec_project(src, target, ignore_file)
            continue
        src_path = Path(os.path.expanduser(src))
        if missing_ok and not os.path.lexists(src_path):  # as TorchX's workspace mixins
            logger.warning("workspace project %s does not exist: nothing copied from it", src)
            out.mkdir(parents=True, exist_ok=True)
            continue
        if src_path.is_dir():
            rules = IgnoreRules(str(src_path), ignore_file)

            def skip(directory: str, names: list[str], rules: IgnoreRules = rules) -> set[str]:
                return _ignore(directory, names) | rules(directory, names)

            shutil.copytree(src_path, target, dirs_exist_ok=True, ignore=skip, symlinks=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src_path, target / src_path.name)
    return out


def _copy_fsspec_project(url: str, target: Path, ignore_file: str) -> None:
    """Copies the project at the fsspec ``url`` (``memory://p``, ``s3://b/p``) into ``target``,
    with the rules of its ``ignore_file`` (a file URL is copied as the one file)."""
    import fnmatch
    import posixpath
    import shutil

    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/") or "/"
    if not fs.isdir(root):
        target.mkdir(parents=True, exist_ok=True)
        with fs.open(root, "rb") as src, open(target / posixpath.basename(root), "wb") as dst:
            shutil.copyfileobj(src, dst)
        return
    ignore_path = posixpath.join(root, ignore_file)
    patterns: list[str] = []
    if fs.isfile(ignore_path):
        with fs.open(ignore_path, "rt") as f:
            patterns = parse_patterns(f.read())
    todo = [("", 0)]  # (directory relative to root, first pattern that applies below it)
    while todo:
        rel_dir, first = todo.pop()
        for info in fs.ls(posixpath.join(root, rel_dir) if rel_dir else root, detail=True):
            name = posixpath.basename(info["name"].rstrip("/"))
            if any(fnmatch.fnmatch(name, p) for p in _IGNORED):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            index, ignored = last_match(rel, patterns[first:])
            if ignored:
                continue
            if info["type"] == "directory":
                todo.append((rel, first + index + 1))
                continue
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with fs.open(info["name"], "rb") as src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst)


def workspace_digest(workspace: Workspace | str) -> str:
    """A short content hash of the workspace's files (names and bytes), for cache keys/tags."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    ws = as_workspace(workspace)
    for src, dst in sorted(ws.projects.items()):
        root = Path(os.path.expanduser(src))
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in paths:
            if any(part in {".git", "__pycache__", ".venv"} for part in p.parts):
                continue
            h.update(f"{dst}/{p.relative_to(root) if p != root else p.name}".encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]
