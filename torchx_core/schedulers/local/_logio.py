"""Reading replica logs: a fast reader for finished logs and a follower for running apps.

Lines end at ``\\n`` only (a ``\\r`` of a progress bar stays inside its line) and keep it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

from torchx_core.schedulers.local import _state

_CHUNK_HINT = 1 << 18  # bytes of whole lines per readlines() call


def read_lines(path: str) -> Iterator[str]:
    """All lines of ``path`` (nothing if it does not exist).

    ``readlines(hint)`` splits a chunk of lines in C and ``chain`` hands them out in C, so the
    per-line cost is a fraction of a Python generator's ``yield``.
    """
    return itertools.chain.from_iterable(_line_chunks(path))


def _line_chunks(path: str) -> Iterator[list[str]]:
    try:
        f = open(path, encoding="utf-8", errors="replace", newline="\n")  # noqa: SIM115
    except FileNotFoundError:
        return
    with f:
        while True:
            lines = f.readlines(_CHUNK_HINT)
            if not lines:
                return
            yield lines


def follow(path: str, app_dir: str) -> Iterator[str]:
    """Lines of ``path`` as they are written, until the app's supervisor has exited.

    Polls with a short backoff (2 ms doubling to 100 ms, reset whenever data arrives); the file
    may appear only once the replica writes its first byte.
    """
    delay = 0.002
    f = None
    pending = ""
    try:
        while True:
            done = not _state.supervisor_alive(app_dir)  # checked before reading: no lost tail
            if f is None:
                try:
                    f = open(path, encoding="utf-8", errors="replace", newline="\n")  # noqa: SIM115
                except FileNotFoundError:
                    if done:
                        return
            if f is not None:
                chunk = f.read(1 << 20)
                if chunk:
                    delay = 0.002
                    *lines, pending = (pending + chunk).split("\n")
                    for line in lines:
                        yield line + "\n"
                    continue
            if done:
                if pending:
                    yield pending
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    finally:
        if f is not None:
            f.close()
