"""Copy an app's logs into a stream of one's own (``torchx.util.log_tee_helpers``).

For programs that wrap the Runner API and want ``torchx log``'s output in their own output::

    thread = tee_logs(sys.stderr, app_handle, regex=None, runner=runner, should_tail=True)
    thread.start()
    ...
    thread.join()

Every replica of every role is read by its own thread; each line is written prefixed with
``role/replica`` (green with ``colorize``). The runner is passed in: nothing of torchx_core is
imported here.
"""

from __future__ import annotations

import logging
import threading
from queue import Queue
from typing import Any, TextIO

__all__ = ["tee_logs"]

logger: logging.Logger = logging.getLogger(__name__)

_GREEN = "\033[32m"
_ENDC = "\033[0m"


def _prefixed(prefix: str, line: str) -> str:
    """``prefix`` on every visual line of ``line`` (``\\r`` progress updates included)."""
    body = line.replace("\r", "\r" + prefix).replace("\n", "\n" + prefix)
    return body if body.startswith("\r") else prefix + body


def _tee_replica(
    dst: TextIO,
    runner: Any,
    app_handle: str,
    role: str,
    replica: int,
    regex: str | None,
    should_tail: bool,
    streams: Any,
    colorize: bool,
    errors: Queue[Exception],
) -> None:
    tag = f"{role}/{replica}"
    prefix = f"{_GREEN}{tag}{_ENDC} " if colorize else f"{tag} "
    try:
        for line in runner.log_lines(
            app_handle, role, replica, regex, should_tail=should_tail, streams=streams
        ):
            print(_prefixed(prefix, line.strip()), file=dst, flush=True)
    except Exception as e:  # noqa: BLE001 - collected, raised by the parent thread
        errors.put(e)


def _start_threads_to_monitor_role_replicas(
    dst: TextIO,
    app_handle: str,
    regex: str | None,
    runner: Any,
    should_tail: bool = False,
    streams: Any = None,
    colorize: bool = False,
) -> None:
    """Reads every replica of the app in its own thread and waits for them; the first error of
    any replica is raised after all have ended (the others are logged).

    Raises:
        LookupError: the runner does not know the app.
    """
    app = runner.describe(app_handle)
    if app is None:
        raise LookupError(f"app {app_handle} is unknown to the runner; check the handle")
    errors: Queue[Exception] = Queue()
    threads = [
        threading.Thread(
            target=_tee_replica,
            args=(dst, runner, app_handle, role.name, k, regex, should_tail, streams, colorize),
            kwargs={"errors": errors},
            daemon=True,
        )
        for role in app.roles
        for k in range(role.num_replicas)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = [errors.get() for _ in range(errors.qsize())]
    for e in found[1:]:
        logger.error("%s", e)
    if found:
        raise found[0]


def tee_logs(
    dst: TextIO,
    app_handle: str,
    regex: str | None,
    runner: Any,
    should_tail: bool = False,
    streams: Any = None,
    colorize: bool = False,
) -> threading.Thread:
    """A thread (not started) that copies the logs of every replica of the app to ``dst``.

    Args:
        dst: where the lines go
        app_handle: the app (``runner.run(...)``'s handle)
        regex: only lines matching it
        runner: the Runner that knows the app
        should_tail: follow the logs until the app ends (else: what is there now)
        streams: ``Stream.STDOUT``/``STDERR``/``COMBINED`` (default: the scheduler's)
        colorize: green ``role/replica`` prefixes
    """
    return threading.Thread(
        target=_start_threads_to_monitor_role_replicas,
        kwargs={
            "dst": dst,
            "runner": runner,
            "app_handle": app_handle,
            "regex": regex,
            "should_tail": should_tail,
            "streams": streams,
            "colorize": colorize,
        },
        daemon=True,
    )
