"""The life of one app inside an engine step, written once for the CLI and every engine adapter.

An engine step (an Airflow task try, a Prefect task run, a KFP launcher step) runs one app:
it submits the app under a deterministic name or reattaches to the one an earlier attempt
submitted, watches it until it ends, follows its logs, cancels it when the step is killed and
reports a failure with a log tail. :class:`AppLifecycle` does all of that over a
:class:`~torchx_core.runner.Runner`; adapters only translate :class:`Phase` into their engine's
outcome and supply the identity the name is built from::

    from torchx_core.runner import get_runner
    from torchx_core.runner.lifecycle import AppLifecycle

    with get_runner() as runner:
        life = AppLifecycle(runner, "local_cwd", owner="myengine:run-42#try=1")
        att = life.attach(app, identity=("run-42", "train"))   # submit, reattach or reuse
        follower = life.follow_logs(att.app_handle, print)     # every line, even if it ended
        try:
            status = life.wait(att.app_handle)                  # or poll()/apoll() + result()
        finally:
            follower.stop()

The decisions, stated once:

* **Phases.** :func:`phase_of` maps a status to a :class:`Phase`; a status read that raises is
  ``UNKNOWN``, an app the scheduler does not know is ``VANISHED``.
* **Grace.** One :class:`GraceClock` per app: ``UNKNOWN``/``VANISHED`` (and unreadable) are
  tolerated for ``unknown_timeout`` seconds in a row, then the step fails with
  :class:`AppVanishedError` (an app stuck ``UNKNOWN`` is cancelled first, if still owned).
* **Reattach policy** (:meth:`AppLifecycle.attach`): a running (or ``UNKNOWN``) app of the name is
  reattached, a ``SUCCEEDED`` one reused, a failed, cancelled or vanished one is submitted anew.
  Two attempts at once: the scheduler's ``name_lock`` serializes look-up, submit and the
  recording of the owner (local), so the attempt that held it last owns the app;
  without one, the later submit is cancelled by its own attempt, which reattaches to the
  earliest (``Scheduler.submit_order``: slurm, kubernetes).
* **Ownership.** The attempt that submitted or adopted an app records its *owner* token with the
  app (``Runner.set_owner``, kept by the scheduler, so every process on every host sees it). A
  kill path cancels only an app it still owns: recorded owner == mine -> cancel; someone else ->
  do not cancel ("superseded"); nothing recorded (a backend without owner support) -> cancel.
  With a ``name_lock``, that check and the cancel run under it, so no attempt adopts the app in
  between.
* **Logs.** :class:`LogFollower` gives every line of at most ``max_log_replicas`` replicas (it
  says how to read the others) exactly once, whether the app is running or already ended when
  following starts: a stream ends only after reading its log to the end once the app ended; a
  broken stream resumes without repeating lines; ``stop()`` drains streams that still give
  lines. A log followed in parts (wait, defer, resume) hands ``positions()`` of one follower to
  the next as ``start_at``. A new engine log (a new attempt, a reattach, a reused app) follows
  from the start; ``skip_existing=True`` starts each replica at its current end.
* **Failure.** :class:`AppFailedError` (and :class:`AppCancelledError`,
  :class:`AppVanishedError`) carry the handle, the final status and a log tail over every
  replica, failed ones first; they pickle, so engines can persist them.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import hashlib
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from torchx_core.runner._lifecycle_logs import LogFollower, more_replicas, replicas_of
from torchx_core.runner._status_read import aread_status as _aread_status
from torchx_core.runner._status_read import read_status as _read_status
from torchx_core.runner.launch_options import (
    InvalidTaskArgumentError,
    LaunchOptions,
    seconds_problem,
)
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import (
    NONE,
    AppDef,
    AppState,
    AppStatus,
    CfgVal,
    MalformedAppHandleException,
    UnknownSchedulerException,
    Workspace,
    is_terminal,
    parse_app_handle,
)
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.schedulers.api import ListAppResponse

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
    "app_name",
    "phase_of",
    "replicas_of",
]

logger: logging.Logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The first pause between two status polls in :meth:`AppLifecycle.wait` (doubles up to
#: ``poll_interval``): short apps end fast.
_FIRST_PAUSE = 0.05


# -- phases and the grace clock ---------------------------------------------------------------


class Phase(str, Enum):
    """The engine-neutral phase of an app, what every adapter maps to its engine's outcome."""

    WAITING = "waiting"  #: UNSUBMITTED, SUBMITTED, PENDING or RUNNING
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"  #: AppState.UNKNOWN, or reading the status raised
    VANISHED = "vanished"  #: the scheduler does not know the app (status None)

    def __str__(self) -> str:
        return self.value


