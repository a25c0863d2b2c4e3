"""Log filters (regular expressions) matched in worker processes, each call bounded in time.

Python's ``re`` backtracks: ``(A+)+B`` over a long line of ``A`` runs for ages, holding the GIL.
The server therefore never matches a user's pattern itself: :class:`RegexPool` sends batches of
lines to at most ``workers`` child processes and waits for the answer without holding the GIL;
a worker that misses the deadline is killed (a fresh one is started on the next call) and the
caller learns the filter was cut off. Other requests are served meanwhile.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

__all__ = ["FilterCutOff", "RegexPool"]

#: the longest pattern accepted (a compiled pattern's size grows with its text)
MAX_PATTERN = 1000


class FilterCutOff(Exception):
    """The filter did not finish in time (``reason`` says why) and was stopped."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _serve(conn: Connection) -> None:
    """A worker: answers ``(pattern, lines)`` with the indexes of the lines matching."""
    cache: dict[str, re.Pattern[str]] = {}
    while True:
        try:
            pattern, lines = conn.recv()
        except EOFError:
            return
        rx = cache.get(pattern)
        if rx is None:
            rx = cache[pattern] = re.compile(pattern)
        conn.send([i for i, line in enumerate(lines) if rx.search(line)])


#: the worker's program: serve on the socket whose descriptor is its argument
_PROGRAM = (
    "import sys; from multiprocessing.connection import Connection;"
    " from torchx_core.dashboard._filter import _serve; _serve(Connection(int(sys.argv[1])))"
)


class _Worker:
    """A child interpreter (a plain subprocess: usable from any process, daemonic or not)
    answering over a socket pair; it exits when the server's end closes."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[2])  # where torchx_core is imported from
        path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _PROGRAM, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path},
            )
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(5)
        self.conn.close()


class RegexPool:
    """Matches patterns in at most ``workers`` child processes.

    Args:
        workers: child processes at most (callers beyond that wait for one, within their
            deadline)
    """

    def __init__(self, workers: int = 2) -> None:
        self._slots = threading.BoundedSemaphore(workers)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False

    def matching(self, pattern: str, lines: Sequence[str], deadline: float) -> list[int]:
        """Indexes of ``lines`` that ``pattern`` matches (``re.search``).

        Raises:
            FilterCutOff: the answer did not come before ``deadline`` (``time.monotonic()``)
                or every worker stayed busy until then.
        """
        if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise FilterCutOff("every filter worker stayed busy with other filters")
        try:
            worker = self._take()
            try:
                worker.conn.send((pattern, list(lines)))
                if worker.conn.poll(max(0.0, deadline - time.monotonic())):
                    found: list[int] = worker.conn.recv()
                    self._give(worker)
                    return found
            except (OSError, EOFError):
                pass
            worker.kill()
            raise FilterCutOff("the filter took longer than its time limit")
        finally:
            self._slots.release()

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Worker()

    def _give(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        """Stops the idle workers (busy ones stop when their call returns)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()
