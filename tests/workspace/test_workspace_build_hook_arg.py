"""What the default ``caching_build_workspace_and_update_role`` hands the build hook."""

from __future__ import annotations

from collections.abc import Mapping

from torchx_core.specs import CfgVal, Role, Workspace
from torchx_core.workspace.api import WorkspaceMixin


class _Recorder(WorkspaceMixin[None]):
    def __init__(self) -> None:
        self.got: list[object] = []

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        self.got.append(workspace)


def _built(ws: str) -> object:
    rec = _Recorder()
    rec.build_workspaces([Role("r", image="i", workspace=Workspace.from_str(ws))], {})
    return rec.got[0]


def test_one_directory_is_handed_over_as_its_path() -> None:
    # as TorchX: a hook written for TorchX joins paths onto the str it is given (several or
    # mapped projects: a merged directory, tests/workspace/test_workspace_api.py)
    assert _built("/tmp/project") == "/tmp/project"
