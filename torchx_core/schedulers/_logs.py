"""Log helpers shared by the backends that read log files themselves (slurm, lsf): reading
and following a file, and one batched "has the app ended?" check for all followers.

Kept neutral so that no scheduler imports another scheduler's module. (The local scheduler
reads its logs with its own ``local/_logio``.)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator

_CHUNK = 1 << 20


def iter_file_lines(
    path: str | os.PathLike[str],
    should_tail: bool = False,
    is_done: Callable[[], bool] | None = None,
    poll_interval: float = 0.1,
    wait_for_file: float = 0.0,
) -> Iterator[str]:
    """Yields the lines of ``path`` (with their ``\\n``).

    Args:
        path: the log file.
        should_tail: keep following the file as it grows until ``is_done()`` returns True.
        is_done: tells when the writer has finished (checked only when following).
        poll_interval: seconds between reads while following.
        wait_for_file: seconds to wait for the file to appear before giving up (returns nothing).
    """
    deadline = time.monotonic() + wait_for_file
    while not os.path.exists(path):
        running = should_tail and is_done is not None and not is_done()
        if time.monotonic() >= deadline and not running:
            if os.path.exists(path):  # written as the app ended: read it
                break
            return
        time.sleep(min(poll_interval, 0.05))
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        if not should_tail:
            yield from f
            return
        pending = ""
        while True:
            chunk = f.read(_CHUNK)
            if chunk:
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    yield line + "\n"
                continue
            if is_done is None or is_done():
                # one last read: the writer may have flushed between our read and its exit
                rest = f.read()
                pending += rest
                if pending:
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        yield line + "\n"
                    if pending:
                        yield pending
                return
            time.sleep(poll_interval)


def iter_files_lines(
    paths: list[str],
    should_tail: bool = False,
    is_done: Callable[[], bool] | None = None,
    poll_interval: float = 0.1,
    wait_for_file: float = 0.0,
) -> Iterator[str]:
    """Yields the lines of several files (e.g. a replica's stdout and stderr files).

    Without following, each file in turn. Following, lines come in the order they are read
    from either file (their relative order is approximate: the writer keeps them apart), until
    ``is_done()`` and a last read of every file.

    Args: as :func:`iter_file_lines`.
    """
    if len(paths) == 1 or not should_tail:
        for i, path in enumerate(paths):
            yield from iter_file_lines(
                path, should_tail, is_done, poll_interval, wait_for_file if i == 0 else 0.0
            )
        return
    deadline = time.monotonic() + wait_for_file
    files: dict[str, object] = {}
    pending = dict.fromkeys(paths, "")
    try:
        while True:
            # "done" first: a file written before the app ended exists by the time it is looked
            # for below, so the last read gets it (a stderr file that appears as the app ends)
            done = is_done is None or is_done()
            for path in paths:
                if path not in files and os.path.exists(path):
                    files[path] = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
            got = False
            for path, f in files.items():
                chunk = f.read(_CHUNK if not done else -1)  # type: ignore[attr-defined]
                if chunk:
                    got = True
                    pending[path] += chunk
                    *lines, pending[path] = pending[path].split("\n")
                    for line in lines:
                        yield line + "\n"
            if done:
                for path in paths:
                    if pending[path]:
                        yield pending[path]
                return
            if not files and time.monotonic() >= deadline and is_done is None:
                return
            if not got:
                time.sleep(poll_interval)
    finally:
        for f in files.values():
            f.close()  # type: ignore[attr-defined]


class SharedEndCheck:
    """Tells the log followers of one process when their apps have ended, with one batched status
    read per ``interval`` for all followed apps, instead of one status call per follower and poll.

    A quiet log is followed by asking "has the app ended?" every poll; with 100 replicas followed
    that was 100 ``squeue`` runs per poll. Here followers register their app (:meth:`follow`),
    and :meth:`is_done` answers from a cache refreshed by one ``describe_many`` of every followed
    app at most every ``interval`` seconds.

    Args:
        interval: the longest age of a cached answer (seconds)
    """

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self.reads = 0  # batched reads made (for benchmarks and tests)
        self._lock = threading.Lock()
        self._followed: dict[str, int] = {}
        self._ended: dict[str, bool] = {}
        self._read_at = -float("inf")

    def follow(self, app_id: str, lines: Iterable[str]) -> Iterator[str]:
        """Yields ``lines`` while ``app_id`` counts as followed."""
        with self._lock:
            self._followed[app_id] = self._followed.get(app_id, 0) + 1
        try:
            yield from lines
        finally:
            with self._lock:
                left = self._followed.pop(app_id, 1) - 1
                if left > 0:
                    self._followed[app_id] = left
                else:
                    self._ended.pop(app_id, None)

    def is_done(self, app_id: str, ended_many: Callable[[list[str]], dict[str, bool]]) -> bool:
        """Whether ``app_id`` has ended (or is unknown), per the last batched read.

        Args:
            app_id: the followed app
            ended_many: reads whether each of many apps has ended, in one call
        """
        with self._lock:
            fresh = time.monotonic() - self._read_at < self.interval
            if fresh and app_id in self._ended:
                return self._ended[app_id]
            ids = sorted({*self._followed, app_id})
            ended = ended_many(ids)
            self.reads += 1
            self._read_at = time.monotonic()
            self._ended.update(ended)
            return self._ended.get(app_id, True)
