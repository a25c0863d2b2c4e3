"""Directory workspaces: the job runs from a copy of the workspace.

TorchX's ``torchx.workspace.dir_workspace``.

Mix one of these into a scheduler whose replicas read a shared or local filesystem:
:class:`DirWorkspaceMixin` copies into the ``job_dir`` run option, :class:`TmpDirWorkspaceMixin`
into a new temporary directory. Either way ``role.image`` becomes that directory. A project's
``.torchxignore`` names the files left out (TorchX's rules, :mod:`torchx_core.workspace.ignore`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

from torchx_core.specs import CfgVal, InvalidWorkspaceError, Role, Workspace, runopts
from torchx_core.workspace.api import WorkspaceMixin, copy_workspace

__all__ = ["DirWorkspaceMixin", "TmpDirWorkspaceMixin"]


def _copy_to_dir(workspace: str, target: str) -> None:
    """TorchX's helper: copies ``workspace`` into ``target`` (``.torchxignore`` rules applied);
    either may be an fsspec URL (``memory://a``, ``s3://bucket/b``)."""
    if "://" not in target:
        copy_workspace(workspace, target, missing_ok=True)
        return
    import fsspec

    fs, path = fsspec.core.url_to_fs(target)
    with tempfile.TemporaryDirectory(prefix="torchx_workspace") as tmp:
        copy_workspace(workspace, tmp, missing_ok=True)
        for root, _, files in os.walk(tmp):
            rel = os.path.relpath(root, tmp)
            for name in files:
                dest = "/".join(p for p in (path.rstrip("/"), rel, name) if p and p != ".")
                fs.makedirs(dest.rsplit("/", 1)[0], exist_ok=True)
                fs.put_file(os.path.join(root, name), dest)


class TmpDirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into a new temporary directory and runs the role from there."""

    _hook_takes_workspace = True  # its hook takes the Workspace, not a path

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Copies ``workspace`` into a fresh temp dir and sets ``role.image`` to it."""
        job_dir = tempfile.mkdtemp(prefix="torchx_workspace")
        copy_workspace(workspace, job_dir, missing_ok=True)
        role.image = job_dir


class DirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into the ``job_dir`` run option and runs the role from there.

    Without ``job_dir`` the role is left as it is (it runs from its image).
    """

    _hook_takes_workspace = True  # its hook takes the Workspace, not a path

    def workspace_opts(self) -> runopts:
        """Adds ``job_dir``: the directory (new) to copy the workspace into."""
        opts = runopts()
        opts.add(
            "job_dir",
            type_=str,
            help="a new directory to copy the workspace into; the job runs from it",
        )
        return opts

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Copies ``workspace`` into ``cfg["job_dir"]`` (which must not exist yet).

        Raises:
            InvalidWorkspaceError: ``job_dir`` is not a str or already exists
        """
        job_dir = cfg.get("job_dir")
        if job_dir is None:
            return
        if not isinstance(job_dir, str):
            raise InvalidWorkspaceError(f"job_dir must be a str path, got {job_dir!r}")
        if os.path.exists(job_dir):
            raise InvalidWorkspaceError(
                f"job_dir {job_dir!r} already exists; give a new directory for the job's copy"
                " of the workspace"
            )
        copy_workspace(workspace, job_dir, missing_ok=True)
        role.image = job_dir
