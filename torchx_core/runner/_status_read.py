"""The one status read of the app lifecycle.

Every status the lifecycle (and its log follower) reads goes through :func:`read_status`, so a
batched or coalesced read (many watchers, one scheduler call per interval) is swapped in here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.specs import AppStatus


def read_status(runner: Runner, app_handle: str) -> AppStatus | None:
    """The app's status (None: the scheduler does not know it); raises what the read raises."""
    return runner.status(app_handle)
