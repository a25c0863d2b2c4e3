"""One attempt of a launcher over the shared app lifecycle: attach, watch, finish, abort.

A launcher is a task call (:mod:`torchx_prefect.tasks`) or a run of a
:class:`~torchx_prefect.TorchXJob` (:mod:`torchx_prefect.blocks`); both drive one
:class:`Session` per attempt, and import it from here (neither imports the other's internals).

* Where the attempt is: one :class:`SessionState` (``NEW`` -> ``SUBMITTING`` -> ``WATCHING`` ->
  ``ENDED``; ``INTERRUPTED`` when the submission raised).
* What a stopped attempt does to its app: the pure :func:`leaves_for_retry` and
  :func:`abort_action` (the table :data:`ABORT_ACTIONS`).
* The one poll loop: :func:`watch` (sync, sleeping in short slices) and :func:`awatch` (async,
  each status read in a worker thread), both ending at the first observation :func:`is_final`
  accepts.

Session methods are synchronous; async callers run them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from torchx_core.runner import Runner, get_runner
from torchx_core.runner.lifecycle import AppLifecycle, Attachment, LogFollower, Observation
from torchx_core.runner.lifecycle import app_name as lifecycle_app_name
from torchx_core.specs import AppDef, AppStatus
from torchx_core.specs.errors import (
    check_dependency_version,
    is_permanent_error,
    missing_dependency,
)
from torchx_prefect import _prefect_io as pio
from torchx_prefect._launch import (
    AppResult,
    LaunchSpec,
    artifact_key,
    check_run_options,
    status_markdown,
)
from torchx_prefect.states import Outcome, outcome_for

check_dependency_version("prefect", "prefect", "torchx_prefect")

try:
    from prefect.client.schemas.objects import State
    from prefect.states import Cancelled
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "prefect", "prefect", "torchx_prefect", distribution="prefect", cause=e
    ) from e


if TYPE_CHECKING:
    from typing import TypeAlias

    from prefect.logging.loggers import LoggingAdapter

    RunLogger: TypeAlias = logging.Logger | LoggingAdapter
    """What Prefect's ``get_run_logger()`` and a block's ``logger`` return."""

logger: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "ABORT_ACTIONS",
    "LOG_DRAIN_TIMEOUT",
    "AbortAction",
    "HandleStore",
    "Session",
    "SessionState",
    "abort_action",
    "awatch",
    "close_runner",
    "is_final",
    "leaves_for_retry",
    "new_runner",
    "watch",
]

LOG_DRAIN_TIMEOUT = 10.0
"""Seconds an attempt waits, after the app ended, for the log streams to drain."""

_T = TypeVar("_T")


class SessionState(enum.Enum):
    """Where one attempt is in the life of its app."""

    NEW = "new"
    """Nothing submitted (the arguments are being checked, or the attempt ended before)."""
    SUBMITTING = "submitting"
    """``attach`` runs: the app may exist already, its handle is not known yet."""
    INTERRUPTED = "interrupted"
    """``attach`` raised: the app may exist under its name, its handle is not known."""
    WATCHING = "watching"
    """Attached: the handle is known and the app has not been seen to end."""
    ENDED = "ended"
    """The app ended, or was cancelled by the attempt or the lifecycle: nothing left to stop."""


class AbortAction(enum.Enum):
    """What :meth:`Session.abort` does to the app of an attempt that ended by an exception."""

    NOTHING = "nothing"
    """Nothing was submitted, or the app already ended."""
    LEAVE = "leave"
    """A retry follows and will reattach: the app is left running."""
    LEAVE_BY_NAME = "leave-by-name"
    """As ``LEAVE``, while the handle is unknown (the submission did not return)."""
    CANCEL = "cancel"
    """No retry will watch the app: it is cancelled (if this attempt still owns it)."""
    CANCEL_BY_NAME = "cancel-by-name"
    """As ``CANCEL``, by the app's name (the submission did not return a handle)."""


