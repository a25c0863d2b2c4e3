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
from typing import TYPE_CHECKING, Any

from torchx_core.specs import parse_app_handle
from torchx_prefect import _prefect_io as pio

if TYPE_CHECKING:
    from prefect import Flow
    from prefect.client.schemas.objects import FlowRun, State

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["cancel_flow_apps"]

HOOK_CANCEL_TIMEOUT = 30.0
"""Seconds allowed for each app's cancellation in a hook."""


def cancel_flow_apps(flow: Flow[..., Any], flow_run: FlowRun, state: State[Any]) -> list[str]:
    """Cancels every TorchX app recorded on ``flow_run`` that this flow-run execution still
    owns; use as ``on_cancellation``, ``on_crashed`` (or ``on_failure``) hook of a ``@flow``.

    An app is cancelled when its recorded owner is a task attempt of this execution of the flow
    run (or when its scheduler records no owner). An app a later execution adopted (a re-run
    reattached to it) is left alone. Apps that already ended are swept (cancel is
    idempotent). Errors are logged, never raised, so one unreachable scheduler does not stop
    the others from being cancelled.

    Args:
        flow: the Prefect flow (unused; part of the hook signature)
        flow_run: the flow run whose apps to cancel
        state: the state that triggered the hook (used in the log message)

    Returns:
        The handles that were asked to cancel.
    """
    from torchx_core.runner import get_runner
    from torchx_core.runner.lifecycle import AppLifecycle

    store = pio.FlowRunHandleStore(flow_run.id)
    try:
        handles = store.handles()
    except Exception as e:  # noqa: BLE001 - fall back to the labels the hook was given
        logger.warning("Could not read flow run %s labels: %s", flow_run.id, e)
        handles = pio.app_handles_from_labels(getattr(flow_run, "labels", None))
    if not handles:
        return []
    state_name = getattr(state, "name", state)
    run_count = max(int(getattr(flow_run, "run_count", 0) or 0), 1)
    mine = pio.flow_run_owner_prefix(flow_run.id, run_count)
    cancelled: list[str] = []
    with get_runner() as runner:
        for handle in sorted(set(handles.values())):
            try:
                scheduler = parse_app_handle(handle).scheduler_backend
                owner = runner.owner(handle)
            except Exception as e:  # noqa: BLE001 - unreadable owner: cancel, as unsupported
                logger.warning("Could not read the owner of %s: %s", handle, e)
                scheduler, owner = handle.split(":", 1)[0], None
            if owner is not None and not owner.startswith(mine):
                logger.warning(
                    "Flow run %s is %s: not cancelling TorchX app %s, superseded by %s",
                    flow_run.id,
                    state_name,
                    handle,
                    owner,
                )
                continue
            logger.info(
                "Flow run %s is %s: cancelling TorchX app %s", flow_run.id, state_name, handle
            )
            life = AppLifecycle(runner, scheduler, owner=mine + "hook")
            life.cancel(handle, timeout=HOOK_CANCEL_TIMEOUT, only_if_owned=False)
            cancelled.append(handle)
    return cancelled
