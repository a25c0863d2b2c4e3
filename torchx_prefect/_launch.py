"""Engine-neutral launcher logic: arguments, naming, reattaching, watching, results and logs.

Nothing here imports Prefect; the Prefect tasks in :mod:`torchx_prefect.tasks` drive these
pieces (directly in the sync task, through ``asyncio.to_thread`` in the async one). The Runner
is used only through its public API (``run``, ``status``, ``cancel``, ``list``, ``log_lines``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from torchx_core.specs import AppDef, AppState, AppStatus, is_terminal
from torchx_prefect.errors import (
    AppFailedError,
    AppUnknownStateError,
    AppVanishedError,
    InvalidTaskArgumentError,
)
from torchx_prefect.states import Outcome, outcome_for

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["AppResult", "LaunchSpec"]

NONE_MSG = "<NONE>"


class RunnerLike(Protocol):
    """The part of :class:`torchx_core.runner.Runner` the adapter uses."""

    def run(
        self, app: AppDef, scheduler: str, cfg: Mapping[str, Any] | None = None,
        workspace: Any = None,
    ) -> str: ...

    def status(self, app_handle: str) -> AppStatus | None: ...

    def cancel(self, app_handle: str) -> None: ...

    def list(self, scheduler: str) -> list[Any]: ...

    def log_lines(
        self, app_handle: str, role_name: str, k: int = 0, regex: str | None = None,
        since: Any = None, until: Any = None, should_tail: bool = False, streams: Any = None,
    ) -> Iterable[str]: ...


# --------------------------------------------------------------------------------------------
# arguments


@dataclass(frozen=True)
class LaunchSpec:
    """The validated arguments of a launcher task (see ``torchx_prefect.run_app``)."""

    app: AppDef | None
    component: str | None
    component_args: list[str] | dict[str, Any]
    scheduler: str
    cfg: dict[str, Any]
    workspace: str | None
    poll_interval: float
    unknown_state_timeout: float
    stream_logs: bool
    log_tail_lines: int
    create_artifacts: bool
    reattach: bool
    cancel_timeout: float

    @property
    def base_name(self) -> str:
        """The app's own name (the AppDef name, or the component name's last part)."""
        if self.app is not None:
            return self.app.name
        assert self.component is not None  # invariant of validate_args, not user input
        return re.split(r"[.:/]", self.component)[-1] or "app"


def _positive(name: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidTaskArgumentError(
            f"{name} must be a finite number of seconds, got {value!r} ({type(value).__name__})."
        )
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidTaskArgumentError(f"{name} must be {bound}, got {value!r}.")
    return float(value)


def validate_args(
    app: AppDef | str,
    app_args: list[str] | Mapping[str, Any] | None,
    scheduler: str,
    cfg: Mapping[str, Any] | None,
    workspace: str | None,
    poll_interval: float,
    unknown_state_timeout: float,
    stream_logs: bool,
    log_tail_lines: int,
    create_artifacts: bool,
    reattach: bool,
    cancel_timeout: float,
) -> LaunchSpec:
    """Checks every task argument, collecting all problems before raising once.

    Raises:
        InvalidTaskArgumentError: an argument has the wrong type or value, or two contradict
    """
    problems: list[str] = []
    appdef: AppDef | None = None
    component: str | None = None
    args: list[str] | dict[str, Any] = []
    if isinstance(app, AppDef):
        appdef = app
        if app_args:
            problems.append(
                "app_args is only used with a component name, but app is an AppDef; put the"
                " arguments into the AppDef's roles or pass a component name such as"
                " 'utils.echo' instead"
            )
        if not app.roles:
            problems.append(f"the AppDef {app.name!r} has no roles; add at least one Role")
    elif isinstance(app, str) and app.strip():
        component = app.strip()
        if app_args is None:
            args = []
        elif isinstance(app_args, Mapping):
            args = dict(app_args)
        elif isinstance(app_args, (list, tuple)) and all(isinstance(a, str) for a in app_args):
            args = list(app_args)
        else:
            problems.append(
                f"app_args must be a list of strings (CLI style, e.g. ['--msg', 'hi']) or a dict"
                f" of component arguments, got {app_args!r}"
            )
    else:
        problems.append(
            f"app must be an AppDef or a component name such as 'utils.echo', got {app!r}"
            f" ({type(app).__name__})"
        )
    if not isinstance(scheduler, str) or not scheduler:
        problems.append(f"scheduler must be a scheduler name such as 'local_cwd', got {scheduler!r}")
    if cfg is not None and not isinstance(cfg, Mapping):
        problems.append(f"cfg must be a mapping of run options, got {type(cfg).__name__}")
    if workspace is not None and not isinstance(workspace, str):
        problems.append(f"workspace must be a path string or None, got {type(workspace).__name__}")
    if isinstance(log_tail_lines, bool) or not isinstance(log_tail_lines, int) or log_tail_lines < 0:
        problems.append(f"log_tail_lines must be an int >= 0, got {log_tail_lines!r}")
    for flag_name, flag in (
        ("stream_logs", stream_logs),
        ("create_artifacts", create_artifacts),
        ("reattach", reattach),
    ):
        if not isinstance(flag, bool):
            problems.append(f"{flag_name} must be True or False, got {flag!r}")
    numbers: dict[str, float] = {}
    for num_name, value, zero_ok in (
        ("poll_interval", poll_interval, False),
        ("unknown_state_timeout", unknown_state_timeout, True),
        ("cancel_timeout", cancel_timeout, False),
    ):
        try:
            numbers[num_name] = _positive(num_name, value, allow_zero=zero_ok)
        except InvalidTaskArgumentError as e:
            problems.append(str(e).rstrip("."))
    if problems:
        raise InvalidTaskArgumentError(
            "Invalid arguments for the torchx_prefect task: " + "; ".join(problems) + "."
        )
    return LaunchSpec(
        app=appdef,
        component=component,
        component_args=args,
        scheduler=scheduler,
        cfg=dict(cfg or {}),
        workspace=workspace,
        poll_interval=numbers["poll_interval"],
        unknown_state_timeout=numbers["unknown_state_timeout"],
        stream_logs=stream_logs,
        log_tail_lines=log_tail_lines,
        create_artifacts=create_artifacts,
        reattach=reattach,
        cancel_timeout=numbers["cancel_timeout"],
    )


# --------------------------------------------------------------------------------------------
# naming


def run_identity(*parts: object) -> str:
    """A short stable digest of the run's identity (e.g. flow-run id, task key, dynamic key).

    >>> run_identity("f1", "run_app-abc", "0") == run_identity("f1", "run_app-abc", "0")
    True
    >>> len(run_identity("x"))
    10
    """
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def deterministic_app_name(base: str, identity: str, max_len: int = 40) -> str:
    """The app name used for a task run: ``<base>-<identity>`` in lowercase letters, digits, '-'.

    >>> deterministic_app_name("My_Train.v2", "0123456789")
    'my-train-v2-0123456789'
    """
    clean = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-") or "app"
    room = max_len - len(identity) - 1
    return f"{clean[:room].rstrip('-')}-{identity}"


def artifact_key(app_name: str, suffix: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for an app.

    >>> artifact_key("echo-0123456789", "status")
    'torchx-echo-0123456789-status'
    """
    return re.sub(r"[^a-z0-9-]+", "-", f"torchx-{app_name}-{suffix}".lower())


