"""The Runner API that submits AppDefs as jobs (``torchx.runner`` compatible)::

from torchx_core.runner import get_runner

with get_runner() as runner:
    handle = runner.run_component("utils.echo", ["--msg", "hi"], scheduler="local_cwd")
    print(runner.wait(handle, wait_interval=0.1))
"""

from typing import TYPE_CHECKING

from torchx_core.runner.api import Runner as Runner
from torchx_core.runner.api import RunnerError as RunnerError
from torchx_core.runner.api import get_runner as get_runner
from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_core.runner.lifecycle import AppCancelledError as AppCancelledError
    from torchx_core.runner.lifecycle import AppFailedError as AppFailedError
    from torchx_core.runner.lifecycle import AppLifecycle as AppLifecycle
    from torchx_core.runner.lifecycle import AppLifecycleError as AppLifecycleError
    from torchx_core.runner.lifecycle import AppVanishedError as AppVanishedError
    from torchx_core.runner.lifecycle import Attachment as Attachment
    from torchx_core.runner.lifecycle import GraceClock as GraceClock
    from torchx_core.runner.lifecycle import InvalidTaskArgumentError as InvalidTaskArgumentError
    from torchx_core.runner.lifecycle import LogFollower as LogFollower
    from torchx_core.runner.lifecycle import Observation as Observation
    from torchx_core.runner.lifecycle import Phase as Phase
    from torchx_core.runner.lifecycle import app_name as app_name
    from torchx_core.runner.lifecycle import phase_of as phase_of
    from torchx_core.runner.links import dashboard_app_url as dashboard_app_url
    from torchx_core.runner.tracking import TrackerResults as TrackerResults
    from torchx_core.runner.tracking import tracker_results as tracker_results

# imported on first use: the lifecycle pulls in asyncio (~30 ms), which `torchx run` and
# `torchx status` never need
_LAZY = {
    **dict.fromkeys(
        [
            "AppCancelledError", "AppFailedError", "AppLifecycle", "AppLifecycleError",
            "AppVanishedError", "Attachment", "GraceClock", "InvalidTaskArgumentError",
            "LogFollower", "Observation", "Phase", "app_name", "phase_of",
        ],
        "torchx_core.runner.lifecycle",
    ),
    "TrackerResults": "torchx_core.runner.tracking",
    "tracker_results": "torchx_core.runner.tracking",
    "dashboard_app_url": "torchx_core.runner.links",
}  # fmt: skip


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppLifecycle",
    "AppLifecycleError",
    "AppVanishedError",
    "Attachment",
    "GraceClock",
    "InvalidTaskArgumentError",
    "LogFollower",
    "Observation",
    "Phase",
    "Runner",
    "RunnerError",
    "TrackerResults",
    "app_name",
    "dashboard_app_url",
    "get_runner",
    "phase_of",
    "tracker_results",
]
