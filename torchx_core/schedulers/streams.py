"""``Tee``: copies what is appended to some files into one output, in a background thread.

TorchX's ``torchx.schedulers.streams.Tee`` (its local scheduler builds a combined log with it;
this project's local supervisor writes the combined log itself, so nothing here uses it).
"""

from __future__ import annotations

import threading
from typing import BinaryIO

__all__ = ["Tee"]

_CHUNK = 1 << 16  # bytes read from a source per pass
_IDLE = 0.1  # seconds between passes that found nothing new


class Tee:
    """Appends every byte written to the files ``sources`` to ``out`` until :meth:`close`.

    Reading starts at the files' current beginning. ``close`` copies what is left, then closes
    the sources and ``out``; the order of bytes from different sources is arrival order.

    Args:
        out: a binary writer (e.g. ``open(path, "wb", buffering=0)``)
        sources: paths of existing files to follow (at least one)

    Raises:
        ValueError: no source was given.
    """

    def __init__(self, out: BinaryIO, *sources: str) -> None:
        if not sources:
            raise ValueError("Tee needs at least one source file to follow; got none")
        self.out = out
        self._lock = threading.Lock()  # one writer of `out` at a time
        self._sources = [open(path, "rb", buffering=0) for path in sources]  # noqa: SIM115
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._copy, name="torchx-tee", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        while True:
            # decided before the pass: a pass that started after close() and found nothing is
            # the last one, so bytes written just before close() are never lost
            last = self._closing.is_set()
            moved = False
            for src in self._sources:
                data = src.read(_CHUNK)
                if data:
                    moved = True
                    self.write(data)
            if not moved:
                if last:
                    return
                self._closing.wait(_IDLE)

    def write(self, data: bytes) -> int:
        """Writes ``data`` to ``out`` (between the copied chunks); returns what ``out`` returns."""
        with self._lock:
            return self.out.write(data)

    def close(self) -> None:
        """Copies what is left, stops the thread and closes the sources and ``out`` (idempotent)."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._thread.join()
        with self._lock:
            for src in self._sources:
                src.close()
            self.out.close()