def rename_app(app: AppDef, name: str) -> AppDef:
    """A shallow copy of ``app`` named ``name`` (the caller's AppDef is not modified)."""
    return dataclasses.replace(app, name=name)


# --------------------------------------------------------------------------------------------
# reattaching


def find_live_app(runner: RunnerLike, scheduler: str, app_name: str, persisted: str | None) -> str | None:
    """Finds a still-running app that an earlier attempt of this task run submitted.

    First the handle persisted in the engine's store (if any), then the scheduler's app list
    searched by the deterministic name (this covers a crash between submit and persisting).

    Returns:
        The handle of a non-terminal app, or ``None`` when a new app must be submitted.
    """
    if persisted:
        try:
            status = runner.status(persisted)
        except Exception as e:  # noqa: BLE001 - a stale handle must not block a new submission
            logger.warning("Could not read the status of persisted app %s: %s", persisted, e)
            status = None
        if status is not None and not is_terminal(status.state):
            return persisted
    try:
        listed = runner.list(scheduler)
    except Exception as e:  # noqa: BLE001 - listing is optional for reattaching
        logger.info("Could not list apps on %s to reattach (%s); submitting anew", scheduler, e)
        return None
    for resp in listed:
        name = getattr(resp, "name", "") or ""
        app_id = getattr(resp, "app_id", "") or ""
        if (name == app_name or app_id == app_name or app_id.startswith(app_name + "-")) and (
            not is_terminal(resp.state)
        ):
            return str(resp.app_handle)
    return None


