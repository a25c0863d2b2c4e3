"""Prefect 3 tasks that run TorchX apps: ``run_app`` (async) and its sync twin ``run_app_sync``.

Each task call is one app's life in :class:`torchx_core.runner.lifecycle.AppLifecycle`: submit,
or reattach to the app an earlier attempt or an earlier execution of the same flow run started
(identity: :class:`torchx_prefect._prefect_io.TaskIdentity`), stream replica logs to the Prefect
run logger, publish artifacts and end in the Prefect state given by :mod:`torchx_prefect.states`.
When the task is cancelled, times out or crashes, the app is cancelled if this attempt still owns
it; flow-level hooks (:func:`torchx_prefect.hooks.cancel_flow_apps`) are a second line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torchx_core.specs import AppDef
from torchx_core.specs.errors import (
    check_dependency_version,
    is_permanent_error,
    missing_dependency,
)
from torchx_prefect import _prefect_io as pio
from torchx_prefect import _session
from torchx_prefect._launch import AppResult, LaunchSpec, call_digest, validate_args
from torchx_prefect._session import Session, awatch, watch
from torchx_prefect.blocks import TorchXScheduler, resolve_scheduler

check_dependency_version("prefect", "prefect", "torchx_prefect")

try:
    from prefect import get_run_logger, task

    try:
        from prefect.cache_policies import NO_CACHE
    except ImportError:  # Prefect 3.0 names the never-cache policy NONE
        from prefect.cache_policies import NONE as NO_CACHE
    from prefect.client.schemas.objects import State, TaskRun
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "prefect", "prefect", "torchx_prefect", distribution="prefect", cause=e
    ) from e


if TYPE_CHECKING:
    from prefect import Task

    from torchx_prefect._session import RunLogger

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["AppResult", "run_app", "run_app_sync"]


def _retry_condition(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect ``retry_condition_fn``: never retry an error a retry cannot fix.

    Permanent errors (:func:`torchx_core.specs.errors.is_permanent_error`: invalid task
    arguments, an unknown component or scheduler, wrong component arguments or run options, an
    invalid AppDef) fail the task on its first attempt; anything else (a failed app, a scheduler
    briefly unreachable) is retried while retries remain.
    """
    try:
        state.result(raise_on_failure=True, _sync=True)  # type: ignore[call-overload]  # async_dispatch accepts _sync
    except BaseException as exc:  # noqa: BLE001 - classified below
        return not is_permanent_error(exc)
    return True


_TASK_OPTIONS: dict[str, Any] = {
    "retries": 0,
    "cache_policy": NO_CACHE,
    "retry_condition_fn": _retry_condition,
}