_PHASE_OF_STATE: Mapping[AppState, Phase] = {
    AppState.UNSUBMITTED: Phase.WAITING,
    AppState.SUBMITTED: Phase.WAITING,
    AppState.PENDING: Phase.WAITING,
    AppState.RUNNING: Phase.WAITING,
    AppState.SUCCEEDED: Phase.SUCCEEDED,
    AppState.FAILED: Phase.FAILED,
    AppState.CANCELLED: Phase.CANCELLED,
    AppState.UNKNOWN: Phase.UNKNOWN,
}

_GRACE_PHASES = (Phase.UNKNOWN, Phase.VANISHED)


def phase_of(status: AppStatus | None) -> Phase:
    """The phase of an app with status ``status`` (``None``: the scheduler does not know it).

    >>> phase_of(AppStatus(AppState.RUNNING)), phase_of(None)
    (<Phase.WAITING: 'waiting'>, <Phase.VANISHED: 'vanished'>)
    """
    if status is None:
        return Phase.VANISHED
    return _PHASE_OF_STATE.get(AppState(status.state), Phase.UNKNOWN)


class GraceClock:
    """The one grace clock for UNKNOWN, unreadable and VANISHED apps.

    Args:
        timeout_s: how long (seconds) an app may stay UNKNOWN/VANISHED in a row; 0 fails at once
        clock: a monotonic clock (tests inject one)
        since: when (on ``clock``) the current UNKNOWN/VANISHED streak began, to continue a
            streak across processes (e.g. an Airflow sensor in reschedule mode keeps
            :attr:`since` in its task state store, with ``clock=time.time``)

    Raises:
        InvalidTaskArgumentError: ``timeout_s`` is not a finite number >= 0
    """

    def __init__(
        self,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        since: float | None = None,
    ) -> None:
        self.timeout_s = _seconds("unknown_timeout", timeout_s, allow_zero=True)
        self._clock = clock
        self._since: float | None = since

    def observe(self, phase: Phase) -> bool:
        """Records one observation; True once the app stayed UNKNOWN/VANISHED for ``timeout_s``.

        Any other phase resets the clock.
        """
        if phase not in _GRACE_PHASES:
            self._since = None
            return False
        now = self._clock()
        if self._since is None:
            self._since = now
        return now - self._since >= self.timeout_s

    @property
    def since(self) -> float | None:
        """When the current UNKNOWN/VANISHED streak began (None outside a streak)."""
        return self._since

    @property
    def waited(self) -> float:
        """Seconds the app has been UNKNOWN/VANISHED in a row (0 when it is not)."""
        return 0.0 if self._since is None else self._clock() - self._since


# -- naming -----------------------------------------------------------------------------------

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def app_name(base: str, identity: str | Sequence[object], *, max_len: int = 40) -> str:
    """The deterministic app name of a step: the same for every attempt of that step.

    ``<base>-<digest>``: ``base`` sanitized to ``[A-Za-z0-9_-]`` (no ``-``/``_`` at its ends) and
    cut to ``max_len`` characters, then 10 hex digits of the SHA-256 of the identity parts
    (``str()`` of each, joined by ``\\x1f``). Schedulers derive their app ids from this name
    (adding their own suffix, case or length rules).

    >>> app_name("train", ("d", "t", "r", -1))
    'train-e1b0369d8c'

    Args:
        base: the app's own name (kept as a readable prefix)
        identity: what identifies the step in its engine (e.g. dag, task, run, map index)
        max_len: the longest prefix kept from ``base``

    Raises:
        InvalidTaskArgumentError: ``identity`` is empty or ``max_len`` < 1
    """
    parts = [identity] if isinstance(identity, str) else list(identity)
    if not parts or parts == [""]:
        raise InvalidTaskArgumentError(
            f"identity must name the step (e.g. a run id and a task name), got {identity!r}"
        )
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise InvalidTaskArgumentError(f"max_len must be an int >= 1, got {max_len!r}")
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:10]
    clean = _NAME_CHARS.sub("-", str(base)).strip("-_")[:max_len].strip("-_") or "app"
    return f"{clean}-{digest}"


