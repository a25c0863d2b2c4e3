"""``submit`` waits for the supervisor to start the replicas (TorchX: RUNNING right after)."""

from __future__ import annotations

import pytest

from torchx_core.schedulers.local import _launch, _state
from torchx_core.schedulers.local._layout import StatusDoc


def _doc(state: str) -> StatusDoc:
    return StatusDoc("a-bcdfghjklmnp", "a", state, [], created=0.0)


def _reads(monkeypatch: pytest.MonkeyPatch, states: list[str | None]) -> list[str]:
    """Makes ``read_status`` answer ``states`` in turn (None: no app); returns the calls."""
    calls: list[str] = []

    def read_status(app_dir: str, app_id: str | None = None) -> StatusDoc | None:
        calls.append(app_dir)
        state = states[min(len(calls), len(states)) - 1]
        return None if state is None else _doc(state)

    monkeypatch.setattr(_state, "read_status", read_status)
    monkeypatch.setattr(_launch.time, "sleep", lambda s: None)
    return calls


def test_waits_until_the_status_leaves_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _reads(monkeypatch, ["PENDING", "PENDING", "RUNNING"])
    assert _launch.wait_started("/d", "a-bcdfghjklmnp") == "RUNNING"
    assert len(calls) == 3


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_an_app_that_already_ended_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    # a supervisor that died before starting anything is read as FAILED
    calls = _reads(monkeypatch, ["PENDING", state])
    assert _launch.wait_started("/d", "a-bcdfghjklmnp") == state
    assert len(calls) == 2


def test_gives_up_after_the_timeout_leaving_the_app_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _reads(monkeypatch, ["PENDING"])
    assert _launch.wait_started("/d", "a-bcdfghjklmnp", timeout=0) == "PENDING"
    assert len(calls) == 1


def test_an_unreadable_or_missing_status_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    _reads(monkeypatch, [None])
    assert _launch.wait_started("/d", "a-bcdfghjklmnp") is None

    def corrupt(app_dir: str, app_id: str | None = None) -> StatusDoc | None:
        raise _state.CorruptAppStateError("bad status")

    monkeypatch.setattr(_state, "read_status", corrupt)
    assert _launch.wait_started("/d", "a-bcdfghjklmnp") is None
