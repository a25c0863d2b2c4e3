"""Reading a replica's log for the page: the last lines, the whole file, and a live follow.

Everything goes through :meth:`Runner.log_lines`, one line at a time: the last ``n`` lines of a
million-line log are found with a bounded deque (memory of ``n`` lines, never the whole file), and
a follow starts after the lines the page already shows.
"""

from __future__ import annotations

import queue
import re
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchx_core.specs.errors import TorchXError
from torchx_core.util.terminal import sanitize

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner

__all__ = ["InvalidLogRequestError", "LogRef", "display", "follow", "tail", "whole"]

_SGR = re.compile(r"\x1b\[[0-9;:]{0,64}m")

#: lines a follower buffers for a slow browser before its reader waits
_FOLLOW_BUFFER = 200_000


class InvalidLogRequestError(TorchXError, ValueError):
    """A log page was asked for with a bad stream, replica index or regular expression."""

    permanent = True


@dataclass(frozen=True)
class LogRef:
    """One replica's log: app, role, replica index, stream (``""``: the scheduler's default)
    and an optional regular expression the lines must match."""

    handle: str
    role: str
    k: int = 0
    stream: str = ""
    regex: str = ""

    def check(self) -> None:
        """Raises :class:`InvalidLogRequestError` for a bad stream, index or regex."""
        if self.stream not in ("", "stdout", "stderr", "combined"):
            raise InvalidLogRequestError(
                f"stream {self.stream!r} is not one of stdout, stderr, combined (or empty)"
            )
        if self.k < 0:
            raise InvalidLogRequestError(f"replica index {self.k} must be >= 0")
        if self.regex:
            try:
                re.compile(self.regex)
            except re.error as e:
                raise InvalidLogRequestError(
                    f"the filter {self.regex!r} is not a valid regular expression: {e}"
                ) from e

    def lines(self, runner: Runner, follow: bool = False) -> Iterator[str]:
        """The replica's lines (with their newline), following the log if ``follow``."""
        return iter(
            runner.log_lines(
                self.handle,
                self.role,
                self.k,
                regex=self.regex or None,
                should_tail=follow,
                streams=self.stream or None,  # type: ignore[arg-type] # str accepted
            )
        )


def display(line: str) -> str:
    """A log line as the page shows it: without its newline, colours dropped, every other
    terminal control sequence written as its ``\\xNN`` escape (as the CLI does)."""
    return _SGR.sub("", sanitize(line.rstrip("\n")))


def tail(runner: Runner, ref: LogRef, n: int) -> tuple[list[str], int]:
    """The last ``n`` lines (display form) and how many lines the log holds now."""
    last: deque[str] = deque(maxlen=max(n, 0))
    count = 0
    for line in ref.lines(runner):
        count += 1
        last.append(line)
    return [display(x) for x in last], count


def whole(runner: Runner, ref: LogRef) -> Iterator[bytes]:
    """The whole log as it is, for a download (raw bytes, one line at a time)."""
    for line in ref.lines(runner):
        yield line.encode("utf-8", "surrogateescape")


class Follower:
    """Follows one replica's log in a thread, after its first ``skip`` lines.

    :meth:`batch` hands the lines read since the last call (display form); ``ended`` is set
    when the log ended (the app finished) or failed (``error``). :meth:`stop` makes the thread
    quit at its next line.
    """

    def __init__(self, runner: Runner, ref: LogRef, skip: int) -> None:
        self._queue: queue.Queue[str] = queue.Queue(maxsize=_FOLLOW_BUFFER)
        self._stop = threading.Event()
        self.ended = threading.Event()
        self.error = ""
        self._thread = threading.Thread(
            target=self._run, args=(runner, ref, skip), daemon=True, name="dashboard-follow"
        )
        self._thread.start()

    def _run(self, runner: Runner, ref: LogRef, skip: int) -> None:
        try:
            for i, line in enumerate(ref.lines(runner, follow=True)):
                if self._stop.is_set():
                    return
                if i >= skip:
                    self._put(display(line))
        except Exception as e:  # noqa: BLE001 - reported to the page
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ended.set()

    def _put(self, line: str) -> None:
        """Queues ``line``; waits while the buffer is full (a slow browser) until stopped."""
        while not self._stop.is_set():
            try:
                self._queue.put(line, timeout=0.5)
                return
            except queue.Full:
                continue

    def batch(self, wait: float = 0, limit: int = 5000) -> list[str]:
        """Up to ``limit`` lines, waiting at most ``wait`` seconds for the first one."""
        out: list[str] = []
        try:
            out.append(self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait())
            while len(out) < limit:
                out.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return out

    def drained(self) -> bool:
        """Whether the log ended and every line was handed out."""
        return self.ended.is_set() and self._queue.empty()

    def stop(self) -> None:
        """Asks the thread to quit (it does at its next line, or when the log ends)."""
        self._stop.set()


def follow(runner: Runner, ref: LogRef, skip: int) -> Follower:
    """Starts following ``ref`` after its first ``skip`` lines."""
    return Follower(runner, ref, skip)
