"""The one status read of the app lifecycle.

Every status the lifecycle (and its log follower) reads goes through :func:`read_status`, so a
batched or coalesced read (many watchers, one scheduler call per interval) is swapped in here.
Only the Runner's public API is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.specs import AppStatus


def read_status(runner: Runner, app_handle: str, max_age: float = 0.0) -> AppStatus | None:
    """The app's status (None: the scheduler does not know it); raises what the read raises.

    With ``max_age > 0`` the read is shared with every other watcher of the same scheduler in
    this process (``Runner.watch_status``): at most ``max_age`` seconds old, and one batched
    scheduler call per ``max_age`` for all of them.
    """
    if max_age > 0:
        return runner.watch_status(app_handle, max_age)
    return runner.status(app_handle)


async def aread_status(runner: Runner, app_handle: str, max_age: float = 0.0) -> AppStatus | None:
    """:func:`read_status` for event loops: never blocks the loop (``Runner.awatch_status``)."""
    if max_age > 0:
        return await runner.awatch_status(app_handle, max_age)
    import asyncio

    return await asyncio.to_thread(runner.status, app_handle)
