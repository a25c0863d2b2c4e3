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
import copy
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from torchx_core.runner.lifecycle import (
    AppLifecycle,
    Attachment,
    LogFollower,
    Observation,
    app_name,
)
from torchx_core.specs import AppDef, AppStatus
from torchx_core.specs.errors import (
    check_dependency_version,
    is_permanent_error,
    missing_dependency,
)

check_dependency_version("prefect", "prefect", "torchx_prefect")

try:
    from prefect import get_run_logger, task

    try:
        from prefect.cache_policies import NO_CACHE
    except ImportError:  # Prefect 3.0 names the never-cache policy NONE
        from prefect.cache_policies import NONE as NO_CACHE  # type: ignore[attr-defined]
    from prefect.states import Cancelled, State
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "prefect", "prefect", "torchx_prefect", distribution="prefect", cause=e
    ) from e

from torchx_prefect import _prefect_io as pio
from torchx_prefect._launch import (
    AppResult,
    LaunchSpec,
    artifact_key,
    call_digest,
    check_run_options,
    status_markdown,
    validate_args,
)
from torchx_prefect.blocks import TorchXScheduler, resolve_scheduler
from torchx_prefect.states import Outcome, outcome_for

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["AppResult", "run_app", "run_app_sync"]

LOG_DRAIN_TIMEOUT = 10.0
"""Seconds the task waits, after the app ended, for the log streams to drain."""


def _new_runner() -> Any:
    from torchx_core.runner import get_runner

    return get_runner()