# --------------------------------------------------------------------------------------------
# watching


class AppWatch:
    """Turns successive status reads into outcomes, applying the UNKNOWN/vanished grace period.

    Args:
        app_handle: the handle being watched (for error messages)
        unknown_state_timeout: seconds an app may stay UNKNOWN (or unknown to the scheduler)
            before the watch fails
        clock: monotonic clock (injected by tests)
    """

    def __init__(
        self,
        app_handle: str,
        unknown_state_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app_handle = app_handle
        self.unknown_state_timeout = unknown_state_timeout
        self._clock = clock
        self._unknown_since: float | None = None
        self.last_status: AppStatus | None = None

    def observe(self, status: AppStatus | None) -> Outcome:
        """Records one status read and returns what to do next.

        Raises:
            AppUnknownStateError: the app stayed UNKNOWN past the grace period
            AppVanishedError: the scheduler did not know the app past the grace period
        """
        outcome = outcome_for(None if status is None else status.state)
        if status is not None:
            self.last_status = status
        if outcome is not Outcome.UNKNOWN:
            self._unknown_since = None
            return outcome
        now = self._clock()
        if self._unknown_since is None:
            self._unknown_since = now
        waited = now - self._unknown_since
        if waited < self.unknown_state_timeout:
            return Outcome.WAIT
        if status is None:
            raise AppVanishedError(
                f"The scheduler no longer knows app {self.app_handle} (status None for"
                f" {waited:.0f}s, unknown_state_timeout={self.unknown_state_timeout:g}s). It was"
                " deleted or expired; a task retry submits it again.",
                self.app_handle,
                self.last_status,
            )
        raise AppUnknownStateError(
            f"App {self.app_handle} stayed UNKNOWN for {waited:.0f}s"
            f" (unknown_state_timeout={self.unknown_state_timeout:g}s). Check the scheduler, or"
            " raise unknown_state_timeout.",
            self.app_handle,
            status,
        )


# --------------------------------------------------------------------------------------------
# results


@dataclass
class AppResult:
    """What a launcher task returns when the app SUCCEEDED.

    Args:
        app_handle: the app's handle (``{scheduler}://{session}/{app_id}``)
        status: the final status
        app_name: the deterministic name the app was submitted under
        reattached: True if this task attempt reattached to an app an earlier attempt submitted
    """

    app_handle: str
    status: AppStatus
    app_name: str = ""
    reattached: bool = False

    @property
    def state(self) -> AppState:
        """The final app state."""
        return self.status.state

    @property
    def ui_url(self) -> str | None:
        """The scheduler UI URL of the app, if the scheduler has one."""
        return self.status.ui_url

    def __repr__(self) -> str:
        return (
            f"AppResult(app_handle={self.app_handle!r}, state={AppState(self.state).name},"
            f" app_name={self.app_name!r}, reattached={self.reattached})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible form."""
        return {
            "app_handle": self.app_handle,
            "app_name": self.app_name,
            "reattached": self.reattached,
            "status": self.status.to_json(),
        }


def _md_cell(value: object) -> str:
    text = str(value).replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= 300 else text[:297] + "..."


def status_markdown(app_handle: str, status: AppStatus | None) -> str:
    """A markdown report of an app: state, message, error and a table per role/replica."""
    if status is None:
        return f"### TorchX app `{app_handle}`\n\nThe scheduler no longer knows this app.\n"
    lines = [
        f"### TorchX app `{app_handle}`",
        "",
        f"**State:** {AppState(status.state).name} &nbsp; **Restarts:** {status.num_restarts}",
    ]
    if status.ui_url:
        lines.append(f"**UI:** [{_md_cell(status.ui_url)}]({status.ui_url})")
    if status.msg:
        lines.append(f"**Message:** {_md_cell(status.msg)}")
    if status.structured_error_msg and status.structured_error_msg != NONE_MSG:
        lines.append(f"**Error:** `{_md_cell(status.structured_error_msg)}`")
    lines += ["", "| role | replica | state | hostname | error |", "|---|---|---|---|---|"]
    for role in status.roles:
        for rep in role.replicas:
            err = rep.structured_error_msg if rep.structured_error_msg != NONE_MSG else ""
            lines.append(
                f"| {_md_cell(role.role)} | {rep.id} | {AppState(rep.state).name}"
                f" | {_md_cell(rep.hostname or '')} | {_md_cell(err)} |"
            )
    if not status.roles:
        lines.append("| - | - | - | - | - |")
    return "\n".join(lines) + "\n"


def replica_keys(app: AppDef | None, status: AppStatus | None) -> list[tuple[str, int]]:
    """(role, replica index) pairs of an app, from its status if known, else from the AppDef."""
    keys: list[tuple[str, int]] = []
    if status is not None:
        keys = [(role.role, rep.id) for role in status.roles for rep in role.replicas]
    if not keys and app is not None:
        keys = [(role.name, k) for role in app.roles for k in range(max(role.num_replicas, 1))]
    return keys


def log_tail(
    runner: RunnerLike,
    app_handle: str,
    app: AppDef | None,
    status: AppStatus | None,
    max_lines: int,
    max_replicas: int = 4,
) -> list[str]:
    """The last ``max_lines`` log lines of the failed replicas (all replicas if none is marked)."""
    if max_lines <= 0:
        return []
    keys = replica_keys(app, status)
    if status is not None:
        failed = {
            (role.role, rep.id)
            for role in status.roles
            for rep in role.replicas
            if rep.state == AppState.FAILED
        }
        keys = [k for k in keys if k in failed] or keys
    tail: list[str] = []
    for role_name, k in keys[:max_replicas]:
        try:
            lines = [ln.rstrip("\n") for ln in runner.log_lines(app_handle, role_name, k)]
        except Exception as e:  # noqa: BLE001 - a missing log must not hide the app's failure
            tail.append(f"[{role_name}/{k}] <logs unavailable: {e}>")
            continue
        tail += [f"[{role_name}/{k}] {ln}" for ln in lines[-max_lines:]]
    return tail


def failed_error(app_handle: str, status: AppStatus, tail: list[str]) -> AppFailedError:
    """The error raised for an app that ended FAILED: message, structured error and log tail."""
    parts = [f"TorchX app {app_handle} FAILED"]
    if status.num_restarts:
        parts[0] += f" after {status.num_restarts} restart(s)"
    if status.msg:
        parts.append(f"msg: {status.msg}")
    if status.structured_error_msg and status.structured_error_msg != NONE_MSG:
        parts.append(f"structured error: {status.structured_error_msg}")
    for role in status.roles:
        for rep in role.replicas:
            if rep.state == AppState.FAILED and rep.structured_error_msg != NONE_MSG:
                parts.append(f"{role.role}[{rep.id}] error: {rep.structured_error_msg}")
    if tail:
        parts.append("log tail:\n" + "\n".join(tail))
    return AppFailedError("\n".join(parts), app_handle, status, tail)


# --------------------------------------------------------------------------------------------
# cancelling


def cancel_app(runner: RunnerLike, app_handle: str, timeout: float) -> bool:
    """Cancels an app, best effort and bounded in time (the cancel runs in a daemon thread).

    Returns:
        True if the cancel call returned within ``timeout`` without raising.
    """
    done = threading.Event()
    errors: list[BaseException] = []

    def _cancel() -> None:
        try:
            runner.cancel(app_handle)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    ctx = contextvars.copy_context()
    threading.Thread(
        target=ctx.run, args=(_cancel,), name=f"torchx-cancel-{app_handle}", daemon=True
    ).start()
    if not done.wait(timeout):
        logger.warning("Cancelling %s did not finish within %.0fs", app_handle, timeout)
        return False
    if errors:
        logger.warning("Cancelling %s failed: %s", app_handle, errors[0])
        return False
    logger.info("Cancelled TorchX app %s", app_handle)
    return True


# --------------------------------------------------------------------------------------------
# logs


@dataclass
class _Stream:
    role: str
    k: int
    emitted: int = 0
    thread: threading.Thread | None = None


@dataclass
class LogStreamer:
    """Streams replica logs to ``emit`` from daemon threads (one per replica, at most ``max_streams``).

    A stream that breaks (e.g. the log file does not exist yet) is reopened after
    ``retry_interval`` and skips the lines it already emitted, until the app is terminal.

    Args:
        runner: the runner to read logs through
        app_handle: the app whose logs to stream
        emit: called with each ``[role/k] line``
        app_done: returns True once the app reached a terminal state
        max_streams: at most this many replicas are streamed
        retry_interval: seconds before reopening a broken stream
    """

    runner: RunnerLike
    app_handle: str
    emit: Callable[[str], None]
    app_done: Callable[[], bool]
    max_streams: int = 16
    retry_interval: float = 0.5
    _streams: list[_Stream] = field(default_factory=list)
    _closed: threading.Event = field(default_factory=threading.Event)

    def start(self, keys: list[tuple[str, int]]) -> None:
        """Starts one thread per (role, replica) key (no-op for keys already streaming)."""
        known = {(s.role, s.k) for s in self._streams}
        for role, k in keys:
            if (role, k) in known or len(self._streams) >= self.max_streams:
                continue
            stream = _Stream(role, k)
            # carry the caller's context (e.g. the Prefect run and settings) into the thread
            ctx = contextvars.copy_context()
            stream.thread = threading.Thread(
                target=ctx.run, args=(self._pump, stream), name=f"torchx-logs-{role}-{k}",
                daemon=True,
            )
            self._streams.append(stream)
            stream.thread.start()

    def _lines(self, stream: _Stream) -> Iterator[str]:
        return iter(self.runner.log_lines(self.app_handle, stream.role, stream.k, should_tail=True))

    def _pump(self, stream: _Stream) -> None:
        while not self._closed.is_set():
            done_before = self.app_done()
            try:
                seen = 0
                for line in self._lines(stream):
                    seen += 1
                    if seen <= stream.emitted:
                        continue
                    if self._closed.is_set():
                        return
                    stream.emitted += 1
                    self.emit(f"[{stream.role}/{stream.k}] {line.rstrip()}")
                if done_before or self.app_done():
                    return
            except Exception as e:  # noqa: BLE001 - logs are best effort; retry until done
                if done_before:
                    logger.debug("log stream %s/%s ended: %s", stream.role, stream.k, e)
                    return
            self._closed.wait(self.retry_interval)

    def stop(self, timeout: float) -> None:
        """Waits up to ``timeout`` seconds in total for the streams to drain, then closes them."""
        deadline = time.monotonic() + timeout
        for stream in self._streams:
            if stream.thread is not None:
                stream.thread.join(max(0.0, deadline - time.monotonic()))
        self._closed.set()