@task(name="torchx-run-app", **_TASK_OPTIONS)
async def run_app(
    app: AppDef | str,
    app_args: list[str] | Mapping[str, Any] | None = None,
    scheduler: str | TorchXScheduler = "local_cwd",
    cfg: Mapping[str, Any] | None = None,
    workspace: str | None = None,
    poll_interval: float = 5.0,
    unknown_state_timeout: float = 120.0,
    stream_logs: bool = True,
    log_tail_lines: int = 50,
    create_artifacts: bool = True,
    reattach: bool = True,
    cancel_timeout: float = 30.0,
) -> AppResult:
    """Runs a TorchX app to completion as a Prefect task (async).

    The app gets a deterministic name from the flow-run id, the task's name, a digest of the
    call's parameters and its occurrence among identical calls of the flow run (see
    :class:`torchx_prefect._prefect_io.TaskIdentity`), and its handle is stored as a flow-run
    label (``torchx.app.<digest>``) before waiting. So a retried attempt, and a re-run of the
    flow run after a crash, reattach to the still-running app (or reuse a SUCCEEDED one)
    instead of submitting a second copy, while two calls in one flow get two apps. An attempt
    streams the app's log from its start, after a reattach or for a reused app too, so each
    attempt's log holds every line of the app once. The task defaults to 0
    retries (engine retries multiply with ``Role.max_retries``); enable them with
    ``run_app.with_options(retries=2)``.

    Replica logs (at most 16 replicas) are streamed to the Prefect run logger as
    ``[role/replica] line``. Artifacts: a link to the app's UI URL (published as soon as the
    scheduler reports one) and, at the end, a markdown status table per role/replica.

    When the task is cancelled, times out or crashes, the app is cancelled (bounded by
    ``cancel_timeout``) if this attempt still owns it (its owner token is recorded with the
    app). When an ordinary error ends an attempt while the app still runs (e.g. the scheduler
    API failed), the app is left running for the next attempt to reattach to, or cancelled if
    no attempt is left.

    Args:
        app: an AppDef, or a component name such as ``"utils.echo"``
        app_args: the component's arguments (CLI-style list or dict); only with a component name
        scheduler: the TorchX scheduler, e.g. ``"local_cwd"``, ``"kubernetes"``; or a
            :class:`~torchx_prefect.TorchXScheduler` block, or the name of a saved one
            (``"gpu-cluster"`` or ``"torchx-scheduler/gpu-cluster"``), whose cfg and
            environment then apply
        cfg: the scheduler's run options (over the block's, key by key)
        workspace: a workspace to build into the app, if any
        poll_interval: seconds between status reads
        unknown_state_timeout: seconds the app may be UNKNOWN or unknown to the scheduler before
            the task fails
        stream_logs: stream replica logs to the Prefect run logger
        log_tail_lines: lines per replica (every replica, failed ones first) in the error
        create_artifacts: publish a markdown status table (and a UI link, when there is one)
        reattach: reattach to the app of an earlier attempt or execution of this call
        cancel_timeout: seconds to wait for the app's cancellation when the task is stopped

    Returns:
        An :class:`AppResult` when the app SUCCEEDED; a ``Cancelled`` state when it was cancelled.

    Raises:
        AppFailedError: the app FAILED (Prefect task retries apply)
        AppVanishedError: the app stayed UNKNOWN, unreadable or unknown to the scheduler for
            longer than ``unknown_state_timeout``
        InvalidTaskArgumentError: the arguments are invalid (never retried)
        TorchXError: a permanent error (unknown component or scheduler, wrong component
            arguments or run options, invalid AppDef): never retried, see
            :func:`torchx_core.specs.errors.is_permanent_error`
    """
    block = await asyncio.to_thread(resolve_scheduler, scheduler)
    spec = validate_args(
        app,
        app_args,
        scheduler=block.scheduler if block else scheduler,  # type: ignore[arg-type]
        cfg=block.merged_cfg(cfg) if block else cfg,
        workspace=workspace,
        poll_interval=poll_interval,
        unknown_state_timeout=unknown_state_timeout,
        stream_logs=stream_logs,
        log_tail_lines=log_tail_lines,
        create_artifacts=create_artifacts,
        reattach=reattach,
        cancel_timeout=cancel_timeout,
    )
    identity = pio.current_identity(call_digest(spec))
    run_logger = get_run_logger()
    with block.applied() if block else contextlib.nullcontext():
        return await _run_async(spec, identity, run_logger)  # type: ignore[return-value]  # a Cancelled state is a valid task return


async def _run_async(
    spec: LaunchSpec, identity: pio.TaskIdentity, run_logger: RunLogger
) -> AppResult | State[Any]:
    runner = await asyncio.to_thread(_session.new_runner)
    session = Session(
        runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id)
    )
    try:
        with session.aborting_on_error():
            await asyncio.to_thread(session.start)
            obs = await awatch(session)
            return await asyncio.to_thread(session.end_task, obs)
    finally:
        _session.close_runner(runner)


@task(name="torchx-run-app-sync", **_TASK_OPTIONS)
def run_app_sync(
    app: AppDef | str,
    app_args: list[str] | Mapping[str, Any] | None = None,
    scheduler: str | TorchXScheduler = "local_cwd",
    cfg: Mapping[str, Any] | None = None,
    workspace: str | None = None,
    poll_interval: float = 5.0,
    unknown_state_timeout: float = 120.0,
    stream_logs: bool = True,
    log_tail_lines: int = 50,
    create_artifacts: bool = True,
    reattach: bool = True,
    cancel_timeout: float = 30.0,
) -> AppResult:
    """Runs a TorchX app to completion as a Prefect task (sync twin of :func:`run_app`).

    Same arguments, result and errors as :func:`run_app`. Status reads happen between short
    sleeps, so a task timeout or a termination signal interrupts the wait promptly and the app
    is cancelled.
    """
    block = resolve_scheduler(scheduler)
    spec = validate_args(
        app,
        app_args,
        scheduler=block.scheduler if block else scheduler,  # type: ignore[arg-type]
        cfg=block.merged_cfg(cfg) if block else cfg,
        workspace=workspace,
        poll_interval=poll_interval,
        unknown_state_timeout=unknown_state_timeout,
        stream_logs=stream_logs,
        log_tail_lines=log_tail_lines,
        create_artifacts=create_artifacts,
        reattach=reattach,
        cancel_timeout=cancel_timeout,
    )
    identity = pio.current_identity(call_digest(spec))
    run_logger = get_run_logger()
    with block.applied() if block else contextlib.nullcontext():
        return _run_sync(spec, identity, run_logger)  # type: ignore[return-value]  # a Cancelled state is a valid task return


def _run_sync(
    spec: LaunchSpec, identity: pio.TaskIdentity, run_logger: RunLogger
) -> AppResult | State[Any]:
    runner = _session.new_runner()
    session = Session(
        runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id)
    )
    try:
        with session.aborting_on_error():
            session.start()
            return session.end_task(watch(session))
    finally:
        _session.close_runner(runner)
