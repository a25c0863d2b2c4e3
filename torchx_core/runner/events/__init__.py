"""Runner events through standard logging (``torchx.runner.events``).

``record(event, destination)`` sends a :class:`TorchxEvent` (as JSON) to the logger of that
destination (``"null"`` by default, ``"console"`` for stderr); ``with log_event("run", ...):``
times a call and records it when the block ends, with the exception if one was raised::

    from torchx_core.runner.events import log_event

    with log_event("run", scheduler="local_cwd", app_id=app_id) as ev:
        ...
"""

from __future__ import annotations

import logging
import time
import traceback
from types import TracebackType

from torchx_core.runner.events.api import SourceType, TorchxEvent
from torchx_core.runner.events.handlers import get_logging_handler

__all__ = ["SourceType", "TorchxEvent", "log_event", "record"]

_loggers: dict[str, logging.Logger] = {}


def _logger(destination: str) -> logging.Logger:
    logger = _loggers.get(destination)
    if logger is None:
        handler = get_logging_handler(destination)
        handler.setLevel(logging.DEBUG)
        logger = logging.getLogger(f"torchx-events-{destination}")
        logger.propagate = False  # each event is handled once, by its destination
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        _loggers[destination] = logger
    return logger


def record(event: TorchxEvent, destination: str = "null") -> None:
    """Sends ``event`` (serialized) to ``destination``.

    Raises:
        ValueError: an unknown destination
    """
    _logger(destination).info(event.serialize())


class log_event:
    """Times the block it wraps and records a :class:`TorchxEvent` when it ends.

    Args:
        api: the API name
        scheduler: the scheduler name
        app_id: the app id
        app_image: the app's image
        app_metadata: the AppDef's metadata
        runcfg: the run config, serialized
        workspace: the workspace
        destination: where the event is recorded (see :func:`record`)
    """

    def __init__(
        self,
        api: str,
        scheduler: str | None = None,
        app_id: str | None = None,
        app_image: str | None = None,
        app_metadata: dict[str, str] | None = None,
        runcfg: str | None = None,
        workspace: str | None = None,
        destination: str = "null",
    ) -> None:
        self._torchx_event = TorchxEvent(
            session=app_id or "",
            scheduler=scheduler or "",
            api=api,
            app_id=app_id,
            app_image=app_image,
            app_metadata=app_metadata,
            runcfg=runcfg,
            workspace=workspace,
        )
        self._destination = destination
        self._cpu = 0
        self._wall = 0

    def __enter__(self) -> log_event:  # noqa: PYI034 - a plain class, not subclassed
        self._cpu = time.process_time_ns()
        self._wall = time.perf_counter_ns()
        self._torchx_event.start_epoch_time_usec = int(time.time() * 1_000_000)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ev = self._torchx_event
        ev.cpu_time_usec = (time.process_time_ns() - self._cpu) // 1000
        ev.wall_time_usec = (time.perf_counter_ns() - self._wall) // 1000
        if exc is not None:
            ev.raw_exception = "".join(traceback.format_exception(exc_type, exc, tb))
            ev.exception_type = type(exc).__name__
            ev.exception_message = str(exc)
            last = traceback.extract_tb(tb)[-1] if tb is not None else None
            if last is not None:
                ev.exception_source_location = f"{last.filename}:{last.lineno}"
        record(ev, self._destination)
