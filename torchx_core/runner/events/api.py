"""The event recorded for a runner API call (``torchx.runner.events.api``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import Enum

__all__ = ["SourceType", "TorchxEvent"]


class SourceType(str, Enum):
    """Where an event comes from."""

    UNKNOWN = "<unknown>"
    INTERNAL = "INTERNAL"
    EXTERNAL = "EXTERNAL"


@dataclass
class TorchxEvent:
    """One runner API call: what was called, on which app, how long it took, how it failed.

    Args:
        session: the session that made the call
        scheduler: the scheduler it was made on
        api: the API name (``run``, ``cancel``, ...)
        app_id: the app's id
        app_image: the image the app runs
        app_metadata: the AppDef's metadata
        runcfg: the run config, serialized
        raw_exception: the traceback, when the call failed
        source: where the event comes from
        cpu_time_usec: CPU time of the call (microseconds)
        wall_time_usec: wall time of the call (microseconds)
        start_epoch_time_usec: when the call started (microseconds since the epoch)
        workspace: the workspace of the app
        exception_type: the exception's class, when the call failed
        exception_message: the exception's message
        exception_source_location: ``file:line`` where it was raised
    """

    session: str
    scheduler: str
    api: str
    app_id: str | None = None
    app_image: str | None = None
    app_metadata: dict[str, str] | None = None
    runcfg: str | None = None
    raw_exception: str | None = None
    source: SourceType = SourceType.UNKNOWN
    cpu_time_usec: int | None = None
    wall_time_usec: int | None = None
    start_epoch_time_usec: int | None = None
    workspace: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    exception_source_location: str | None = None

    def __str__(self) -> str:
        return self.serialize()

    @staticmethod
    def deserialize(data: str | TorchxEvent) -> TorchxEvent:
        """Reads an event back from :meth:`serialize`'s JSON (an event passes through)."""
        if isinstance(data, TorchxEvent):
            return data
        fields = json.loads(data)
        if "source" in fields:
            try:
                fields["source"] = SourceType(fields["source"])
            except ValueError:
                fields.pop("source")
        return TorchxEvent(**fields)

    def serialize(self) -> str:
        """The event as one JSON object."""
        return json.dumps(asdict(self))