ABORT_ACTIONS: Mapping[tuple[SessionState, bool], AbortAction] = MappingProxyType(
    {
        (SessionState.NEW, False): AbortAction.NOTHING,
        (SessionState.NEW, True): AbortAction.NOTHING,
        (SessionState.SUBMITTING, False): AbortAction.CANCEL_BY_NAME,
        (SessionState.SUBMITTING, True): AbortAction.LEAVE_BY_NAME,
        (SessionState.INTERRUPTED, False): AbortAction.CANCEL_BY_NAME,
        (SessionState.INTERRUPTED, True): AbortAction.LEAVE_BY_NAME,
        (SessionState.WATCHING, False): AbortAction.CANCEL,
        (SessionState.WATCHING, True): AbortAction.LEAVE,
        (SessionState.ENDED, False): AbortAction.NOTHING,
        (SessionState.ENDED, True): AbortAction.NOTHING,
    }
)
"""(state, a retry follows) -> :class:`AbortAction`; covers every pair (checked by a test)."""


def leaves_for_retry(exc: BaseException, *, reattach: bool, retries_left: bool) -> bool:
    """True if the app is to be left for the next attempt when ``exc`` ends this one.

    A stop (any ``BaseException`` that is not an ``Exception``: cancellation, termination) or a
    timeout always cancels; an ordinary error leaves the app only when a retry follows
    (``retries_left``), the retry reattaches (``reattach``) and the error is not permanent
    (:func:`torchx_core.specs.errors.is_permanent_error`: no retry follows it).

    >>> leaves_for_retry(ConnectionError("blip"), reattach=True, retries_left=True)
    True
    >>> leaves_for_retry(TimeoutError(), reattach=True, retries_left=True)
    False
    """
    if not isinstance(exc, Exception) or isinstance(exc, TimeoutError):
        return False
    return reattach and retries_left and not is_permanent_error(exc)


def abort_action(state: SessionState, leave_for_retry: bool) -> AbortAction:
    """What an aborted attempt in ``state`` does to its app (:data:`ABORT_ACTIONS`).

    >>> abort_action(SessionState.WATCHING, leave_for_retry=False).value
    'cancel'
    """
    return ABORT_ACTIONS[state, leave_for_retry]


def is_final(obs: Observation) -> bool:
    """True once an observation ends the watch (the app ended, or stayed unknown too long)."""
    return outcome_for(obs) is not Outcome.WAIT


class HandleStore(Protocol):
    """Where an attempt persists its app handle (``_prefect_io.FlowRunHandleStore``)."""

    def read(self) -> tuple[dict[str, Any], int | None]:
        """The stored labels and the flow run's ``run_count``."""
        ...

    def put(self, key: str, handle: str) -> bool:
        """Stores ``handle`` under ``key``; True if it was read back."""
        ...


def new_runner() -> Runner:
    """The Runner of one attempt (closed with :func:`close_runner`)."""
    return get_runner()


def close_runner(runner: Runner) -> None:
    """Closes ``runner``; a failure is logged, never raised (it must not mask the outcome)."""
    close = getattr(runner, "close", None)
    if callable(close):
        try:
            close()
        except Exception as e:  # noqa: BLE001 - closing must not mask the attempt's outcome
            logger.debug("closing the runner failed: %s", e)


