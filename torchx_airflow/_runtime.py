"""Runner-side helpers shared by the operator, trigger and sensor (no Airflow imports).

Only the public ``torchx_core.specs`` and ``torchx_core.runner`` API is used.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from torchx_core.specs import AppState, AppStatus, is_terminal

if TYPE_CHECKING:
    from torchx_core.runner import Runner

logger: logging.Logger = logging.getLogger(__name__)

#: Builds a Runner; the default is ``torchx_core.runner.get_runner()``.
RunnerFactory = Callable[[], "Runner"]

#: The longest app name prefix kept before the identity digest (schedulers add their own suffix).
_MAX_BASE_LEN = 40
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")

#: At most this many replicas are streamed or tailed into the task log.
MAX_LOG_REPLICAS = 16
#: How long the log streams may take to drain after the app ended (streams end with the app).
STREAM_DRAIN_TIMEOUT_S = 15.0


def default_runner_factory() -> Runner:
    """Returns ``torchx_core.runner.get_runner()`` (imported lazily)."""
    from torchx_core.runner import get_runner

    return get_runner()


@contextmanager
def open_runner(factory: RunnerFactory | None) -> Iterator[Runner]:
    """Opens a Runner from ``factory`` (default: ``get_runner()``) and closes it afterwards."""
    runner = (factory or default_runner_factory)()
    try:
        yield runner
    finally:
        close = getattr(runner, "close", None)
        if callable(close):
            close()


def status_payload(app_handle: str, status: AppStatus | None) -> dict[str, Any]:
    """The JSON-able dict form of a status (``state`` ``"VANISHED"`` when ``status`` is None).

    Keys: ``app_handle``, ``state``, ``num_restarts``, ``msg``, ``structured_error_msg``,
    ``ui_url``, ``roles``.
    """
    if status is None:
        return {
            "app_handle": app_handle,
            "state": "VANISHED",
            "num_restarts": 0,
            "msg": "the scheduler does not know this app (any more)",
            "structured_error_msg": "<NONE>",
            "ui_url": None,
            "roles": [],
        }
    return {"app_handle": app_handle, **status.to_json()}


def status_from_payload(payload: dict[str, Any]) -> AppStatus | None:
    """Reverses :py:func:`status_payload` (None for a vanished app)."""
    if payload.get("state") == "VANISHED":
        return None
    data = {k: v for k, v in payload.items() if k != "app_handle"}
    return AppStatus.from_json(data)


def deterministic_app_name(
    base: str, *, dag_id: str, task_id: str, run_id: str, map_index: int = -1
) -> str:
    """Names an app from the Airflow task identity, the same on every try of that task.

    The result is ``<base>-<10 hex digits>``: ``base`` (the AppDef's name, sanitized to
    ``[A-Za-z0-9_-]`` and cut to 40 characters) plus a digest of ``dag_id``, ``task_id``,
    ``run_id`` and ``map_index``.

    >>> deterministic_app_name("train", dag_id="d", task_id="t", run_id="r")
    'train-e1b0369d8c'
    """
    identity = "\x1f".join([dag_id, task_id, run_id, str(map_index)])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
    clean = _NAME_CHARS.sub("-", base).strip("-")[:_MAX_BASE_LEN].strip("-") or "app"
    return f"{clean}-{digest}"


def find_app_by_name(
    runner: Runner, scheduler: str, name: str
) -> tuple[str, AppStatus | None] | None:
    """Finds a live or succeeded app named ``name`` on ``scheduler`` (for reattaching).

    Returns ``(app_handle, status)`` for a running (non-terminal) app first, else for a
    succeeded one, else None. Failed and cancelled apps are ignored: they get resubmitted.
    """
    matches = [r for r in runner.list(scheduler) if r.name == name]
    live = [r for r in matches if not is_terminal(r.state)]
    done = [r for r in matches if r.state == AppState.SUCCEEDED]
    for resp in live + done:
        status = runner.status(resp.app_handle)
        if status is not None and status.state != AppState.FAILED:
            return resp.app_handle, status
    return None


def replicas_of(runner: Runner, app_handle: str, status: AppStatus | None) -> list[tuple[str, int]]:
    """``(role, replica_id)`` pairs of an app: failed replicas first, then the others."""
    pairs: list[tuple[str, int]] = []
    failed: list[tuple[str, int]] = []
    if status is not None and status.roles:
        for role in status.roles:
            for rep in role.replicas:
                target = failed if rep.state == AppState.FAILED else pairs
                target.append((role.role, rep.id))
    else:
        app = runner.describe(app_handle)
        if app is not None:
            pairs = [(r.name, i) for r in app.roles for i in range(r.num_replicas)]
    return failed + pairs


def tail_logs(
    runner: Runner, app_handle: str, status: AppStatus | None, lines: int
) -> list[tuple[str, int, list[str]]]:
    """The last ``lines`` log lines of each replica (failed ones first, at most 16 replicas).

    Errors reading logs are logged and skipped: a log tail never fails the task.
    """
    if lines <= 0:
        return []
    out: list[tuple[str, int, list[str]]] = []
    for role, replica in replicas_of(runner, app_handle, status)[:MAX_LOG_REPLICAS]:
        try:
            tail = deque(
                (ln.rstrip("\n") for ln in runner.log_lines(app_handle, role, replica)),
                maxlen=lines,
            )
        except Exception as e:  # noqa: BLE001 - best effort: logs must never fail the task
            logger.warning("cannot read logs of %s %s/%s: %s", app_handle, role, replica, e)
            continue
        out.append((role, replica, list(tail)))
    return out


class LogStreamer:
    """Streams the replicas' logs (``should_tail=True``) into ``emit`` from daemon threads.

    Args:
        runner_factory: builds the Runner the threads read with (one per streamer)
        app_handle: the app whose logs to stream
        emit: receives each line, prefixed ``[role/replica]``
    """

    def __init__(
        self, runner_factory: RunnerFactory | None, app_handle: str, emit: Callable[[str], None]
    ) -> None:
        self._factory = runner_factory
        self._handle = app_handle
        self._emit = emit
        self._threads: list[threading.Thread] = []
        self._runner: Runner | None = None

    def start(self, status: AppStatus | None) -> None:
        """Starts one thread per replica (at most 16)."""
        try:
            self._runner = (self._factory or default_runner_factory)()
            replicas = replicas_of(self._runner, self._handle, status)
        except Exception as e:  # noqa: BLE001 - streaming is best effort
            logger.warning("cannot stream logs of %s: %s", self._handle, e)
            return
        if len(replicas) > MAX_LOG_REPLICAS:
            self._emit(
                f"streaming the logs of {MAX_LOG_REPLICAS} of {len(replicas)} replicas;"
                f" read the others with `torchx log {self._handle}`"
            )
        for role, replica in replicas[:MAX_LOG_REPLICAS]:
            t = threading.Thread(
                target=self._pump,
                args=(role, replica),
                name=f"torchx-log-{role}-{replica}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)

    def _pump(self, role: str, replica: int) -> None:
        assert self._runner is not None  # set in start() before any thread runs
        try:
            for line in self._runner.log_lines(self._handle, role, replica, should_tail=True):
                self._emit(f"[{role}/{replica}] {line.rstrip()}")
        except Exception as e:  # noqa: BLE001 - streaming is best effort
            logger.warning("log stream of %s %s/%s stopped: %s", self._handle, role, replica, e)

    def stop(self, timeout: float = STREAM_DRAIN_TIMEOUT_S) -> None:
        """Waits (bounded) for the streams to drain after the app ended."""
        for t in self._threads:
            t.join(timeout)
        runner, self._runner = self._runner, None
        if runner is not None and not any(t.is_alive() for t in self._threads):
            close = getattr(runner, "close", None)
            if callable(close):
                close()


def _bounded(
    what: str, call: Callable[[Runner], None], factory: RunnerFactory | None, timeout: float
) -> bool:
    """Runs ``call`` with a fresh Runner in a helper thread, waiting at most ``timeout`` s."""
    done: dict[str, bool] = {}

    def _run() -> None:
        try:
            with open_runner(factory) as runner:
                call(runner)
            done["ok"] = True
        except Exception as e:  # noqa: BLE001 - best effort, reported below
            logger.warning("cancelling %s failed: %s", what, e)

    t = threading.Thread(target=_run, name="torchx-cancel", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        logger.warning("cancelling %s did not finish within %.0f s", what, timeout)
    return done.get("ok", False)


def cancel_bounded(runner_factory: RunnerFactory | None, app_handle: str, timeout: float) -> bool:
    """Cancels an app from a helper thread, waiting at most ``timeout`` seconds.

    Safe to call from a signal handler or while another thread uses a Runner: it opens its own.
    Returns True if the cancel call finished in time without raising.
    """
    return _bounded(app_handle, lambda r: r.cancel(app_handle), runner_factory, timeout)


def cancel_by_name_bounded(
    runner_factory: RunnerFactory | None, scheduler: str, name: str, timeout: float
) -> bool:
    """Cancels every unfinished app named ``name`` on ``scheduler`` (bounded like
    :py:func:`cancel_bounded`): for a kill that interrupted the submission of that app."""

    def _cancel(runner: Runner) -> None:
        for resp in runner.list(scheduler):
            if resp.name == name and not is_terminal(resp.state):
                logger.info("cancelling %s (named %s)", resp.app_handle, name)
                runner.cancel(resp.app_handle)

    return _bounded(f"apps named {name}", _cancel, runner_factory, timeout)
