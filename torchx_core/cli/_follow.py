"""Printing and following app logs for ``torchx run`` and ``torchx log``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

from torchx_core.cli._term import ENDC, GREEN, is_terminal, prefix_line, sanitize, use_color
from torchx_core.specs import AppState, AppStatus, UnknownAppException, replica_pairs
from torchx_core.specs.errors import TorchXError, did_you_mean

if TYPE_CHECKING:
    from torchx_core.runner import Runner
    from torchx_core.runner.lifecycle import LogFollower
    from torchx_core.schedulers.api import Stream

logger: logging.Logger = logging.getLogger(__name__)


class LogSelectionError(TorchXError, ValueError):
    """A ``torchx log`` selection names a role or replica the app does not have."""


def role_replicas(
    runner: Runner, app_handle: str, role: str | None = None
) -> list[tuple[str, int]]:
    """(role, replica index) pairs of the app, optionally of one role.

    Raises:
        UnknownAppException: the app is unknown.
        LogSelectionError: ``role`` is not a role of the app.
    """
    app = runner.describe(app_handle)
    if app is None:
        raise UnknownAppException(app_handle)
    pairs = replica_pairs(app, role)
    if role is not None and not pairs:
        names = [r.name for r in app.roles]
        raise LogSelectionError(
            f"app {app_handle} has no role {role!r}.{did_you_mean(role, names)}"
            f" Its roles: {', '.join(names)}"
        )
    return pairs


class _Printer:
    """Writes app output; on a terminal (unless ``raw``) its control sequences are neutralised."""

    def __init__(self, out: TextIO, raw: bool = False) -> None:
        self.out = out
        self.color = use_color(out)
        self.clean = not raw and is_terminal(out)
        self.lock = threading.Lock()

    def line(self, prefix: str, line: str) -> str:
        return _prefixed(prefix, sanitize(line) if self.clean else line)

    def prefix(self, role: str, k: int) -> str:
        tag = f"{role}/{k}"
        return f"{GREEN}{tag}{ENDC} " if self.color else f"{tag} "

    def write(self, prefix: str, lines: Iterable[str]) -> None:
        """Writes a finished log with ``prefix``, in large chunks (it may have many lines)."""
        buf: list[str] = []
        for line in lines:
            buf.append(self.line(prefix, line))
            if len(buf) >= _CHUNK_LINES:
                with self.lock:
                    self.out.write("".join(buf))
                buf.clear()
        with self.lock:
            self.out.write("".join(buf))
            self.out.flush()

    def emit(self, text: str) -> None:
        """Writes one finished line (a newline added if missing) and flushes."""
        if not text.endswith("\n"):
            text += "\n"
        with self.lock:
            self.out.write(text)
            self.out.flush()

    def follower(
        self,
        runner: Runner,
        app_handle: str,
        replicas: list[tuple[str, int]],
        max_replicas: int | None,
        regex: str | None = None,
        streams: Stream | None = None,
    ) -> LogFollower:
        """The lifecycle's :class:`LogFollower` over ``replicas``, printing through this printer."""
        from torchx_core.runner.lifecycle import LogFollower

        return LogFollower(
            runner,
            app_handle,
            self.emit,
            max_replicas=max_replicas,
            replicas=replicas,
            regex=regex,
            streams=streams,
            format_line=lambda role, k, line: self.line(self.prefix(role, k), line),
        )


_CHUNK_LINES = 8192
#: ``torchx run`` streams at most this many replicas (it says how to read the others)
MAX_STREAMED_REPLICAS = 16


def _prefixed(prefix: str, line: str) -> str:
    """``prefix + line`` ending in one newline (the common case without a scan per character)."""
    if not line.endswith("\n"):
        line += "\n"
    if "\r" in line or line.find("\n") != len(line) - 1:
        return prefix_line(prefix, line)  # progress bars / embedded newlines: prefix each part
    return prefix + line


def print_logs(
    runner: Runner,
    app_handle: str,
    replicas: list[tuple[str, int]],
    out: TextIO,
    regex: str | None = None,
    should_tail: bool = False,
    streams: Stream | None = None,
    raw: bool = False,
) -> None:
    """Prints the logs of ``replicas``, each line prefixed ``role/replica``.

    Without ``should_tail`` the replicas are printed one after the other; with it, every
    replica is followed (the lifecycle's :class:`LogFollower`, one thread each) until the app
    ends, and the first error of any replica is raised after all have finished.
    """
    printer = _Printer(out, raw)
    if should_tail:
        follower = printer.follower(runner, app_handle, replicas, None, regex, streams)
        follower.start()
        follower.join()
        if follower.errors:
            for e in follower.errors[1:]:
                logger.error("%s", e)
            raise follower.errors[0]
        return
    for role, k in replicas:
        lines = runner.log_lines(app_handle, role, k, regex=regex, streams=streams)
        printer.write(printer.prefix(role, k), lines)


def quick_status(runner: Runner, app_handle: str, budget: float) -> AppStatus | None:
    """Polls the status with a fast backoff for up to ``budget`` seconds (short apps end fast)."""
    deadline = time.monotonic() + budget
    pause = 0.001
    while True:
        st = runner.status(app_handle)
        if st is None or st.is_terminal() or time.monotonic() >= deadline:
            return st
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


_NOT_STARTED = (AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING)


def wait_with_logs(
    runner: Runner,
    app_handle: str,
    out: TextIO,
    log: bool,
    wait_interval: float = 1.0,
    quick_budget: float = 0.3,
    raw: bool = False,
) -> AppStatus | None:
    """Waits for the app to end; with ``log`` streams the replicas' logs meanwhile (at most
    :data:`MAX_STREAMED_REPLICAS`; a line says how to read the others).

    Apps that end within ``quick_budget`` seconds (polled with a fast backoff: use it for local
    schedulers, where a status is a file read) are printed without follower threads. Logs are
    followed once the app has started. The final status comes from ``Runner.wait`` (at once for
    an app that has ended), as in TorchX, whose users patch it to simulate an ending or a signal.
    """
    st = quick_status(runner, app_handle, budget=quick_budget)
    if st is None:
        return None
    if not log:
        return runner.wait(app_handle, wait_interval=wait_interval)
    while st is not None and st.state in _NOT_STARTED:
        time.sleep(wait_interval)
        st = runner.status(app_handle)
    if st is None:
        return None
    replicas = role_replicas(runner, app_handle)
    if st.is_terminal():
        print_logs(runner, app_handle, replicas, out, raw=raw)
        return runner.wait(app_handle, wait_interval=wait_interval)
    follower = _Printer(out, raw).follower(runner, app_handle, replicas, MAX_STREAMED_REPLICAS)
    follower.start()
    final = runner.wait(app_handle, wait_interval=wait_interval)
    follower.stop(timeout=10)  # logs are best effort; the status decides the exit code
    return final


def exit_code(status: AppStatus | None) -> int:
    """0 when the app SUCCEEDED, else 1."""
    return 0 if status is not None and status.state == AppState.SUCCEEDED else 1
