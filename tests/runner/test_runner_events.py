"""torchx_core.runner.events: TorchxEvent (de)serialization, record, log_event."""

from __future__ import annotations

import json
import logging

import pytest

from torchx_core.runner import events
from torchx_core.runner.events import SourceType, TorchxEvent, log_event, record
from torchx_core.runner.events.handlers import get_logging_handler


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> _Capture:
    cap = _Capture()
    monkeypatch.setitem(events.handlers._HANDLERS, "capture", cap)
    monkeypatch.setattr(events, "_loggers", {})
    return cap


def test_event_round_trip() -> None:
    ev = TorchxEvent(session="s", scheduler="local_cwd", api="run", app_id="a", source=SourceType.INTERNAL,
                     app_metadata={"k": "v"})
    data = json.loads(ev.serialize())
    assert data["source"] == "INTERNAL" and data["app_metadata"] == {"k": "v"}
    assert TorchxEvent.deserialize(ev.serialize()) == ev
    assert TorchxEvent.deserialize(ev) is ev
    odd = json.dumps({**data, "source": "nonsense"})
    assert TorchxEvent.deserialize(odd).source == SourceType.UNKNOWN


def test_record_goes_to_its_destination_only(captured: _Capture) -> None:
    record(TorchxEvent("s", "slurm", "cancel"), destination="capture")
    (msg,) = captured.messages
    assert json.loads(msg)["api"] == "cancel"
    with pytest.raises(ValueError, match="unknown events destination 'nope'; use one of"):
        get_logging_handler("nope")


def test_log_event_times_the_block_and_records_failures(captured: _Capture) -> None:
    with log_event("run", scheduler="local_cwd", app_id="app-1", destination="capture"):
        sum(range(1000))
    with pytest.raises(KeyError), log_event("status", app_id="x", destination="capture"):
        raise KeyError("gone")
    ok, failed = (TorchxEvent.deserialize(m) for m in captured.messages)
    assert ok.api == "run" and ok.raw_exception is None and ok.wall_time_usec is not None
    assert ok.start_epoch_time_usec and ok.start_epoch_time_usec > 1_600_000_000_000_000
    assert failed.exception_type == "KeyError" and "gone" in (failed.exception_message or "")
    assert "test_runner_events.py" in (failed.exception_source_location or "")
    assert "Traceback" in (failed.raw_exception or "")
