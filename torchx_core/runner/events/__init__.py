"""Runner events through standard logging (``torchx.runner.events``).

Every :class:`~torchx_core.runner.Runner` call that TorchX records (``run``, ``dryrun``,
``schedule``, ``status``, ``wait``, ``cancel``, ``delete``, ``describe``, ``log_lines``,
``list``, ``run_component``) records one :class:`TorchxEvent` (as JSON) to the logger
``torchx-events-null``. That logger has only a ``NullHandler`` and does not propagate, so nothing
is recorded (and almost nothing is spent: no event is built) until a handler is attached::

    import logging

    logging.getLogger("torchx-events-null").addHandler(my_handler)  # receives each event's JSON

``record(event, destination)`` sends an event to the logger of ``destination`` (``"null"`` by
default, ``"console"`` for stderr); ``with log_event("run", ...):`` times a block and records it
when the block ends, with the exception if one was raised.
"""

from __future__ import annotations

import logging
import time
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

from torchx_core.runner.events.handlers import get_logging_handler
from torchx_core.util.lazy import lazy_exports
from torchx_core.util.session import get_session_id_or_create_new

if TYPE_CHECKING:
    from torchx_core.runner.events.api import SourceType, TorchxEvent

__all__ = [
    "SourceType",
    "TorchxEvent",
    "events_logger",
    "get_session_id_or_create_new",
    "is_recording",
    "log_event",
    "record",
]

logger: logging.Logger = logging.getLogger(__name__)

_loggers: dict[str, logging.Logger] = {}


# the event classes load on first use: their dataclass/json imports cost ~7 ms, which
# `import torchx_core.runner` (and the CLI) must not pay when no event is recorded
__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(("SourceType", "TorchxEvent"), "torchx_core.runner.events.api"),
    globals(),
    cache=False,
)


def events_logger(destination: str = "null") -> logging.Logger:
    """The logger events for ``destination`` go to (``torchx-events-<destination>``).

    It has the destination's handler, does not propagate (each event is handled once), and
    takes more handlers like any logger.

    Raises:
        ValueError: an unknown destination
    """
    logger = _loggers.get(destination)
    if logger is None:
        handler = get_logging_handler(destination)
        handler.setLevel(logging.DEBUG)
        logger = logging.getLogger(f"torchx-events-{destination}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        if handler not in logger.handlers:
            logger.addHandler(handler)
        _loggers[destination] = logger
    return logger


_get_or_create_logger = events_logger  # TorchX's name (its tests patch ``get_logging_handler``)


def is_recording(destination: str = "null") -> bool:
    """Whether an event sent to ``destination`` now would reach a handler that keeps it.

    ``NullHandler``s do not count; a filter on the logger does (it sees every event).
    """
    logger: logging.Logger | None = events_logger(destination)
    if not logger.isEnabledFor(logging.INFO):  # type: ignore[union-attr]
        return False
    while logger is not None:
        if logger.filters:
            return True
        for handler in logger.handlers:
            if not isinstance(handler, logging.NullHandler) and handler.level <= logging.INFO:
                return True
        logger = logger.parent if logger.propagate else None
    return False


def record(event: TorchxEvent, destination: str = "null") -> None:
    """Sends ``event`` (serialized) to ``destination``; skipped when nothing would receive it.

    Raises:
        ValueError: an unknown destination
    """
    if is_recording(destination):
        _send(event, destination)


_RECORD = record  # what `record` is unless a test replaced it (mock.patch(".events.record"))


def _recording(destination: str) -> bool:
    """Whether a :class:`log_event` builds its event: a handler keeps it, or ``record`` was
    replaced (TorchX users' tests patch ``torchx.runner.events.record`` to read the events)."""
    return record is not _RECORD or is_recording(destination)


class log_event:
    """Times the block it wraps and records a :class:`TorchxEvent` when it ends.

    The event (``session`` = this process's session id) is only built when a handler would
    receive it (:func:`is_recording`) or :func:`record` was replaced (a test patching it sees
    every event, as in TorchX); fill more fields inside the block with :meth:`fill`.

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
        self._destination = destination
        self.recording: bool = _recording(destination)
        self._event: TorchxEvent | None = None
        if self.recording:
            self.fill(
                api=api,
                scheduler=scheduler or "",
                app_id=app_id,
                app_image=app_image,
                app_metadata=app_metadata,
                runcfg=runcfg,
                workspace=workspace,
            )
        self._cpu = 0
        self._wall = 0

    @property
    def _torchx_event(self) -> TorchxEvent:
        """The event being built (TorchX's name for it), created on first access."""
        if self._event is None:
            from torchx_core.runner.events.api import TorchxEvent

            self._event = TorchxEvent(session=get_session_id_or_create_new(), scheduler="", api="")
        return self._event

    def fill(self, **fields: Any) -> None:
        """Sets fields of the event (e.g. ``app_id=...`` once the app is submitted)."""
        event = self._torchx_event
        for name, value in fields.items():
            setattr(event, name, value)

    def __enter__(self) -> log_event:
        if self.recording:
            self._cpu = time.process_time_ns()
            self._wall = time.perf_counter_ns()
            self._torchx_event.start_epoch_time_usec = time.time_ns() // 1000
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.recording:
            return
        ev = self._torchx_event
        ev.cpu_time_usec = (time.process_time_ns() - self._cpu) // 1000
        ev.wall_time_usec = (time.perf_counter_ns() - self._wall) // 1000
        if exc is not None:
            ev.raw_exception = "".join(traceback.format_exception(exc_type, exc, tb))
            ev.exception_type = type(exc).__name__
            ev.exception_message = str(exc)
            last = traceback.extract_tb(tb)[-1] if tb is not None else None
            if last is not None:  # as TorchX: where it was raised, as a JSON object
                import json

                ev.exception_source_location = json.dumps(
                    {"filename": last.filename, "lineno": last.lineno, "name": last.name}
                )
        record(ev, self._destination)


def _send(event: TorchxEvent, destination: str) -> None:
    try:
        serialized = event.serialize()
    except Exception:  # recording must never break the call it records
        logger.warning("cannot serialize the %s event; not recorded", event.api, exc_info=True)
        return
    events_logger(destination).info(serialized)
