"""Replica logs for the app lifecycle: which replicas, following them, what to say when capped.

Public names are re-exported by :mod:`torchx_core.runner.lifecycle`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from torchx_core.runner._status_read import read_status
from torchx_core.specs import AppState, AppStatus, replica_pairs
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.schedulers.api import Stream

logger: logging.Logger = logging.getLogger(__name__)

#: Errors that retrying cannot fix (a bad regex, an unknown app, a backend without logs): the
#: stream ends at once and the error is kept in ``LogFollower.errors``.
_FINAL_ERRORS = (TorchXError, NotImplementedError)


def replicas_of(runner: Runner, app_handle: str, status: AppStatus | None) -> list[tuple[str, int]]:
    """``(role, replica index)`` pairs of an app, failed replicas first.

    From ``status`` when it lists replicas, else from the app's roles (``Runner.describe``).
    """
    if status is not None and any(role.replicas for role in status.roles):
        failed: list[tuple[str, int]] = []
        others: list[tuple[str, int]] = []
        for role in status.roles:
            for rep in role.replicas:
                (failed if rep.state == AppState.FAILED else others).append((role.role, rep.id))
        return failed + others
    app = runner.describe(app_handle)
    if app is None:
        return []
    return replica_pairs(app)


def more_replicas(app_handle: str, shown: int, total: int) -> str:
    return (
        f"(showing {shown} of {total} replicas; read the others with"
        f" `torchx log {app_handle}/<role>/<k>`)"
    )


def _default_format(role: str, k: int, line: str) -> str:
    return f"[{role}/{k}] {line.rstrip(chr(10))}"


def replica_key(role: str, k: int) -> str:
    """``"role/k"``: how :meth:`LogFollower.positions` and ``start_at`` name a replica."""
    return f"{role}/{k}"


class LogFollower:
    """Streams replica logs into ``sink`` from daemon threads (one per replica).

    Every line of every streamed replica reaches ``sink`` exactly once, whether the app is
    still running or already ended when :meth:`start` is called: a stream ends only once it has
    read the log to its end after the app ended. At most ``max_replicas`` replicas are streamed
    (failed ones first); when there are more, ``sink`` first gets a line saying how to read the
    others. A stream that breaks (e.g. the log does not exist yet) is reopened after
    ``retry_interval`` and skips the lines it already gave, until the app ends; errors retrying
    cannot fix (a ``TorchXError`` such as a bad regex or an unknown app, a backend without logs)
    end the stream at once. Errors that ended streams are kept in :attr:`errors`.

    One engine log followed in several parts (an Airflow task that waits on a worker, defers
    and resumes) hands :meth:`positions` of the first follower, once stopped, to the next one as
    ``start_at``: together they give each line once. ``skip_existing`` instead starts each
    replica at its current end (for a log that already got the lines by other means).

    Args:
        runner: reads the logs (``Runner.log_lines``) and the status
        app_handle: the app
        sink: receives each line, formatted by ``format_line`` (default ``[role/k] line``)
        max_replicas: the most replicas streamed (None: all)
        skip_existing: do not give the lines written before :meth:`start`
        start_at: lines already given per replica (``{"role/k": n}``, from :meth:`positions`);
            those are skipped
        replicas: the ``(role, k)`` pairs to stream (default: every replica of the app)
        regex: only lines matching this regular expression
        streams: stdout, stderr or combined (scheduler default if None)
        format_line: ``(role, k, raw line with its newline) -> what sink receives``
        retry_interval: seconds before a broken stream is reopened
    """

    def __init__(
        self,
        runner: Runner,
        app_handle: str,
        sink: Callable[[str], None],
        *,
        max_replicas: int | None = 16,
        skip_existing: bool = False,
        start_at: Mapping[str, int] | None = None,
        replicas: Iterable[tuple[str, int]] | None = None,
        regex: str | None = None,
        streams: Stream | None = None,
        format_line: Callable[[str, int, str], str] | None = None,
        retry_interval: float = 0.5,
    ) -> None:
        self.runner = runner
        self.app_handle = app_handle
        self.sink = sink
        self.max_replicas = max_replicas
        self.skip_existing = skip_existing
        self.start_at = dict(start_at or {})
        self.replicas = list(replicas) if replicas is not None else None
        self.regex = regex
        self.streams = streams
        self.format_line = format_line or _default_format
        self.retry_interval = retry_interval
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._started = False
        self._lock = threading.Lock()
        # held while a line is given (closed check, count, sink), so that after close() no line
        # is given and positions() is exact
        self._emit_lock = threading.Lock()
        self._given: dict[str, int] = {}
        self._progress = time.monotonic()  # when a stream last gave a line

    def start(self) -> None:
        """Starts one thread per replica (again: no-op)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        try:
            pairs = self.replicas
            if pairs is None:
                pairs = replicas_of(self.runner, self.app_handle, self._status())
        except Exception as e:  # noqa: BLE001 - logs are best effort; the status decides
            logger.warning("cannot stream the logs of %s: %s", self.app_handle, e)
            return
        if self.max_replicas is not None and len(pairs) > self.max_replicas:
            self._emit(more_replicas(self.app_handle, self.max_replicas, len(pairs)))
            pairs = pairs[: self.max_replicas]
        # the existing lines are counted here, so every line written after start() is given
        for role, k in pairs:
            key = replica_key(role, k)
            self._given[key] = (
                self._existing(role, k) if self.skip_existing else int(self.start_at.get(key, 0))
            )
        ctx = contextvars.copy_context()  # e.g. Prefect's run context, for its logger
        for role, k in pairs:
            thread = threading.Thread(
                target=ctx.copy().run,
                args=(self._pump, role, k),
                name=f"torchx-log-{role}-{k}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Lets the streams drain, then closes them: no line is given after this returns.

        Streams that still give lines are waited for however long that takes (a long log is
        given whole); the streams are closed once none gave a line for ``timeout`` seconds.
        """
        called = time.monotonic()
        while True:
            idle_from = max(self._progress, called)
            for thread in self._threads:
                thread.join(max(0.0, idle_from + timeout - time.monotonic()))
            if not any(t.is_alive() for t in self._threads):
                break
            if time.monotonic() - max(self._progress, called) >= timeout:
                if timeout > 0:  # 0: closed on purpose (e.g. before a deferral)
                    logger.warning(
                        "log streams of %s gave no line for %g s: closed", self.app_handle, timeout
                    )
                break
        with self._emit_lock:
            self._closed.set()

    def positions(self) -> dict[str, int]:
        """How many lines of each streamed replica were given so far (``{"role/k": n}``,
        including ``start_at``); exact once :meth:`stop` returned. Pass it as ``start_at`` to the
        follower that continues the same log."""
        with self._emit_lock:
            return dict(self._given)

    def join(self, timeout: float | None = None) -> bool:
        """Waits for every stream to end by itself (the app ended); True if all did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _emit(self, text: str) -> None:
        try:
            self.sink(text)
        except Exception as e:  # noqa: BLE001 - a broken sink must not stop the other streams
            logger.warning("log sink of %s failed: %s", self.app_handle, e)

    def _lines(self, role: str, k: int, tail: bool) -> Iterable[str]:
        return self.runner.log_lines(
            self.app_handle, role, k, regex=self.regex, should_tail=tail, streams=self.streams
        )

    def _status(self) -> AppStatus | None:
        # shared with the other followers and watchers of this scheduler in the process (a flow
        # of many tasks, each following several replicas): one batched read per retry interval
        return read_status(self.runner, self.app_handle, max_age=self.retry_interval)

    def _app_done(self) -> bool:
        try:
            status = self._status()
        except Exception:  # noqa: BLE001 - unreadable: keep trying
            return False
        return status is None or status.is_terminal()

    def _existing(self, role: str, k: int) -> int:
        """How many lines the replica's log has now (0 if it has none yet)."""
        try:
            return sum(1 for _ in self._lines(role, k, tail=False))
        except Exception as e:  # noqa: BLE001 - no log yet: nothing to skip
            logger.debug("no existing log for %s/%s: %s", role, k, e)
            return 0

    def _give(self, key: str, role: str, k: int, line: str) -> bool:
        """Gives one line (False: the follower is closed, nothing given)."""
        with self._emit_lock:
            if self._closed.is_set():
                return False
            self._given[key] += 1
            self._progress = time.monotonic()
            self._emit(self.format_line(role, k, line))
            return True

    def _pump(self, role: str, k: int) -> None:
        key = replica_key(role, k)
        while not self._closed.is_set():
            # read before the log: a stream read to its end after the app ended has every line
            done_before = self._app_done()
            try:
                seen = 0
                for line in self._lines(role, k, tail=True):
                    seen += 1
                    if seen <= self._given[key]:
                        continue
                    if not self._give(key, role, k, line):
                        return
                if done_before:
                    return
                if self._app_done():
                    continue  # read once more, to the end: lines written just before it ended
            except Exception as e:  # noqa: BLE001 - retried until the app ended
                if done_before or isinstance(e, _FINAL_ERRORS):
                    logger.debug("log stream %s/%s of %s ended: %s", role, k, self.app_handle, e)
                    self.errors.append(e)
                    return
            self._closed.wait(self.retry_interval)