class _Session:
    """One attempt of a launcher task over the shared lifecycle: attach, poll, finish, abort.

    All methods are synchronous; the async task runs them through ``asyncio.to_thread``.
    """

    def __init__(
        self,
        runner: Any,
        spec: LaunchSpec,
        identity: pio.TaskIdentity,
        run_logger: logging.Logger | logging.LoggerAdapter[Any],
        store: pio.FlowRunHandleStore,
        kind: str = "task",
    ) -> None:
        self.runner = runner
        self.kind = kind  # what the log messages call the caller: "task" or "job"
        self.spec = spec
        self.identity = identity
        self.log = run_logger
        self.store = store
        self.life = AppLifecycle(
            runner,
            spec.scheduler,
            owner=identity.owner,
            cfg=spec.cfg,
            workspace=spec.workspace,
            unknown_timeout=spec.unknown_state_timeout,
            poll_interval=spec.poll_interval,
            tail_lines=spec.log_tail_lines,
        )
        # reattach=False: a fresh identity, so nothing earlier is found
        self.parts: tuple[object, ...] = (
            identity.parts if spec.reattach else (*identity.parts, uuid.uuid4().hex)
        )
        self.app_name = app_name(spec.base_name, self.parts)
        self.handle: str | None = None
        self.attachment: Attachment | None = None
        self.follower: LogFollower | None = None
        self.terminal = False
        self._link_published = False
        self._submitting = False  # set once attach() may have created the app
        self._aborted = False  # set by abort()
        self._abort_cancels = False  # abort() decided the app is to be cancelled
        self._lock = threading.Lock()
        self._start_done = threading.Event()  # set when start() returned or raised

    # -- start ---------------------------------------------------------------------------
    def start(self) -> str:
        """Reattaches to this call's app (running: reattach; SUCCEEDED: reuse) or submits it."""
        try:
            return self._start()
        finally:
            self._start_done.set()

    def _build_app(self) -> AppDef:
        if self.spec.app is not None:
            # a copy: submitting fills in the roles (e.g. TORCHX_JOB_ID), and the caller's AppDef
            # (the task parameter a retry gets again) must keep the call's digest
            return copy.deepcopy(self.spec.app)
        return self.runner.materialize_component(self.spec.component, self.spec.component_args)

    def _start(self) -> str:
        check_run_options(self.spec.scheduler, self.spec.cfg, self.runner)  # strict, as the CLI's
        app = self._build_app()
        labels, flow_run_count = self._safe(self.store.read, ({}, None))
        known = labels.get(self.identity.label_key) or None
        if flow_run_count:  # the execution number the flow hooks will see
            self.identity = dataclasses.replace(self.identity, flow_run_count=int(flow_run_count))
            self.life.owner = self.identity.owner
        with self._lock:
            if self._aborted:  # the task already ended (async: this runs in a thread)
                raise RuntimeError(f"{self.kind} ended before {self.app_name} was submitted")
            self._submitting = True
        att = self.life.attach(app, self.parts, known_handle=known if self.spec.reattach else None)
        self.attachment, self.handle = att, att.app_handle
        if att.how == "submitted":
            self.log.info("Submitted TorchX app %s to %s", att.app_handle, self.spec.scheduler)
        elif att.how == "reattached":
            self.log.info(
                "Reattached to running TorchX app %s (attempt %d)",
                att.app_handle,
                self.identity.run_count,
            )
        else:
            self.log.info("Reusing TorchX app %s: it already SUCCEEDED", att.app_handle)
        with self._lock:
            late = self._aborted and self._abort_cancels
        if late:  # abort() gave up waiting for this submission (async: this runs in a thread)
            self.log.warning(
                "Cancelling TorchX app %s: the %s ended while it was being submitted",
                att.app_handle,
                self.kind,
            )
            self.life.cancel(att.app_handle, timeout=self.spec.cancel_timeout)
            return att.app_handle
        # persist before waiting, so a retry, a re-run or a flow hook elsewhere finds this app
        self._safe(lambda: self.store.put(self.identity.label_key, att.app_handle), False)
        if self.spec.stream_logs:
            self.follower = self.life.follow_logs(
                att.app_handle, self.log.info, skip_existing=att.how != "submitted"
            )
        return att.app_handle

    def _safe(self, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the engine's store is an aid, not a requirement
            logger.warning("Prefect store access failed for %s: %s", self.app_name, e)
            return default

    # -- watch ---------------------------------------------------------------------------
    def poll_once(self) -> Observation:
        """Reads the status once (the lifecycle applies the grace clock)."""
        if self.handle is None:
            raise RuntimeError("start() has not attached an app")
        obs = self.life.poll(self.handle)
        if obs.status is not None and obs.status.is_terminal():
            self.terminal = True
        self._publish_link(obs.status.ui_url if obs.status is not None else None)  # once known
        return obs

    # -- finish --------------------------------------------------------------------------
    def finish(self, obs: Observation) -> AppResult | State[Any]:
        """Turns a final observation into the task's result, a Cancelled state, or the error."""
        if self.handle is None:
            raise RuntimeError("start() has not attached an app")
        if self.follower is not None:
            self.follower.stop(LOG_DRAIN_TIMEOUT)
        self._publish(obs.status)
        outcome = outcome_for(obs)
        if outcome is Outcome.COMPLETE:
            status = self.life.result(self.handle, obs)
            self.log.info("TorchX app %s SUCCEEDED", self.handle)
            self._publish_tracker_results()
            reattached = self.attachment is not None and self.attachment.how != "submitted"
            return AppResult(self.handle, status, self.app_name, reattached)
        if outcome is Outcome.CANCEL:
            msg = obs.status.msg if obs.status is not None else ""
            self.log.warning("TorchX app %s was CANCELLED", self.handle)
            return Cancelled(message=f"TorchX app {self.handle} was cancelled: {msg}")
        self.terminal = True
        self.life.result(self.handle, obs)  # raises AppFailedError / AppVanishedError
        raise AssertionError(f"no failure raised for {obs}")  # unreachable: result() raised

    def _publish_tracker_results(self) -> None:
        """What the app recorded through its tracker (``torchx_core.tracker``): a table artifact
        on the task run and a log line (nothing without a configured tracker)."""
        if self.handle is None:
            return
        from torchx_core.runner import tracker_results

        results = tracker_results(self.handle)
        if results is None:
            return
        self.log.info(
            "tracker results of %s (%s): %s", self.handle, results.tracker, dict(results.metadata)
        )
        if not self.spec.create_artifacts:
            return
        rows = [
            {"kind": kind, "name": name, "value": value} for kind, name, value in results.rows()
        ]
        try:
            pio.publish_table(
                artifact_key(self.app_name, "tracker"),
                rows,
                f"Tracker results of TorchX app {self.handle} ({results.tracker})",
            )
        except Exception as e:  # noqa: BLE001 - artifacts must not change the task's outcome
            self.log.warning("Could not publish the tracker results of %s: %s", self.handle, e)

    def _publish_link(self, ui_url: str | None) -> None:
        """The app's link artifact (once): its page on the dashboard when one is configured
        (the block's ``dashboard_url`` / ``$TORCHX_DASHBOARD_URL``), else the scheduler's UI."""
        if not self.spec.create_artifacts or self._link_published or self.handle is None:
            return
        from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_app_url

        try:
            url = dashboard_app_url(self.handle) or ui_url
        except InvalidDashboardUrlError as e:
            self.log.warning("%s; linking to the scheduler's UI instead", e)
            url = ui_url
        if not url:
            return
        self._link_published = True
        try:
            pio.publish_link(artifact_key(self.app_name, "ui"), url, f"TorchX app {self.handle}")
        except Exception as e:  # noqa: BLE001 - artifacts must not change the task's outcome
            self.log.warning("Could not publish the UI link of %s: %s", self.handle, e)

    def _publish(self, status: AppStatus | None) -> None:
        if not self.spec.create_artifacts or self.handle is None or status is None:
            return
        self._publish_link(status.ui_url)
        try:
            pio.publish_status(
                artifact_key(self.app_name, "status"),
                status_markdown(self.handle, status),
                f"Status of TorchX app {self.handle}",
            )
        except Exception as e:  # noqa: BLE001 - artifacts must not change the task's outcome
            self.log.warning("Could not publish artifacts for %s: %s", self.handle, e)

    # -- abort ---------------------------------------------------------------------------
    def abort(self, exc: BaseException) -> None:
        """Called when the attempt ends by an exception: cancel the app unless a retry reattaches.

        The app is cancelled when the task is cancelled, times out or crashes (any
        ``BaseException`` that is not an ``Exception``, or a ``TimeoutError``), and when an
        ordinary error ends the last attempt; while retries remain, an app that still runs is
        left for the next attempt to reattach to. Only an app this attempt still owns is
        cancelled (a newer attempt that adopted it is not undercut).
        """
        stopping = not isinstance(exc, Exception) or isinstance(exc, TimeoutError)
        leave_for_retry = (
            not stopping
            and self.spec.reattach
            and self.identity.retries_left
            and not is_permanent_error(exc)
        )  # no retry follows a permanent error
        with self._lock:
            self._aborted = True
            self._abort_cancels = not leave_for_retry
        if self.follower is not None:
            self.follower.stop(0.0)
        if self.terminal:
            return
        if self.handle is None and self._submitting:
            # attach() may still run in a worker thread (async task): wait for it, bounded
            self._start_done.wait(self.spec.cancel_timeout)
        if self.handle is None:
            if self._submitting and leave_for_retry:
                self.log.warning(
                    "%s attempt %d failed while submitting (%r); leaving any"
                    " TorchX app named %s for the retry",
                    self.kind.capitalize(),
                    self.identity.run_count,
                    exc,
                    self.app_name,
                )
            elif self._submitting:
                self.log.warning(
                    "Cancelling TorchX apps named %s: the %s %s while submitting: %r",
                    self.app_name,
                    self.kind,
                    _ended(exc),
                    exc,
                )
                self.life.cancel_by_name(self.app_name, timeout=self.spec.cancel_timeout)
            return
        if leave_for_retry:
            self.log.warning(
                "%s attempt %d failed (%r); leaving TorchX app %s running for the retry",
                self.kind.capitalize(),
                self.identity.run_count,
                exc,
                self.handle,
            )
            return
        self.log.warning(
            "Cancelling TorchX app %s because the %s %s: %r",
            self.handle,
            self.kind,
            _ended(exc),
            exc,
        )
        self.life.cancel(self.handle, timeout=self.spec.cancel_timeout)


def _ended(exc: BaseException) -> str:
    """How an attempt ended, for the log: ``timed out``, ``was stopped`` or ``failed``."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    return "failed" if isinstance(exc, Exception) else "was stopped"


def _retry_condition(task: Any, task_run: Any, state: State[Any]) -> bool:
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


def _sleep(seconds: float) -> None:
    """Sleeps in short slices so Prefect's timeout/termination exceptions land promptly."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.25))


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
    instead of submitting a second copy, while two calls in one flow get two apps. After a
    reattach, log lines the app wrote before are not logged again. The task defaults to 0
    retries (engine retries multiply with ``Role.max_retries``); enable them with
    ``run_app.with_options(retries=2)``.

    Replica logs (at most 16 replicas) are streamed to the Prefect run logger as
    ``[role/replica] line``. Artifacts: a link to the app's UI URL (published as soon as the
    scheduler reports one) and, at the end, a markdown status table per role/replica.

    When the task is cancelled, times out or crashes, the app is cancelled (bounded by
    ``cancel_timeout``) if this attempt still owns it (its owner token is recorded with the app). When an ordinary error ends an attempt while the app still runs (e.g.
    the scheduler API failed), the app is left running for the next attempt to reattach to, or
    cancelled if no attempt is left.

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
        return await _run_async(spec, identity, run_logger)  # type: ignore[no-any-return]


