"""Workspaces: mirror local project directories into what a job runs.

``WorkspaceMixin`` is the base of the schedulers' workspace support (see
:mod:`torchx_core.workspace.api`); :mod:`~torchx_core.workspace.dir_workspace` and
:mod:`~torchx_core.workspace.docker_workspace` hold the directory and image builders.
"""

from torchx_core.workspace.api import WorkspaceMixin

__all__ = ["WorkspaceMixin"]