# -- errors -----------------------------------------------------------------------------------


class AppLifecycleError(TorchXError, RuntimeError):
    """Root of the errors an app's lifecycle raises."""


class AppFailedError(AppLifecycleError):
    """The app did not succeed: it ended FAILED (subclasses: CANCELLED, vanished).

    Args:
        app_handle: the app
        status: its last known status (None if never read)
        phase: the phase it ended in
        log_tail: the last log lines of its replicas (failed ones first), ``[role/k] line``
        detail: what happened, when the status alone does not say it (e.g. vanished)
    """

    default_phase = Phase.FAILED

    def __init__(
        self,
        app_handle: str,
        status: AppStatus | None = None,
        phase: Phase | None = None,
        log_tail: Sequence[str] = (),
        detail: str = "",
    ) -> None:
        self.app_handle = app_handle
        self.status = status
        self.phase = Phase(phase) if phase is not None else self.default_phase
        self.log_tail = list(log_tail)
        self.detail = detail
        super().__init__(self._render())

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.app_handle, self.status, self.phase, self.log_tail, self.detail))

    def _render(self) -> str:
        status = self.status
        if self.detail:
            head = f"app {self.app_handle} {self.detail}"
        else:
            state = AppState(status.state).name if status is not None else self.phase.name
            head = f"app {self.app_handle} ended {state}"
            if status is not None and status.num_restarts:
                head += f" after {status.num_restarts} restart(s)"
        if status is not None and status.msg:
            head += f": {status.msg}"
        parts = [head, *_error_lines(status)]
        if self.log_tail:
            parts.append("log tail:\n" + "\n".join(self.log_tail))
        return "\n".join(parts)


class AppCancelledError(AppFailedError):
    """The app ended CANCELLED (cancelled by someone else than this step)."""

    default_phase = Phase.CANCELLED


class AppVanishedError(AppFailedError):
    """The app stayed VANISHED (or UNKNOWN, or unreadable) longer than the grace period."""

    default_phase = Phase.VANISHED


def _error_lines(status: AppStatus | None) -> list[str]:
    """The structured errors of ``status``, each once (the app's, then different replicas')."""
    if status is None:
        return []
    seen: set[str] = set()
    lines = []
    if status.structured_error_msg and status.structured_error_msg != NONE:
        seen.add(status.structured_error_msg)
        lines.append(f"error: {status.structured_error_msg}")
    for role in status.roles:
        for rep in role.replicas:
            err = rep.structured_error_msg
            if err and err != NONE and err not in seen:
                seen.add(err)
                lines.append(f"{role.role}[{rep.id}] error: {err}")
    return lines


