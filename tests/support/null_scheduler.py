"""A scheduler that runs nothing: the least a ``Scheduler`` subclass defined outside this
package (a TorchX user's own) must implement, for tests of the scheduler API's own behaviour."""

from __future__ import annotations

from collections.abc import Mapping

from torchx_core.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from torchx_core.specs import AppDef, AppDryRunInfo, CfgVal


class NullScheduler(Scheduler[None]):
    """Backend ``mock``: every app is ``"id"``, unknown when described; nothing is listed."""

    def __init__(self, backend: str = "mock", session_name: str = "s") -> None:
        super().__init__(backend, session_name)

    def schedule(self, dryrun_info: AppDryRunInfo[None]) -> str:
        return "id"

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[None]:
        return AppDryRunInfo(None, lambda _: "None")

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        return None

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass
