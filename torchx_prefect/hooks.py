"""Flow-level hooks that cancel every TorchX app a flow run started.

Prefect tasks have no ``on_cancellation``/``on_crashed`` hooks, and a task's own cleanup does
not run on every path (e.g. a killed worker). The launcher tasks therefore record each app
handle as a flow-run label (``torchx.app.<id>``) before waiting; these hooks read the labels
back from the Prefect API and cancel the apps (idempotent, bounded in time)::

    from prefect import flow
    from torchx_prefect import cancel_flow_apps

    @flow(on_cancellation=[cancel_flow_apps], on_crashed=[cancel_flow_apps])
    def train(): ...
"""

from __future__ import annotations

import logging
from typing import Any

from torchx_prefect import _prefect_io as pio
from torchx_prefect._launch import cancel_app

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["cancel_flow_apps"]

HOOK_CANCEL_TIMEOUT = 30.0
"""Seconds allowed for each app's cancellation in a hook."""


def cancel_flow_apps(flow: Any, flow_run: Any, state: Any) -> list[str]:
    """Cancels every TorchX app recorded on ``flow_run``; use as ``on_cancellation``,
    ``on_crashed`` (or ``on_failure``) hook of a ``@flow``.

    Apps that already ended are left as they are (cancel is idempotent). Errors are logged,
    never raised, so one unreachable scheduler does not stop the others from being cancelled.

    Args:
        flow: the Prefect flow (unused; part of the hook signature)
        flow_run: the flow run whose apps to cancel
        state: the state that triggered the hook (used in the log message)

    Returns:
        The handles that were asked to cancel.
    """
    from torchx_core.runner import get_runner

    store = pio.FlowRunHandleStore(flow_run.id)
    try:
        handles = store.handles()
    except Exception as e:  # noqa: BLE001 - fall back to the labels the hook was given
        logger.warning("Could not read flow run %s labels: %s", flow_run.id, e)
        handles = pio.app_handles_from_labels(getattr(flow_run, "labels", None))
    if not handles:
        return []
    state_name = getattr(state, "name", state)
    cancelled: list[str] = []
    with get_runner() as runner:
        for handle in sorted(set(handles.values())):
            logger.info("Flow run %s is %s: cancelling TorchX app %s", flow_run.id, state_name, handle)
            cancel_app(runner, handle, HOOK_CANCEL_TIMEOUT)
            cancelled.append(handle)
    return cancelled
