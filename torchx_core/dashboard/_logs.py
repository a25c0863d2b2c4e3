"""Reading a replica's log for the page: the last lines, the whole file, and a live follow.

Lines come from :meth:`Runner.log_lines` without a filter and are numbered by their position in
the log (1 = the first line), so a follow that reconnects resumes after the last line it was
sent whatever the filter; the last ``n`` lines of a million-line log are found with a bounded
deque (memory of ``n`` lines). A filter (regular expression) is matched in worker processes
(``_filter.RegexPool``), bounded in time. A download copies the log's files as bytes
(:meth:`Runner.log_files`), in large chunks.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchx_core.dashboard._filter import MAX_PATTERN, FilterCutOff, RegexPool
from torchx_core.specs.errors import TorchXError
from torchx_core.util.terminal import sanitize

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner

__all__ = [
    "Follower",
    "InvalidLogRequestError",
    "LogRef",
    "Tail",
    "TooManyFollowsError",
    "display",
    "download",
    "tail",
]

_SGR = re.compile(r"\x1b\[[0-9;:]{0,64}m")
#: bidirectional controls (embeddings, overrides, isolates, marks): shown as ``\uXXXX``, as they
#: would otherwise reorder the text around them on screen
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: ``NAME=value`` / ``name: value`` of a secret-named setting, and ``Bearer <token>``
_SECRET_SETTING = re.compile(
    r"(?i)(\b[\w.-]*(?:token|passw(?:or)?d|secret|api[_-]?key|access[_-]?key|credential|"
    r"private[_-]?key|auth)[\w.-]*[\"']?\s*[=:]\s*)([\"']?)(?!(?:bearer|basic)\s|•)[^\s\"',;]+"
)
_BEARER = re.compile(r"(?i)\b((?:bearer|basic)\s+)[\w.~+/=-]+")
#: what a redacted value is shown as
REDACTED = "••••••"

#: lines a follower buffers for a slow browser before its reader waits
_FOLLOW_BUFFER = 200_000
#: a filter's batch: at most this many lines, or about this many characters
_BATCH_LINES = 5000
_BATCH_CHARS = 1 << 20
#: bytes per chunk of a download
DOWNLOAD_CHUNK = 1 << 20


class InvalidLogRequestError(TorchXError, ValueError):
    """A log page was asked for with a bad stream, replica index or regular expression."""

    permanent = True


class TooManyFollowsError(TorchXError):
    """Every follow slot of the dashboard is taken."""


@dataclass(frozen=True)
class LogRef:
    """One replica's log: app, role, replica index, stream (``""``: the scheduler's default)
    and an optional regular expression the lines shown must match."""

    handle: str
    role: str
    k: int = 0
    stream: str = ""
    regex: str = ""
    redact: bool = False

    def show(self, line: str) -> str:
        """``line`` as the page shows it (:func:`display`), secrets masked if ``redact``."""
        text = display(line)
        return redact_secrets(text) if self.redact else text

    def check(self) -> None:
        """Raises :class:`InvalidLogRequestError` for a bad stream, index or regex."""
        if self.stream not in ("", "stdout", "stderr", "combined"):
            raise InvalidLogRequestError(
                f"stream {self.stream!r} is not one of stdout, stderr, combined (or empty)"
            )
        if self.k < 0:
            raise InvalidLogRequestError(f"replica index {self.k} must be >= 0")
        if len(self.regex) > MAX_PATTERN:
            raise InvalidLogRequestError(
                f"the filter is {len(self.regex)} characters long; at most {MAX_PATTERN} are"
                " accepted: shorten it"
            )
        if self.regex:
            try:
                re.compile(self.regex)
            except re.error as e:
                raise InvalidLogRequestError(
                    f"the filter {self.regex!r} is not a valid regular expression: {e}"
                ) from e

    def lines(self, runner: Runner, follow: bool = False) -> Iterator[str]:
        """Every line of the replica's log (with its newline; the filter is not applied),
        following the log if ``follow``."""
        return iter(
            runner.log_lines(
                self.handle,
                self.role,
                self.k,
                should_tail=follow,
                streams=self.stream or None,  # type: ignore[arg-type] # str accepted
            )
        )


def display(line: str) -> str:
    """A log line as the page shows it: without its newline, colours dropped, every other
    terminal control sequence and every bidirectional control written as its escape (as the
    CLI does), so no line can reorder or hide text on screen."""
    text = _SGR.sub("", sanitize(line.rstrip("\n")))
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def redact_secrets(text: str) -> str:
    """``text`` with the values of secret-named settings (``HF_TOKEN=...``, ``password: ...``)
    and bearer tokens masked.

    >>> redact_secrets("HF_TOKEN=hf_abc user=me Authorization: Bearer xyz")
    'HF_TOKEN=•••••• user=me Authorization: Bearer ••••••'
    """
    return _SECRET_SETTING.sub(rf"\1\2{REDACTED}", _BEARER.sub(rf"\1{REDACTED}", text))


def batches(lines: Iterable[str]) -> Iterator[list[str]]:
    """``lines`` in lists of at most ``_BATCH_LINES`` lines or about ``_BATCH_CHARS`` chars."""
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if len(batch) >= _BATCH_LINES or size >= _BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


@dataclass
class Tail:
    """The end of a log as its page shows it.

    ``lines``: ``(line number, display text)`` of the last lines shown (those matching the
    filter); ``matched``: lines matching so far; ``read``: lines of the log read (a follow goes
    on after them); ``cut_off``: why the filter was stopped (``""``: it was not).
    """

    lines: list[tuple[int, str]] = field(default_factory=list)
    matched: int = 0
    read: int = 0
    cut_off: str = ""


def tail(runner: Runner, ref: LogRef, n: int, pool: RegexPool, budget: float) -> Tail:
    """The last ``n`` lines of ``ref`` (those matching its filter, which may take ``budget``
    seconds at most, in ``pool``'s workers)."""
    last: deque[tuple[int, str]] = deque(maxlen=max(n, 0))
    out = Tail()
    if not ref.regex:
        for out.read, line in enumerate(ref.lines(runner), 1):
            last.append((out.read, line))
        out.matched = out.read
    else:
        deadline = time.monotonic() + budget
        for batch in batches(ref.lines(runner)):
            try:
                found = pool.matching(ref.regex, batch, deadline)
            except FilterCutOff as e:
                out.cut_off = (
                    f"the filter was stopped after {budget:g} s ({e.reason}), at line"
                    f" {out.read + 1}: the lines shown match up to there only. Simplify the"
                    " regular expression (nested repetitions such as (A+)+ take exponential time)"
                )
                break
            last.extend((out.read + i + 1, batch[i]) for i in found)
            out.matched += len(found)
            out.read += len(batch)
    out.lines = [(i, ref.show(x)) for i, x in last]
    return out


def log_files(runner: Runner, ref: LogRef) -> list[str] | None:
    """The files of ``ref``'s log (None: the scheduler keeps none here); raises as
    :meth:`Runner.log_lines` for an unknown app, role or replica."""
    return runner.log_files(ref.handle, ref.role, ref.k, ref.stream or None)  # type: ignore[arg-type] # str accepted


def download(runner: Runner, ref: LogRef, files: list[str] | None) -> Iterator[bytes]:
    """The whole log for a download: the bytes of its ``files`` as they are (invalid UTF-8
    kept), in chunks of ``DOWNLOAD_CHUNK``; without files, its lines, batched as large."""
    if files is None:
        for batch in batches(ref.lines(runner)):
            yield "".join(batch).encode("utf-8", "surrogateescape")
        return
    for path in files:
        if not os.path.exists(path):
            continue  # e.g. a Slurm replica that wrote no stderr file
        with open(path, "rb") as f:
            while chunk := f.read(DOWNLOAD_CHUNK):
                yield chunk


class Follower:
    """Follows one replica's log in a thread, from line ``start`` on (0: the first line).

    The thread appends raw lines to a buffer and wakes the event loop's reader
    (:meth:`next_batch`) when it has some: no polling. ``slots`` caps the follows of a dashboard
    (taken here, given back when the thread ends); :meth:`stop` makes the thread quit at its
    next line (or when the log ends).

    Raises:
        TooManyFollowsError: every slot is taken.
    """

    def __init__(
        self,
        runner: Runner,
        ref: LogRef,
        start: int,
        slots: threading.BoundedSemaphore,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        if not slots.acquire(blocking=False):
            raise TooManyFollowsError(
                "too many logs are followed from this dashboard right now; close other log"
                " pages (or start it with a larger --max-follows)"
            )
        self.position = start
        self.error = ""
        self._slots = slots
        self._loop = loop
        self._wake = asyncio.Event()
        self._cond = threading.Condition()
        self._buffer: list[str] = []
        self._signalled = False
        self._ended = False
        self._stop = False
        self._thread = threading.Thread(
            target=self._run, args=(runner, ref, start), daemon=True, name="dashboard-follow"
        )
        self._thread.start()

    def _run(self, runner: Runner, ref: LogRef, start: int) -> None:
        try:
            for i, line in enumerate(ref.lines(runner, follow=True)):
                if self._stop:
                    return
                if i >= start:
                    self._put(line)
        except Exception as e:  # noqa: BLE001 - reported to the page
            self.error = f"{type(e).__name__}: {e}"
        finally:
            with self._cond:
                self._ended = True
                self._signal()
            self._slots.release()

    def _signal(self) -> None:
        """Wakes the reader (once until it reads); called with the lock held."""
        if not self._signalled:
            self._signalled = True
            try:
                self._loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the loop closed: nobody reads any more
                self._stop = True

    def _put(self, line: str) -> None:
        with self._cond:
            while len(self._buffer) >= _FOLLOW_BUFFER and not self._stop:
                self._cond.wait()  # a slow browser: wait until it read
            self._buffer.append(line)
            self._signal()

    async def next_batch(self, wait: float) -> list[str] | None:
        """The lines read since the last call; ``[]`` if none came within ``wait`` seconds;
        None once the log ended and every line was handed out."""
        while True:
            self._wake.clear()
            with self._cond:
                lines, self._buffer = self._buffer, []
                self._signalled = False
                ended = self._ended
                self._cond.notify_all()
            if lines:
                return lines
            if ended:
                return None
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                return []

    def stop(self) -> None:
        """Asks the thread to quit (it does at its next line, or when the log ends)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()