# -- value objects ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    """What :meth:`AppLifecycle.attach` did.

    Args:
        app_handle: the app the step now watches
        how: ``"submitted"`` (new app), ``"reattached"`` (running app of an earlier attempt) or
            ``"reused"`` (an earlier attempt's app already SUCCEEDED)
        status: the status read while looking for it (None for a new app)
        app_name: the deterministic name the app runs under
    """

    app_handle: str
    how: Literal["submitted", "reattached", "reused"]
    status: AppStatus | None
    app_name: str = ""


@dataclass(frozen=True)
class Observation:
    """One status read, with the grace clock applied.

    Args:
        phase: the app's phase
        status: the status read (None when VANISHED or unreadable)
        expired: the app stayed UNKNOWN/VANISHED longer than the grace period
    """

    phase: Phase
    status: AppStatus | None
    expired: bool

    @property
    def done(self) -> bool:
        """True when :meth:`AppLifecycle.result` decides (returns or raises) on this observation."""
        return self.expired or self.phase in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible form (e.g. an Airflow trigger event's payload): :meth:`from_json`."""
        return {
            "phase": self.phase.value,
            "status": None if self.status is None else self.status.to_json(),
            "expired": self.expired,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Observation:
        """Reverses :meth:`to_json`.

        Raises:
            InvalidTaskArgumentError: ``data`` is not an observation's JSON form
        """
        try:
            status = data["status"]
            return Observation(
                Phase(data["phase"]),
                None if status is None else AppStatus.from_json(status),
                bool(data["expired"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidTaskArgumentError(
                f"not an Observation's JSON form ({e}): {data!r:.200}; build it with"
                " Observation.to_json()"
            ) from e


# -- the lifecycle ----------------------------------------------------------------------------


class AppLifecycle:
    """Submits or reattaches, watches, follows, cancels and reports one app at a time per call.

    One instance can serve many apps of one step (or of many steps of the same owner).

    Args:
        runner: the Runner every call goes through (its public API plus the scheduler hooks)
        scheduler: the scheduler name apps run on
        owner: this attempt's owner token (the engine builds it, e.g.
            ``airflow:<dag>/<task>/<run>/<map>#try=3``), recorded with every app it attaches
        cfg: the scheduler's run options
        workspace: the workspace to build into the app (see ``Runner.run``)
        unknown_timeout: seconds an app may stay UNKNOWN, unreadable or VANISHED in a row
        poll_interval: the longest pause between two status polls in :meth:`wait`
        max_log_replicas: at most this many replicas are streamed and tailed
        tail_lines: log lines per replica in a failure's log tail (0: none)

    Raises:
        InvalidTaskArgumentError: an argument is wrong (every problem listed)
    """

    def __init__(
        self,
        runner: Runner,
        scheduler: str,
        *,
        owner: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        unknown_timeout: float = 300.0,
        poll_interval: float = 5.0,
        max_log_replicas: int = 16,
        tail_lines: int = 50,
    ) -> None:
        owner_problem = SETTINGS["owner"].problem(owner)
        options = LaunchOptions(
            scheduler=scheduler,
            cfg=cfg,
            workspace=workspace,
            poll_interval=poll_interval,
            unknown_timeout=unknown_timeout,
            tail_lines=tail_lines,
            max_log_replicas=max_log_replicas,
        )
        options.check("app lifecycle arguments", more=[owner_problem] if owner_problem else [])
        options = options.parsed()
        self.runner = runner
        self.scheduler = scheduler
        self.owner = str(SETTINGS["owner"].parse(owner))
        self.cfg: dict[str, CfgVal] = dict(cfg or {})
        self.workspace = workspace
        self.unknown_timeout = float(options.unknown_timeout)
        self.poll_interval = float(options.poll_interval)
        self.max_log_replicas = options.max_log_replicas
        self.tail_lines = options.tail_lines
        self._clocks: dict[str, GraceClock] = {}
        self._last: dict[str, AppStatus] = {}
        self._names: dict[str, str] = {}  # handle -> the name it was attached under
        self._held: set[str] = set()  # names whose lock this lifecycle holds (in attach)

    # -- submit or reattach ------------------------------------------------------------------

    def attach(
        self, app: AppDef, identity: str | Sequence[object], *, known_handle: str | None = None
    ) -> Attachment:
        """Finds the app this step already has, or submits it; records the owner either way.

        The app is renamed ``app_name(app.name, identity)`` (``app`` itself is not changed).
        ``known_handle`` (e.g. persisted by the engine) is looked at first, then the scheduler's
        app list by name. A running (or UNKNOWN) app is reattached, a SUCCEEDED one reused; a
        failed, cancelled or vanished one is ignored and the app submitted anew.

        Raises:
            SchedulerError: the scheduler's name lock could not be taken (local:
                ``NameLockError``, naming its holder; a retry may succeed)
        """
        name = app_name(app.name, identity)
        with self._name_lock(name) as serialized:
            if serialized:
                self._held.add(name)
            try:
                found = self._find(name, known_handle)
                if found is not None:
                    handle, status, how = found
                    logger.info("%s %s (%s) named %s", how, handle, phase_of(status), name)
                    self._adopt(handle, name)
                    return Attachment(handle, how, status, name)
                # a deep copy: submitting fills the roles in (env, workspace), and the caller's
                # AppDef must stay as given (engines digest it into the next attempt's identity)
                handle = self.runner.run(
                    dataclasses.replace(copy.deepcopy(app), name=name),
                    self.scheduler,
                    cfg=self.cfg,
                    workspace=self.workspace,
                )
                logger.info("submitted %s named %s", handle, name)
                # recorded before the lock is released: an attempt that takes it later adopts
                # the app and records itself last, never overwritten by this one
                self._adopt(handle, name)
            finally:
                self._held.discard(name)
        if not serialized:
            winner = self._reconcile(name, handle)
            if winner is not None:
                return winner
        return Attachment(handle, "submitted", None, name)

    def _name_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """The scheduler's lock on ``name`` (yields False where the backend has none)."""
        try:
            return self.runner.name_lock(self.scheduler, name)
        except Exception as e:  # noqa: BLE001 - without the lock, the reconcile still holds
            logger.warning(
                "cannot lock the name %s on %s (%s); reconciling after the submit",
                name,
                self.scheduler,
                e,
            )
            return contextlib.nullcontext(False)

    def _reconcile(self, name: str, handle: str) -> Attachment | None:
        """After a submit on a backend without a name lock: if another live app has the name,
        the earliest submitted keeps running, and this attempt cancels its own app (if it is
        the later one) and reattaches to the earliest. None: keep this attempt's app."""
        try:
            if self.runner.submit_order(self.scheduler, []) is None:
                return None  # the backend cannot tell which came first
            rows = [r for r in self._named(name) if not is_terminal(r.state)]
            ids = {parse_app_handle(r.app_handle).app_id: r.app_handle for r in rows}
            ids.setdefault(parse_app_handle(handle).app_id, handle)
            if len(ids) < 2:
                return None
            order = self.runner.submit_order(self.scheduler, list(ids)) or []
            winner = ids[order[0]] if order else handle
        except Exception as e:  # noqa: BLE001 - reconciling only removes duplicates
            logger.warning(
                "cannot check for another app named %s (%s); keeping %s", name, e, handle
            )
            return None
        found = self._adoptable(winner) if winner != handle else None
        if found is None:
            return None  # mine came first, or the earlier one already ended
        logger.warning(
            "%s and an earlier %s were both submitted as %s; cancelling mine", handle, winner, name
        )
        self._scheduler_cancel(handle)
        self._adopt(winner, name)
        return Attachment(winner, "reattached", found[1], name)

    def _find(
        self, name: str, known_handle: str | None
    ) -> tuple[str, AppStatus | None, Literal["reattached", "reused"]] | None:
        if known_handle and self._on_my_scheduler(known_handle):
            found = self._adoptable(known_handle)
            if found is not None:
                return found
        try:
            rows = self._named(name)
        except Exception as e:  # noqa: BLE001 - listing only helps reattaching
            logger.warning(
                "cannot list apps on %s to reattach (%s); submitting anew", self.scheduler, e
            )
            return None
        live = [r for r in rows if not is_terminal(r.state)]
        done = [r for r in rows if r.state == AppState.SUCCEEDED]
        for row in live + done:
            found = self._adoptable(row.app_handle, listed_live=row in live)
            if found is not None:
                return found
        return None

    def _on_my_scheduler(self, handle: str) -> bool:
        try:
            scheduler = parse_app_handle(handle).scheduler_backend
        except MalformedAppHandleException as e:
            logger.warning("ignoring the malformed known handle %r: %s", handle, e)
            return False
        if scheduler != self.scheduler:
            logger.info(
                "not reattaching to %s: it runs on %s, not %s", handle, scheduler, self.scheduler
            )
            return False
        return True

    def _adoptable(
        self, handle: str, *, listed_live: bool = False
    ) -> tuple[str, AppStatus | None, Literal["reattached", "reused"]] | None:
        try:
            status = _read_status(self.runner, handle)
        except Exception as e:  # noqa: BLE001 - an unreadable old app must not block a new one
            if listed_live:  # the scheduler's list says it runs: a second copy would be a duplicate
                logger.warning(
                    "cannot read the status of %s (%s); reattaching to it, as the"
                    " scheduler lists it running",
                    handle,
                    e,
                )
                return handle, None, "reattached"
            logger.warning("cannot read the status of %s (%s); not reattaching to it", handle, e)
            return None
        phase = phase_of(status)
        if phase in (Phase.WAITING, Phase.UNKNOWN):
            return handle, status, "reattached"
        if phase == Phase.SUCCEEDED:
            return handle, status, "reused"
        logger.info("not reattaching to %s: it is %s", handle, phase)
        return None

    def _named(self, name: str) -> list[ListAppResponse]:
        """The apps on the scheduler named ``name`` (see :func:`_is_named`); the list is shared
        with the other steps of this process that look for theirs at the same time. A backend
        with an index by name (the local root) answers from it, without listing every app."""
        named = self.runner.list_named(self.scheduler, name, self.cfg or None)
        if named is not None:
            return [r for r in named if _is_named(r, name)]
        rows = self.runner.shared_list(self.scheduler, self.cfg or None)
        return [r for r in rows if _is_named(r, name)]

    def _adopt(self, handle: str, name: str) -> None:
        self._names[handle] = name
        self._record_owner(handle)

    def _record_owner(self, handle: str) -> bool:
        try:
            recorded = self.runner.set_owner(handle, self.owner)
        except Exception as e:  # noqa: BLE001 - without an owner a kill path still cancels
            logger.warning("cannot record owner %s of %s: %s", self.owner, handle, e)
            return False
        if not recorded:
            logger.debug(
                "scheduler %s keeps no owner; kill paths cancel %s unconditionally",
                self.scheduler,
                handle,
            )
        return recorded

    # -- watching ----------------------------------------------------------------------------

    def poll(self, app_handle: str, *, max_age: float | None = None) -> Observation:
        """Reads the status once and applies the grace clock.

        The read is shared with every watcher of the same scheduler in this process: a status
        at most ``max_age`` seconds old (default: ``poll_interval``), one batched scheduler call
        per interval for all of them (``Runner.watch_status``); ``0`` reads
        this app alone, now.

        A read that raises is UNKNOWN (logged), never an error; only a malformed handle or an
        unknown scheduler raise (they cannot get better).
        """
        try:
            status = _read_status(self.runner, app_handle, self._max_age(max_age))
        except (MalformedAppHandleException, UnknownSchedulerException):
            raise
        except Exception as e:  # noqa: BLE001 - unreadable is UNKNOWN, under the grace clock
            return self._observe(app_handle, e)
        return self._observe(app_handle, status)

    async def apoll(self, app_handle: str, *, max_age: float | None = None) -> Observation:
        """:meth:`poll` for event loops (triggers, async tasks): the loop never blocks, and
        waiting for a shared read holds no worker thread."""
        try:
            status = await _aread_status(self.runner, app_handle, self._max_age(max_age))
        except (MalformedAppHandleException, UnknownSchedulerException):
            raise
        except Exception as e:  # noqa: BLE001 - unreadable is UNKNOWN, under the grace clock
            return self._observe(app_handle, e)
        return self._observe(app_handle, status)

    def _max_age(self, max_age: float | None) -> float:
        return self.poll_interval if max_age is None else max_age

    def _observe(self, app_handle: str, status: AppStatus | Exception | None) -> Observation:
        """The observation of one read (an exception: UNKNOWN), under the grace clock."""
        if isinstance(status, Exception):
            logger.warning("cannot read the status of %s: %s", app_handle, status)
            status, phase = None, Phase.UNKNOWN
        else:
            phase = phase_of(status)
        if status is not None:
            self._last[app_handle] = status
        clock = self._clocks.get(app_handle)
        if clock is None:
            clock = self._clocks[app_handle] = GraceClock(self.unknown_timeout)
        return Observation(phase, status, clock.observe(phase))

    def wait(
        self, app_handle: str, *, on_change: Callable[[Observation], None] | None = None
    ) -> AppStatus:
        """Blocks until the app ends; returns its SUCCEEDED status.

        Polls quickly at first, then every ``poll_interval`` seconds. ``on_change`` is called
        with the first observation and each time the phase or the state changes.

        Raises:
            AppFailedError: the app ended FAILED (with a log tail)
            AppCancelledError: the app ended CANCELLED
            AppVanishedError: the app stayed VANISHED/UNKNOWN past ``unknown_timeout``
        """
        pause = min(_FIRST_PAUSE, self.poll_interval)
        last: tuple[Phase, AppState | None] | None = None
        while True:
            obs = self.poll(app_handle, max_age=pause)
            key = (obs.phase, None if obs.status is None else AppState(obs.status.state))
            if on_change is not None and key != last:
                on_change(obs)
            last = key
            if obs.done:
                return self.result(app_handle, obs)
            time.sleep(pause)
            pause = min(pause * 2, self.poll_interval)

    def result(self, app_handle: str, obs: Observation) -> AppStatus:
        """The decision for one observation: the SUCCEEDED status, or the failure raised.

        An app that stayed UNKNOWN past the grace period is cancelled (if still owned) before
        :class:`AppVanishedError` is raised.

        Raises:
            AppFailedError, AppCancelledError, AppVanishedError: the app did not succeed
            AppLifecycleError: ``obs`` is not done (``obs.done`` is False)
        """
        if obs.phase == Phase.SUCCEEDED and obs.status is not None:
            return obs.status
        if obs.phase in (Phase.FAILED, Phase.CANCELLED):
            cls = AppFailedError if obs.phase == Phase.FAILED else AppCancelledError
            raise cls(app_handle, obs.status, obs.phase, self.failure_tail(app_handle, obs.status))
        if obs.expired:
            last = self._last.get(app_handle)
            waited = f"{self.unknown_timeout:g} s (unknown_timeout)"
            if obs.phase == Phase.VANISHED:
                detail = (
                    f"vanished: the scheduler has not known it for {waited}; it was deleted"
                    " or expired"
                )
                raise AppVanishedError(app_handle, last, obs.phase, (), detail)
            detail = (
                f"stayed UNKNOWN (or unreadable) for {waited}; check the scheduler, or raise"
                " unknown_timeout"
            )
            if self.cancel(app_handle):
                detail += "; it was cancelled"
            raise AppVanishedError(
                app_handle, last, obs.phase, self.failure_tail(app_handle, last), detail
            )
        raise AppLifecycleError(
            f"app {app_handle} is still {obs.phase}; call result() only when observation.done"
        )

    # -- logs --------------------------------------------------------------------------------

    def failure_tail(self, app_handle: str, status: AppStatus | None) -> list[str]:
        """The last ``tail_lines`` log lines of every replica (failed ones first), at most
        ``max_log_replicas`` replicas, each line ``[role/k] line``. Never raises."""
        if self.tail_lines <= 0 or self.max_log_replicas <= 0:
            return []
        try:
            replicas = replicas_of(self.runner, app_handle, status)
        except Exception as e:  # noqa: BLE001 - a missing log must not hide the failure
            return [f"<logs unavailable: {e}>"]
        out: list[str] = []
        for role, k in replicas[: self.max_log_replicas]:
            try:
                tail = deque(self.runner.log_lines(app_handle, role, k), maxlen=self.tail_lines)
            except Exception as e:  # noqa: BLE001 - as above
                out.append(f"[{role}/{k}] <logs unavailable: {e}>")
                continue
            out += [f"[{role}/{k}] {line.rstrip(chr(10))}" for line in tail]
        if len(replicas) > self.max_log_replicas:
            out.append(more_replicas(app_handle, self.max_log_replicas, len(replicas)))
        return out

    def follow_logs(
        self,
        app_handle: str,
        sink: Callable[[str], None],
        *,
        skip_existing: bool = False,
        **options: Any,
    ) -> LogFollower:
        """Starts streaming the app's replica logs into ``sink``; returns the follower.

        Every line of every streamed replica is given once, also when the app already ended
        (a reattached or reused app too: give it a new log from the start). Call ``stop()`` on
        it once the app ended. ``start_at`` (``positions()`` of an earlier follower of the same
        log) continues where that one stopped; ``skip_existing=True`` skips the lines already
        written. ``options`` go to :class:`LogFollower`.
        """
        follower = LogFollower(
            self.runner,
            app_handle,
            sink,
            max_replicas=self.max_log_replicas,
            skip_existing=skip_existing,
            **options,
        )
        follower.start()
        return follower

    # -- cancelling --------------------------------------------------------------------------

    def cancel(self, app_handle: str, *, timeout: float = 30.0, only_if_owned: bool = True) -> bool:
        """Cancels the app if this owner still owns it, bounded in time; idempotent.

        The scheduler's cancel is called even for an app that already ended (the scheduler may
        sweep what is left of it). Runs in a helper thread: safe from signal handlers and while
        another thread uses the Runner.

        Returns:
            True if the cancel was made within ``timeout`` without error; False if the app is
            owned by someone else (superseded), or the cancel failed or timed out.
        """

        def _cancel() -> bool:
            with self._decision_lock(self._names.get(app_handle)):
                if only_if_owned and not self._owns(app_handle):
                    return False
                self._scheduler_cancel(app_handle)
            logger.info("cancelled %s", app_handle)
            return True

        return _bounded(f"cancelling {app_handle}", _cancel, timeout)

    def cancel_by_name(
        self, name: str, *, timeout: float = 30.0, only_if_owned: bool = True
    ) -> bool:
        """Cancels the unfinished apps named ``name`` that this owner (still) owns, bounded.

        For a kill that interrupted :meth:`attach` before its handle was known.

        Returns:
            True if the listing and every cancel were made within ``timeout`` without error.
        """

        def _cancel() -> bool:
            with self._decision_lock(name):
                for row in self._named(name):
                    if is_terminal(row.state) or (only_if_owned and not self._owns(row.app_handle)):
                        continue
                    self._scheduler_cancel(row.app_handle)
                    logger.info("cancelled %s (named %s)", row.app_handle, name)
            return True

        return _bounded(f"cancelling apps named {name}", _cancel, timeout)

    @contextlib.contextmanager
    def _decision_lock(self, name: str | None) -> Iterator[None]:
        """Holds the name lock (where the scheduler has one) while a kill path decides whether
        it still owns the app and cancels it, so no attempt adopts it in between. Not taken
        when the name is unknown (a handle this lifecycle did not attach) or already held by
        this lifecycle (a kill that interrupted its own attach); a lock that cannot be taken
        (its holder is stopped, or a timeout) leaves the decision to the owner check alone."""
        with contextlib.ExitStack() as stack:
            if name is not None and name not in self._held:
                try:
                    stack.enter_context(self.runner.name_lock(self.scheduler, name))
                except Exception as e:  # noqa: BLE001 - a kill path must still decide
                    logger.warning(
                        "cannot lock the name %s to cancel its app (%s); deciding by the"
                        " recorded owner alone",
                        name,
                        e,
                    )
            yield

    def _owns(self, handle: str) -> bool:
        """Ownership rule: mine or nobody's -> True; someone else's -> False (logged)."""
        try:
            recorded = self.runner.owner(handle)
        except Exception as e:  # noqa: BLE001 - unreadable owner: cancel (like unsupported)
            logger.warning("cannot read the owner of %s (%s); cancelling it", handle, e)
            return True
        if recorded is None or recorded == self.owner:
            return True
        logger.warning(
            "not cancelling %s: superseded by %s (I am %s)", handle, recorded, self.owner
        )
        return False

    def _scheduler_cancel(self, handle: str) -> None:
        self.runner.cancel(handle, even_if_ended=True)


# -- helpers ----------------------------------------------------------------------------------


_DIGEST_END = re.compile(r"-[0-9a-f]{10}\Z")


def _is_named(row: ListAppResponse, name: str) -> bool:
    """Whether the listed app was submitted under ``name``.

    Its listed name is ``name``; or, for a name :func:`app_name` built (it ends with the identity
    digest, so nothing else starts with it), its listed name or app id (after a ``<namespace>:``
    or ``<queue>:`` prefix) is ``name`` plus a ``-<suffix>`` the scheduler added, compared without
    case (AWS Batch lists job names with their suffix, Kubernetes lowercases ids).
    """
    if row.name == name:
        return True
    if not _DIGEST_END.search(name):
        return False
    low = name.lower()
    for candidate in (row.name, row.app_id.rpartition(":")[2]):
        text = candidate.lower()
        if text == low or text.startswith(low + "-"):
            return True
    return False


def _seconds(name: str, value: object, *, allow_zero: bool) -> float:
    problem = seconds_problem(name, value, allow_zero=allow_zero)
    if problem is not None:
        raise InvalidTaskArgumentError(problem)
    return float(SETTINGS[name].parse(value))  # type: ignore[arg-type] # a checked number


def _bounded(what: str, fn: Callable[[], _T], timeout: float) -> _T | bool:
    """Runs ``fn`` in a daemon thread (with the caller's context); False if it raised or did
    not finish within ``timeout`` seconds."""
    result: list[_T] = []
    ctx = contextvars.copy_context()

    def _run() -> None:
        try:
            result.append(ctx.run(fn))
        except Exception as e:  # noqa: BLE001 - reported here, the caller gets False
            logger.warning("%s failed: %s", what, e)

    thread = threading.Thread(target=_run, name="torchx-cancel", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        logger.warning("%s did not finish within %g s", what, timeout)
        return False
    return result[0] if result else False