async def _run_async(spec: LaunchSpec, identity: pio.TaskIdentity, run_logger: Any) -> Any:
    runner = await asyncio.to_thread(_new_runner)
    session = _Session(
        runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id)
    )
    try:
        await asyncio.to_thread(session.start)
        while True:
            obs = await asyncio.to_thread(session.poll_once)
            if outcome_for(obs) is not Outcome.WAIT:
                finished: AppResult | State[Any] = await asyncio.to_thread(session.finish, obs)
                return finished  # type: ignore[return-value]  # a Cancelled state is a valid task return
            await asyncio.sleep(spec.poll_interval)
    except BaseException as exc:
        # synchronous on purpose: inside a cancelled scope every further await is cancelled too
        session.abort(exc)
        raise
    finally:
        _close_runner(runner)


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
        return _run_sync(spec, identity, run_logger)  # type: ignore[no-any-return]


def _run_sync(spec: LaunchSpec, identity: pio.TaskIdentity, run_logger: Any) -> Any:
    runner = _new_runner()
    session = _Session(
        runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id)
    )
    try:
        session.start()
        while True:
            obs = session.poll_once()
            if outcome_for(obs) is not Outcome.WAIT:
                return session.finish(obs)  # type: ignore[return-value]  # a Cancelled state is a valid task return
            _sleep(spec.poll_interval)
    except BaseException as exc:
        session.abort(exc)
        raise
    finally:
        _close_runner(runner)


def _close_runner(runner: Any) -> None:
    close = getattr(runner, "close", None)
    if callable(close):
        try:
            close()
        except Exception as e:  # noqa: BLE001 - closing must not mask the task's outcome
            logger.debug("closing the runner failed: %s", e)