class Session:
    """One attempt of a launcher over the shared lifecycle: attach, poll, finish, abort.

    Args:
        runner: the attempt's Runner
        spec: the validated arguments
        identity: who launches (the app's name and owner token come from it)
        run_logger: the Prefect run logger (replica lines and the attempt's messages)
        store: where the app handle is persisted for retries, re-runs and flow hooks
        kind: what the messages call the caller; a ``"job"`` has no Cancelled state to end
            in, so :meth:`finish` raises ``AppCancelledError`` for a cancelled app
    """

    def __init__(
        self,
        runner: Runner,
        spec: LaunchSpec,
        identity: pio.TaskIdentity,
        run_logger: RunLogger,
        store: HandleStore,
        kind: Literal["task", "job"] = "task",
    ) -> None:
        self.runner = runner
        self.kind = kind
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
        self.app_name = lifecycle_app_name(spec.base_name, self.parts)
        self.handle: str | None = None
        self.attachment: Attachment | None = None
        self.follower: LogFollower | None = None
        self._artifacts = _Artifacts(spec.create_artifacts, self.app_name, run_logger)
        self._state = SessionState.NEW
        self._leave_for_retry: bool | None = None  # abort()'s verdict; None: not aborted
        self._changed = threading.Condition()  # guards both; notified on every state change

    @property
    def state(self) -> SessionState:
        """Where the attempt is."""
        return self._state

    def _set(self, state: SessionState) -> None:
        with self._changed:
            self._state = state
            self._changed.notify_all()

    def _attached(self) -> str:
        if self.handle is None:
            raise RuntimeError("start() has not attached an app")
        return self.handle

    # -- start ---------------------------------------------------------------------------
    def _build_app(self) -> AppDef:
        if self.spec.app is not None:
            # a copy: submitting fills in the roles (e.g. TORCHX_JOB_ID), and the caller's AppDef
            # (the task parameter a retry gets again) must keep the call's digest
            return copy.deepcopy(self.spec.app)
        assert self.spec.component is not None  # invariant of LaunchSpec, not user input
        return self.runner.materialize_component(self.spec.component, self.spec.component_args)

    def start(self) -> str:
        """Reattaches to this call's app (running: reattach; SUCCEEDED: reuse) or submits it;
        then persists its handle and follows its logs from the start."""
        check_run_options(self.spec.scheduler, self.spec.cfg, self.runner)  # strict, as the CLI's
        app = self._build_app()
        unread: tuple[dict[str, Any], int | None] = ({}, None)
        labels, flow_run_count = _safe(self.store.read, unread, self.app_name)
        known = labels.get(self.identity.label_key) or None
        if flow_run_count:  # the execution number the flow hooks will see
            self.identity = dataclasses.replace(self.identity, flow_run_count=int(flow_run_count))
            self.life.owner = self.identity.owner
        with self._changed:
            if self._leave_for_retry is not None:  # the attempt ended (async: this is a thread)
                raise RuntimeError(f"{self.kind} ended before {self.app_name} was submitted")
            self._state = SessionState.SUBMITTING
        try:
            att = self.life.attach(
                app, self.parts, known_handle=known if self.spec.reattach else None
            )
        except BaseException:
            self._set(SessionState.INTERRUPTED)
            raise
        with self._changed:
            self.attachment, self.handle = att, att.app_handle
            verdict = self._leave_for_retry
            self._state = SessionState.ENDED if verdict is False else SessionState.WATCHING
            self._changed.notify_all()
        self._log_attachment(att)
        if verdict is False:  # abort() gave up waiting for this submission (async: a thread)
            self.log.warning(
                "Cancelling TorchX app %s: the %s ended while it was being submitted",
                att.app_handle,
                self.kind,
            )
            self.life.cancel(att.app_handle, timeout=self.spec.cancel_timeout)
            return att.app_handle
        # persist before waiting, so a retry, a re-run or a flow hook elsewhere finds this app
        _safe(lambda: self.store.put(self.identity.label_key, att.app_handle), False, self.app_name)
        if self.spec.stream_logs and verdict is None:
            # from the start, also after a reattach or for a reused app: this attempt's log
            # gets every line of the app once (one follower per attempt)
            follower = self.life.follow_logs(att.app_handle, self.log.info)
            with self._changed:
                self.follower = follower
                aborted = self._leave_for_retry is not None
            if aborted:  # abort() ran meanwhile (async: this is a thread) and did not see it
                follower.stop(0.0)
        return att.app_handle

    def _log_attachment(self, att: Attachment) -> None:
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

    # -- watch ---------------------------------------------------------------------------
    def poll_once(self) -> Observation:
        """Reads the status once (the lifecycle applies the grace clock)."""
        handle = self._attached()
        obs = self.life.poll(handle)
        if obs.status is not None and obs.status.is_terminal():
            self._set(SessionState.ENDED)
        self._artifacts.link(handle, obs.status.ui_url if obs.status is not None else None)
        return obs

    # -- finish --------------------------------------------------------------------------
    def _wrap_up(self, obs: Observation) -> str:
        """Drains the logs and publishes the final status; returns the handle."""
        handle = self._attached()
        if self.follower is not None:
            self.follower.stop(LOG_DRAIN_TIMEOUT)
        self._artifacts.status(handle, obs.status)
        return handle

    def finish(self, obs: Observation) -> AppResult:
        """The result of a final observation of a SUCCEEDED app; any other raises.

        Raises:
            AppFailedError, AppVanishedError: the app failed or stayed unknown too long
            AppCancelledError: the app was cancelled (a task calls :meth:`end_task` instead)
        """
        handle = self._wrap_up(obs)
        if outcome_for(obs) is Outcome.COMPLETE:
            status = self.life.result(handle, obs)
            self.log.info("TorchX app %s SUCCEEDED", handle)
            self._artifacts.tracker(handle)
            reattached = self.attachment is not None and self.attachment.how != "submitted"
            return AppResult(handle, status, self.app_name, reattached)
        self._set(SessionState.ENDED)
        self.life.result(handle, obs)  # raises AppFailedError / AppCancelledError / ...Vanished
        raise AssertionError(f"no failure raised for {obs}")  # unreachable: result() raised

    def end_task(self, obs: Observation) -> AppResult | State[Any]:
        """A task's end: :meth:`finish`, except that a cancelled app gives a Cancelled state."""
        if outcome_for(obs) is not Outcome.CANCEL:
            return self.finish(obs)
        handle = self._wrap_up(obs)
        msg = obs.status.msg if obs.status is not None else ""
        self.log.warning("TorchX app %s was CANCELLED", handle)
        return Cancelled(message=f"TorchX app {handle} was cancelled: {msg}")

    # -- abort ---------------------------------------------------------------------------
    def abort(self, exc: BaseException) -> None:
        """Called when the attempt ends by an exception: cancel the app unless a retry reattaches.

        The app is cancelled when the attempt is cancelled, times out or crashes (any
        ``BaseException`` that is not an ``Exception``, or a ``TimeoutError``), and when an
        ordinary error ends the last attempt; while retries remain, an app that still runs is
        left for the next attempt to reattach to (:func:`leaves_for_retry`,
        :func:`abort_action`). Only an app this attempt still owns is cancelled (a newer
        attempt that adopted it is not undercut). A submission still running in another
        thread is waited for, at most ``cancel_timeout`` seconds.
        """
        leave = leaves_for_retry(
            exc, reattach=self.spec.reattach, retries_left=self.identity.retries_left
        )
        with self._changed:
            self._leave_for_retry = leave
            follower = self.follower
        if follower is not None:
            follower.stop(0.0)
        with self._changed:
            # attach() may still run in a worker thread (async task): wait for it, bounded
            self._changed.wait_for(
                lambda: self._state is not SessionState.SUBMITTING, self.spec.cancel_timeout
            )
            action = abort_action(self._state, leave)
        self._act(action, exc)

    def _act(self, action: AbortAction, exc: BaseException) -> None:
        kind, attempt = self.kind, self.identity.run_count
        if action is AbortAction.LEAVE_BY_NAME:
            self.log.warning(
                "%s attempt %d failed while submitting (%r); leaving any"
                " TorchX app named %s for the retry",
                kind.capitalize(),
                attempt,
                exc,
                self.app_name,
            )
        elif action is AbortAction.CANCEL_BY_NAME:
            self.log.warning(
                "Cancelling TorchX apps named %s: the %s %s while submitting: %r",
                self.app_name,
                kind,
                _ended(exc),
                exc,
            )
            self.life.cancel_by_name(self.app_name, timeout=self.spec.cancel_timeout)
        elif action is AbortAction.LEAVE:
            self.log.warning(
                "%s attempt %d failed (%r); leaving TorchX app %s running for the retry",
                kind.capitalize(),
                attempt,
                exc,
                self.handle,
            )
        elif action is AbortAction.CANCEL:
            handle = self._attached()
            self.log.warning(
                "Cancelling TorchX app %s because the %s %s: %r", handle, kind, _ended(exc), exc
            )
            self.life.cancel(handle, timeout=self.spec.cancel_timeout)

    @contextlib.contextmanager
    def aborting_on_error(self) -> Iterator[None]:
        """Runs the block; an exception out of it aborts the attempt (:meth:`abort`), then
        propagates. Synchronous on purpose: inside a cancelled async scope every further
        ``await`` is cancelled too."""
        try:
            yield
        except BaseException as exc:
            self.abort(exc)
            raise


