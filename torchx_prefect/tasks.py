"""Prefect 3 tasks that run TorchX apps: ``run_app`` (async) and its sync twin ``run_app_sync``.

Each task submits the app through the TorchX :class:`~torchx_core.runner.Runner` (or reattaches
to the app an earlier attempt of the same task run submitted), streams replica logs to the
Prefect run logger, publishes artifacts and ends in the Prefect state given by
:mod:`torchx_prefect.states`. When the task is cancelled, times out or crashes, the app is
cancelled; flow-level hooks (:func:`torchx_prefect.hooks.cancel_flow_apps`) are a second line.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from torchx_core.specs import AppDef, AppState, AppStatus, MissingDependencyError, is_terminal

try:
    from prefect import get_run_logger, task
    from prefect.cache_policies import NO_CACHE
    from prefect.states import Cancelled, State
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("prefect", "prefect", "torchx_prefect") from e

from torchx_prefect import _prefect_io as pio
from torchx_prefect._launch import (
    AppResult,
    AppWatch,
    LaunchSpec,
    LogStreamer,
    RunnerLike,
    artifact_key,
    cancel_app,
    deterministic_app_name,
    failed_error,
    find_live_app,
    log_tail,
    rename_app,
    replica_keys,
    status_markdown,
    validate_args,
)
from torchx_prefect.errors import InvalidTaskArgumentError
from torchx_prefect.states import Outcome

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["AppResult", "run_app", "run_app_sync"]

LOG_DRAIN_TIMEOUT = 10.0
"""Seconds the task waits, after the app ended, for the log streams to drain."""


def _new_runner() -> Any:
    from torchx_core.runner import get_runner

    return get_runner()


def _build_app(runner: Any, spec: LaunchSpec, name: str) -> AppDef:
    """The AppDef to submit, renamed to the deterministic name."""
    if spec.app is not None:
        return rename_app(spec.app, name)
    return rename_app(runner.materialize_component(spec.component, spec.component_args), name)


class _Session:
    """One attempt of a launcher task: submit or reattach, watch, report, clean up.

    All methods are synchronous; the async task runs them through ``asyncio.to_thread``.
    """

    def __init__(
        self,
        runner: RunnerLike,
        spec: LaunchSpec,
        identity: pio.TaskIdentity,
        run_logger: logging.Logger | logging.LoggerAdapter[Any],
        store: pio.FlowRunHandleStore,
    ) -> None:
        self.runner = runner
        self.spec = spec
        self.identity = identity
        self.log = run_logger
        self.store = store
        self.app_name = deterministic_app_name(spec.base_name, identity.digest)
        self.app: AppDef | None = None
        self.handle: str | None = None
        self.reattached = False
        self.watch: AppWatch | None = None
        self.terminal = False
        self.streamer: LogStreamer | None = None
        self._link_published = False
        self._submitting = False  # set once runner.run may have created the app
        self._aborted = False  # set by abort(); a late start() then submits nothing
        self._abort_cancels = False  # abort() decided the app is to be cancelled
        self._lock = threading.Lock()
        self._start_done = threading.Event()  # set when start() returned or raised

    # -- start ---------------------------------------------------------------------------
    def start(self) -> str:
        """Reattaches to a live app of an earlier attempt, or submits a new one; returns its handle."""
        try:
            return self._start()
        finally:
            self._start_done.set()

    def _start(self) -> str:
        spec = self.spec
        if spec.reattach:
            persisted = self._safe(lambda: self.store.get(self.identity.label_key), None)
            handle = find_live_app(self.runner, spec.scheduler, self.app_name, persisted)
            if handle is not None:
                self.handle, self.reattached = handle, True
                self.log.info("Reattached to running TorchX app %s (attempt %d)",
                              handle, self.identity.run_count)
        if self.handle is None:
            self.app = _build_app(self.runner, spec, self.app_name)
            with self._lock:
                if self._aborted:  # the task already ended (async: this runs in a thread)
                    raise RuntimeError(f"task ended before {self.app_name} was submitted")
                self._submitting = True
            self.handle = self.runner.run(
                self.app, spec.scheduler, cfg=spec.cfg, workspace=spec.workspace
            )
            self.log.info("Submitted TorchX app %s to %s", self.handle, spec.scheduler)
            with self._lock:
                late = self._aborted and self._abort_cancels
            if late:  # abort() gave up waiting for this submission (async: this runs in a thread)
                self.log.warning("Cancelling TorchX app %s: the task ended while it was being"
                                 " submitted", self.handle)
                cancel_app(self.runner, self.handle, spec.cancel_timeout)
                return self.handle
        elif spec.app is not None:
            self.app = spec.app
        # persist before waiting, so a retry (or a flow hook elsewhere) finds this app
        self._safe(lambda: self.store.put(self.identity.label_key, str(self.handle)), False)
        self.watch = AppWatch(self.handle, spec.unknown_state_timeout)
        if spec.stream_logs:
            self.streamer = LogStreamer(
                self.runner, self.handle, emit=self.log.info, app_done=lambda: self.terminal
            )
        return self.handle

    def _safe(self, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the engine's store is an aid, not a requirement
            logger.warning("Prefect store access failed for %s: %s", self.app_name, e)
            return default

    # -- watch ---------------------------------------------------------------------------
    def poll_once(self) -> Outcome:
        """Reads the status once and returns the outcome (raises after the UNKNOWN grace)."""
        assert self.handle is not None and self.watch is not None  # start() ran
        status = self.runner.status(self.handle)
        outcome = self.watch.observe(status)
        if status is not None and is_terminal(status.state):
            self.terminal = True
        if status is not None and status.ui_url:
            self._publish_link(status.ui_url)  # as soon as the scheduler has a UI URL
        if self.streamer is not None and status is not None and (
            status.state == AppState.RUNNING or self.terminal
        ):
            self.streamer.start(replica_keys(self.app, status))
        return outcome

    # -- finish --------------------------------------------------------------------------
    def finish(self, outcome: Outcome) -> AppResult | State[Any]:
        """Turns a terminal outcome into the task's result, state or error."""
        assert self.handle is not None and self.watch is not None
        status = self.watch.last_status
        assert status is not None  # a terminal outcome comes from a real status
        if self.streamer is not None:
            self.streamer.stop(LOG_DRAIN_TIMEOUT)
        self._publish(status)
        if outcome is Outcome.COMPLETE:
            self.log.info("TorchX app %s SUCCEEDED", self.handle)
            return AppResult(self.handle, status, self.app_name, self.reattached)
        if outcome is Outcome.CANCEL:
            self.log.warning("TorchX app %s was CANCELLED", self.handle)
            return Cancelled(message=f"TorchX app {self.handle} was cancelled: {status.msg}")
        tail = log_tail(self.runner, self.handle, self.app, status, self.spec.log_tail_lines)
        raise failed_error(self.handle, status, tail)

    def _publish_link(self, ui_url: str) -> None:
        if not self.spec.create_artifacts or self._link_published or self.handle is None:
            return
        self._link_published = True
        try:
            pio.publish_link(artifact_key(self.app_name, "ui"), ui_url, f"TorchX app {self.handle}")
        except Exception as e:  # noqa: BLE001 - artifacts must not change the task's outcome
            self.log.warning("Could not publish the UI link of %s: %s", self.handle, e)

    def _publish(self, status: AppStatus) -> None:
        if not self.spec.create_artifacts or self.handle is None:
            return
        if status.ui_url:
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
        ordinary error ends the last attempt. While retries remain, an app that is still
        running is left for the next attempt to reattach to.
        """
        stopping = not isinstance(exc, Exception) or isinstance(exc, TimeoutError)
        leave_for_retry = not stopping and self.spec.reattach and self.identity.retries_left
        with self._lock:
            self._aborted = True
            self._abort_cancels = not leave_for_retry
        if self.streamer is not None:
            self.streamer.stop(0.0)
        if self.terminal:
            return
        if self.handle is None and self._submitting:
            self._find_interrupted_submission()
        if self.handle is None:
            return
        if leave_for_retry:
            self.log.warning(
                "Task attempt %d failed (%r); leaving TorchX app %s running for the retry",
                self.identity.run_count, exc, self.handle,
            )
            return
        self.log.warning("Cancelling TorchX app %s because the task ended: %r", self.handle, exc)
        cancel_app(self.runner, self.handle, self.spec.cancel_timeout)

    def _find_interrupted_submission(self) -> None:
        """The attempt ended while ``runner.run`` was in flight, so the app may exist without a
        known handle: wait (bounded) for a submission still running in a worker thread (async
        task), else look the app up by its deterministic name."""
        self._start_done.wait(self.spec.cancel_timeout)
        if self.handle is None:
            try:
                self.handle = find_live_app(self.runner, self.spec.scheduler, self.app_name, None)
            except Exception as e:  # noqa: BLE001 - best effort; find_live_app already logs
                logger.warning("Could not look up app %s after an interruption: %s", self.app_name, e)


def _retry_condition(task: Any, task_run: Any, state: State[Any]) -> bool:
    """Prefect ``retry_condition_fn``: never retry a task whose arguments are invalid."""
    try:
        state.result(raise_on_failure=True, _sync=True)  # type: ignore[call-overload]  # async_dispatch accepts _sync
    except InvalidTaskArgumentError:
        return False
    except BaseException:  # noqa: BLE001 - any other failure is retryable
        return True
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
    scheduler: str = "local_cwd",
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

    The app gets a deterministic name from the flow-run id and the task call, and its handle is
    stored as a flow-run label (``torchx.app.<id>``) before waiting, so a retried attempt
    reattaches to a still-running app instead of submitting a second copy. The task defaults to
    0 retries (engine retries multiply with ``Role.max_retries``); enable them with
    ``run_app.with_options(retries=2)``.

    Replica logs (at most 16 replicas) are streamed to the Prefect run logger as
    ``[role/replica] line``. Artifacts: a link to the app's UI URL (published as soon as the
    scheduler reports one) and, at the end, a markdown status table per role/replica.

    When the task is cancelled, times out or crashes, the app is cancelled (bounded by
    ``cancel_timeout``). When an ordinary error ends an attempt while the app still runs (e.g.
    the scheduler API failed), the app is left running for the next attempt to reattach to, or
    cancelled if no attempt is left.

    Args:
        app: an AppDef, or a component name such as ``"utils.echo"``
        app_args: the component's arguments (CLI-style list or dict); only with a component name
        scheduler: the TorchX scheduler, e.g. ``"local_cwd"``, ``"kubernetes"``
        cfg: the scheduler's run options
        workspace: a workspace to build into the app, if any
        poll_interval: seconds between status reads
        unknown_state_timeout: seconds the app may be UNKNOWN or unknown to the scheduler before
            the task fails
        stream_logs: stream replica logs to the Prefect run logger
        log_tail_lines: lines of the failed replicas' logs to put into the error
        create_artifacts: publish a markdown status table (and a UI link, when there is one)
        reattach: reattach to the app of an earlier attempt of this task run
        cancel_timeout: seconds to wait for the app's cancellation when the task is stopped

    Returns:
        An :class:`AppResult` when the app SUCCEEDED; a ``Cancelled`` state when it was cancelled.

    Raises:
        AppFailedError: the app FAILED (Prefect task retries apply)
        AppUnknownStateError: the app stayed UNKNOWN for longer than ``unknown_state_timeout``
        AppVanishedError: the scheduler stopped knowing the app
        InvalidTaskArgumentError: the arguments are invalid (never retried)
    """
    spec = validate_args(
        app, app_args, scheduler, cfg, workspace, poll_interval, unknown_state_timeout,
        stream_logs, log_tail_lines, create_artifacts, reattach, cancel_timeout,
    )
    identity = pio.current_identity()
    run_logger = get_run_logger()
    runner = await asyncio.to_thread(_new_runner)
    session = _Session(runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id))
    try:
        await asyncio.to_thread(session.start)
        while True:
            outcome = await asyncio.to_thread(session.poll_once)
            if outcome is not Outcome.WAIT:
                finished: AppResult | State[Any] = await asyncio.to_thread(session.finish, outcome)
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
    scheduler: str = "local_cwd",
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
    spec = validate_args(
        app, app_args, scheduler, cfg, workspace, poll_interval, unknown_state_timeout,
        stream_logs, log_tail_lines, create_artifacts, reattach, cancel_timeout,
    )
    identity = pio.current_identity()
    run_logger = get_run_logger()
    runner = _new_runner()
    session = _Session(runner, spec, identity, run_logger, pio.FlowRunHandleStore(identity.flow_run_id))
    try:
        session.start()
        while True:
            outcome = session.poll_once()
            if outcome is not Outcome.WAIT:
                return session.finish(outcome)  # type: ignore[return-value]  # a Cancelled state is a valid task return
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
