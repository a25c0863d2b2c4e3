"""``Runner.dryrun`` with a scheduler defined elsewhere (``checks_in_dryrun`` False): TorchX's
contract, where the runner resolves the cfg, builds the workspaces, then calls ``_validate``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from support.null_scheduler import NullScheduler

from torchx_core import specs
from torchx_core.runner.api import Runner
from torchx_core.schedulers.api import AppValidationError
from torchx_core.specs import AppDef, AppDryRunInfo, CfgVal, Role, runopts
from torchx_core.workspace.api import WorkspaceMixin


class _Foreign(WorkspaceMixin[None], NullScheduler):
    def __init__(self) -> None:
        super().__init__("foreign", "s")
        self.seen: list[tuple[str, Any]] = []

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[None]:
        self.seen.append(("submit_dryrun", dict(cfg)))  # what the runner hands over
        return super().submit_dryrun(app, cfg)

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        self.seen.append(("validate", app.roles[0].image))
        super()._validate(app, scheduler, cfg)

    def build_workspace_and_update_role(
        self, role: Role, workspace: Any, cfg: Mapping[str, CfgVal]
    ) -> None:
        self.seen.append(("build", str(workspace)))
        role.image = "built"

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("foo", type_=str, default="dflt", help="an option with a default")
        return opts


def _runner(sched: _Foreign) -> Runner:
    return Runner("s", scheduler_factories={"foreign": lambda session_name, **kw: sched})


def _app(**role: Any) -> AppDef:
    return AppDef("a", roles=[Role("r", image="img", entrypoint="e", **role)])


def test_the_runner_validates_a_foreign_scheduler_app() -> None:
    with _runner(_Foreign()) as runner, pytest.raises(AppValidationError, match="no resource"):
        runner.dryrun(_app(), "foreign")


def test_the_runner_builds_then_validates_then_hands_over_the_resolved_cfg(
    tmp_path: Any,
) -> None:
    sched = _Foreign()
    with _runner(sched) as runner:
        runner.dryrun(_app(resource=specs.resource(cpu=1)), "foreign", workspace=str(tmp_path))
    assert sched.seen == [
        ("build", str(tmp_path)),
        ("validate", "built"),  # after the build, as TorchX
        ("submit_dryrun", {"foo": "dflt"}),  # the cfg resolved by the runner; each step once
    ]