# -- the poll loop ------------------------------------------------------------------------------


def watch(session: Session) -> Observation:
    """Polls until the observation is final (:func:`is_final`); returns it.

    Sleeps in short slices, so Prefect's timeout and termination exceptions land promptly.
    """
    while not is_final(obs := session.poll_once()):
        _sleep(session.spec.poll_interval)
    return obs


async def awatch(session: Session) -> Observation:
    """The async twin of :func:`watch`: each status read in a worker thread."""
    while not is_final(obs := await asyncio.to_thread(session.poll_once)):
        await asyncio.sleep(session.spec.poll_interval)
    return obs


def _sleep(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.25))


# -- helpers ------------------------------------------------------------------------------------


def _ended(exc: BaseException) -> str:
    """How an attempt ended, for the log: ``timed out``, ``was stopped`` or ``failed``."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    return "failed" if isinstance(exc, Exception) else "was stopped"


def _safe(fn: Callable[[], _T], default: _T, app_name: str) -> _T:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the engine's store is an aid, not a requirement
        logger.warning("Prefect store access failed for %s: %s", app_name, e)
        return default


class _Artifacts:
    """The attempt's Prefect artifacts: the app's link (once), its status, tracker results.

    A failure to publish is logged on the run logger, never raised: artifacts must not change
    the attempt's outcome.
    """

    def __init__(self, enabled: bool, app_name: str, run_logger: RunLogger) -> None:
        self.enabled = enabled
        self.app_name = app_name
        self.log = run_logger
        self._link_done = False

    def _url(self, handle: str, ui_url: str | None) -> str | None:
        """The app's page on the dashboard when one is configured (the block's
        ``dashboard_url`` / ``$TORCHX_DASHBOARD_URL``), else the scheduler's UI."""
        from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_app_url

        try:
            return dashboard_app_url(handle) or ui_url
        except InvalidDashboardUrlError as e:
            self.log.warning("%s; linking to the scheduler's UI instead", e)
            return ui_url

    def link(self, handle: str, ui_url: str | None) -> None:
        """The app's link artifact (once), to :meth:`_url`."""
        if not self.enabled or self._link_done:
            return
        url = self._url(handle, ui_url)
        if not url:
            return
        self._link_done = True
        try:
            pio.publish_link(artifact_key(self.app_name, "ui"), url, f"TorchX app {handle}")
        except Exception as e:  # noqa: BLE001 - artifacts must not change the outcome
            self.log.warning("Could not publish the UI link of %s: %s", handle, e)

    def status(self, handle: str, status: AppStatus | None) -> None:
        """The markdown status table of the app (and its link, if not published yet); its
        "UI:" line links where the link artifact does."""
        if not self.enabled or status is None:
            return
        self.link(handle, status.ui_url)
        try:
            pio.publish_status(
                artifact_key(self.app_name, "status"),
                status_markdown(handle, status, ui_url=self._url(handle, status.ui_url)),
                f"Status of TorchX app {handle}",
            )
        except Exception as e:  # noqa: BLE001 - artifacts must not change the outcome
            self.log.warning("Could not publish artifacts for %s: %s", handle, e)

    def tracker(self, handle: str) -> None:
        """What the app recorded through its tracker (``torchx_core.tracker``): a log line and,
        with artifacts enabled, a table artifact (nothing without a configured tracker)."""
        from torchx_core.runner import tracker_results

        results = tracker_results(handle)
        if results is None:
            return
        self.log.info(
            "tracker results of %s (%s): %s", handle, results.tracker, dict(results.metadata)
        )
        if not self.enabled:
            return
        rows = [
            {"kind": kind, "name": name, "value": value} for kind, name, value in results.rows()
        ]
        try:
            pio.publish_table(
                artifact_key(self.app_name, "tracker"),
                rows,
                f"Tracker results of TorchX app {handle} ({results.tracker})",
            )
        except Exception as e:  # noqa: BLE001 - artifacts must not change the outcome
            self.log.warning("Could not publish the tracker results of %s: %s", handle, e)
