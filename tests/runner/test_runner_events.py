"""torchx_core.runner.events: TorchxEvent (de)serialization, record, log_event, and the events
the Runner records on its own calls (fake scheduler, and one real local_cwd run)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_scheduler import JobTable, make_runner

from torchx_core.runner import Runner, events
from torchx_core.runner.events import SourceType, TorchxEvent, log_event, record
from torchx_core.runner.events.handlers import get_logging_handler
from torchx_core.specs import AppDef, AppState, Role, UnknownAppException
from torchx_core.util import session


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
    ev = TorchxEvent(
        session="s",
        scheduler="local_cwd",
        api="run",
        app_id="a",
        source=SourceType.INTERNAL,
        app_metadata={"k": "v"},
    )
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


# -- the Runner records its calls (as TorchX's Runner does) -----------------------------------

SESSION = "sess-7f3a"


@pytest.fixture
def user_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Capture]:
    """What a user does: attach a handler to the ``torchx-events-null`` logger."""
    monkeypatch.setenv(session.TORCHX_INTERNAL_SESSION_ID, SESSION)
    monkeypatch.setattr(session, "CURRENT_SESSION_ID", None)
    cap = _Capture()
    logger = logging.getLogger("torchx-events-null")
    logger.addHandler(cap)
    try:
        yield cap
    finally:
        logger.removeHandler(cap)


def _events(cap: _Capture) -> list[TorchxEvent]:
    evs = [TorchxEvent.deserialize(m) for m in cap.messages]
    cap.messages.clear()
    return evs


def _app() -> AppDef:
    role = Role(name="trainer", image="img:1", entrypoint="echo", args=["hi"])
    return AppDef(name="echo", roles=[role], metadata={"team": "ml"})


def _check_common(ev: TorchxEvent, since_usec: int) -> None:
    assert ev.session == SESSION and ev.source == SourceType.UNKNOWN
    assert isinstance(ev.cpu_time_usec, int) and ev.cpu_time_usec >= 0
    assert isinstance(ev.wall_time_usec, int) and ev.wall_time_usec >= 0
    assert ev.start_epoch_time_usec is not None
    assert since_usec <= ev.start_epoch_time_usec <= time.time_ns() // 1000


def _ok(ev: TorchxEvent, since_usec: int, **fields: Any) -> None:
    _check_common(ev, since_usec)
    expected = {
        "app_image": None,
        "app_metadata": None,
        "runcfg": None,
        "workspace": None,
        **fields,
    }
    assert {k: getattr(ev, k) for k in expected} == expected
    assert (
        ev.raw_exception,
        ev.exception_type,
        ev.exception_message,
        ev.exception_source_location,
    ) == (None, None, None, None)


def _failed(ev: TorchxEvent, since_usec: int, exc: BaseException, **fields: Any) -> None:
    _check_common(ev, since_usec)
    assert {k: getattr(ev, k) for k in fields} == fields
    assert ev.exception_type == type(exc).__name__
    assert ev.exception_message == str(exc)
    assert ev.raw_exception is not None and ev.raw_exception.startswith("Traceback")
    assert ev.raw_exception.rstrip().endswith(f"{type(exc).__name__}: {exc}")
    loc = json.loads(ev.exception_source_location or "{}")
    assert set(loc) == {"filename", "lineno", "name"} and isinstance(loc["lineno"], int)


def _now() -> int:
    return time.time_ns() // 1000


def test_run_records_dryrun_schedule_and_run(user_handler: _Capture) -> None:
    runner = make_runner(JobTable())
    t0 = _now()
    handle = runner.run(_app(), "fake", cfg={"queue": "gpu"})
    assert handle == "fake://test/echo-0"
    dryrun, schedule, run = _events(user_handler)
    _ok(
        dryrun,
        t0,
        api="dryrun",
        scheduler="fake",
        app_id="echo",
        app_image="img:1",
        app_metadata={"team": "ml"},
        runcfg='{"queue": "gpu"}',
        workspace="None",
    )
    _ok(
        schedule,
        t0,
        api="schedule",
        scheduler="fake",
        app_id="echo-0",
        app_image="img:1",
        app_metadata={"team": "ml"},
        runcfg=schedule.runcfg,
    )
    assert json.loads(schedule.runcfg or "") == {
        "queue": "gpu",
        "priority": 0,
        "tags": None,
        "api_token": None,
    }
    _ok(
        run,
        t0,
        api="run",
        scheduler="fake",
        app_id="echo-0",
        app_image="img:1",
        app_metadata={"team": "ml"},
        runcfg='{"queue": "gpu"}',
        workspace="None",
    )
    assert run.wall_time_usec >= schedule.wall_time_usec  # type: ignore[operator]


def test_run_failure_records_the_exception(user_handler: _Capture) -> None:
    runner = make_runner(JobTable())
    t0 = _now()
    with pytest.raises(Exception) as info:
        runner.run(_app(), "nope")
    dryrun, run = _events(user_handler)
    assert type(info.value).__name__ == "UnknownSchedulerException"
    _failed(
        dryrun,
        t0,
        info.value,
        api="dryrun",
        scheduler="nope",
        app_id=None,
        runcfg=None,
        workspace="None",
    )
    _failed(run, t0, info.value, api="run", scheduler="nope", app_id=None, app_image=None)


def test_run_component_records_its_event(user_handler: _Capture) -> None:
    runner = make_runner(JobTable())
    t0 = _now()
    handle = runner.run_component("utils.echo", ["--msg", "hi"], "fake")
    app_id = handle.rpartition("/")[2]
    dryrun, schedule, run_component = _events(user_handler)
    assert (dryrun.api, schedule.api) == ("dryrun", "schedule")
    _ok(
        run_component,
        t0,
        api="run_component",
        scheduler="fake",
        app_id=app_id,
        app_image=schedule.app_image,
        app_metadata={},
        workspace="None",
    )
    assert schedule.app_id == app_id
    with pytest.raises(Exception) as info:
        runner.run_component("utils.no_such_component", [], "fake")
    (failed,) = _events(user_handler)
    _failed(failed, t0, info.value, api="run_component", scheduler="fake", app_id=None)


def test_app_calls_record_scheduler_and_app_id(user_handler: _Capture) -> None:
    table = JobTable()
    table.hold = True  # the app stays RUNNING until cancelled
    runner = make_runner(table)
    handle = runner.run(_app(), "fake")
    table.set_state("echo-0", AppState.RUNNING)
    _events(user_handler)
    t0 = _now()
    expected = {"scheduler": "fake", "app_id": "echo-0"}

    assert runner.status(handle).state == AppState.RUNNING  # type: ignore[union-attr]
    (status,) = _events(user_handler)
    _ok(status, t0, api="status", **expected)

    assert runner.describe(handle) is not None
    (describe,) = _events(user_handler)
    _ok(describe, t0, api="describe", **expected)

    assert "".join(runner.log_lines(handle, "trainer")).startswith("trainer 0 line 0")
    status, log_lines = _events(user_handler)
    _ok(status, t0, api="status", **expected)
    _ok(log_lines, t0, api="log_lines", **expected)

    assert [a.app_handle for a in runner.list("fake")] == [handle]
    (listed,) = _events(user_handler)
    _ok(listed, t0, api="list", scheduler="fake", app_id=None)
    assert logging.getLogger("torchx-events-null").propagate is False

    runner.cancel(handle)
    status, cancel = _events(user_handler)
    _ok(status, t0, api="status", **expected)
    _ok(cancel, t0, api="cancel", **expected)
    assert table.job("echo-0").state == AppState.CANCELLED

    assert runner.wait(handle, wait_interval=0.01).state == AppState.CANCELLED  # type: ignore[union-attr]
    *statuses, wait = _events(user_handler)
    assert [s.api for s in statuses] == ["status"] * len(statuses) and statuses
    _ok(wait, t0, api="wait", **expected)

    runner.delete(handle)
    (delete,) = _events(user_handler)
    _ok(delete, t0, api="delete", **expected)
    assert "echo-0" not in table.jobs


def test_app_call_failures_record_the_exception(user_handler: _Capture) -> None:
    table = JobTable()
    runner = make_runner(table)
    handle = runner.run(_app(), "fake")
    fresh = make_runner(table)  # no cached AppDef: describe asks the scheduler
    _events(user_handler)
    boom = RuntimeError("describe failed: scheduler unreachable")
    table.describe_error = boom
    table.list_error = RuntimeError("list failed: scheduler unreachable")
    t0 = _now()
    expected = {"scheduler": "fake", "app_id": "echo-0"}

    for call, apis in [
        (lambda: runner.status(handle), ["status"]),
        (lambda: fresh.describe(handle), ["describe"]),
        (lambda: runner.log_lines(handle, "trainer"), ["status", "log_lines"]),
        (lambda: runner.cancel(handle), ["status", "cancel"]),
        (lambda: runner.wait(handle, wait_interval=0.01), ["status", "wait"]),
        (lambda: runner.delete(handle), ["delete"]),
    ]:
        with pytest.raises(RuntimeError) as info:
            call()
        assert info.value is boom
        evs = _events(user_handler)
        assert [e.api for e in evs] == apis
        for ev in evs:
            _failed(ev, t0, boom, **expected)

    with pytest.raises(RuntimeError) as info:
        runner.list("fake")
    (listed,) = _events(user_handler)
    _failed(listed, t0, table.list_error, api="list", scheduler="fake", app_id=None)

    table.describe_error = None
    gone = "fake://test/never-submitted"
    with pytest.raises(UnknownAppException) as unknown:
        runner.log_lines(gone, "trainer")
    status, log_lines = _events(user_handler)
    _ok(status, t0, api="status", scheduler="fake", app_id="never-submitted")
    _failed(
        log_lines, t0, unknown.value, api="log_lines", scheduler="fake", app_id="never-submitted"
    )


def test_nothing_is_built_or_recorded_without_a_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    class Counting(TorchxEvent):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(kwargs.get("api", ""))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(events.api, "TorchxEvent", Counting)
    logger = events.events_logger()
    assert logger is logging.getLogger("torchx-events-null") and logger.propagate is False
    # pytest attaches its log capture to non-propagating loggers: take it off, as in a user's
    # process where only our NullHandler is there
    # (pytest's live-logging handler is a NullHandler subclass: only ours is exactly one)
    nulls = [h for h in logger.handlers if type(h) is logging.NullHandler]
    assert len(nulls) == 1
    monkeypatch.setattr(logger, "handlers", nulls)
    assert not events.is_recording()
    root = _Capture()
    logging.getLogger().addHandler(root)  # not even the root logger sees runner events
    try:
        runner = make_runner(JobTable())
        handle = runner.run(_app(), "fake")
        runner.wait(handle, wait_interval=0.01)
        runner.list("fake")
        assert built == [] and not any("{" in m and '"api"' in m for m in root.messages)
        cap = _Capture()
        logger.addHandler(cap)  # and the same calls are recorded once a handler is there
        try:
            runner.status(handle)
        finally:
            logger.removeHandler(cap)
        assert len(built) == 1 and json.loads(cap.messages[0])["api"] == "status"
    finally:
        logging.getLogger().removeHandler(root)


def test_an_event_that_cannot_be_serialized_does_not_break_the_call(
    user_handler: _Capture, caplog: pytest.LogCaptureFixture
) -> None:
    app = _app()
    app.metadata = {"obj": object()}  # type: ignore[dict-item]
    runner = make_runner(JobTable())
    with caplog.at_level(logging.WARNING, logger="torchx_core.runner.events"):
        handle = runner.run(app, "fake")
    assert handle == "fake://test/echo-0"
    assert user_handler.messages == []
    assert "cannot serialize the dryrun event; not recorded" in caplog.text


def test_session_id_is_one_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(session.TORCHX_INTERNAL_SESSION_ID, raising=False)
    monkeypatch.setattr(session, "CURRENT_SESSION_ID", None)
    assert session.get_torchx_session_id() is None
    sid = session.get_session_id_or_create_new()
    assert len(sid) == 36 and sid.count("-") == 4
    assert session.get_session_id_or_create_new() == sid == session.get_torchx_session_id()


@pytest.mark.integration
@pytest.mark.local
def test_a_real_local_run_records_its_calls(
    user_handler: _Capture, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "local-root"))
    app = AppDef(
        name="hello",
        roles=[Role(name="main", image=str(tmp_path), entrypoint="echo", args=["hello events"])],
    )
    with Runner("torchx", {"local_cwd": _local_cwd_factory()}) as runner:
        t0 = _now()
        handle = runner.run(app, "local_cwd", cfg={"log_dir": str(tmp_path / "logs")})
        status = runner.wait(handle, wait_interval=0.05, timeout=120)
        assert status is not None and status.state == AppState.SUCCEEDED
        lines = list(runner.log_lines(handle, "main"))
    app_id = handle.rpartition("/")[2]
    evs = _events(user_handler)
    assert [e.api for e in evs][:4] == ["dryrun", "schedule", "run", "wait"]
    assert [e.api for e in evs][4:] == ["status", "log_lines"]
    dryrun, schedule, run, wait, status_ev, log_lines = evs
    runcfg = json.dumps({"log_dir": str(tmp_path / "logs")})
    _ok(
        dryrun,
        t0,
        api="dryrun",
        scheduler="local_cwd",
        app_id="hello",
        app_image=str(tmp_path),
        app_metadata={},
        runcfg=runcfg,
        workspace="None",
    )
    _ok(
        run,
        t0,
        api="run",
        scheduler="local_cwd",
        app_id=app_id,
        app_image=str(tmp_path),
        app_metadata={},
        runcfg=runcfg,
        workspace="None",
    )
    assert schedule.app_id == app_id and json.loads(schedule.runcfg or "")["log_dir"] == str(
        tmp_path / "logs"
    )
    for ev, api in [(wait, "wait"), (status_ev, "status"), (log_lines, "log_lines")]:
        _ok(ev, t0, api=api, scheduler="local_cwd", app_id=app_id)
    assert "hello events\n" in lines


def _local_cwd_factory() -> Any:
    from torchx_core.schedulers.registry import default_registry

    return default_registry().view()["local_cwd"]


def test_a_patched_record_sees_every_event_with_the_patched_session() -> None:
    """TorchX users' tests patch ``torchx.runner.events.record`` (and the session look-up
    ``events.get_session_id_or_create_new``) to read the events: no handler needs attaching."""
    from unittest import mock

    table = JobTable()
    with (
        mock.patch.object(events, "record") as recorded,
        mock.patch.object(events, "get_session_id_or_create_new", return_value="s-1"),
    ):
        make_runner(table).run(AppDef("a", roles=[Role("r", "img", entrypoint="e")]), "fake")
        with pytest.raises(RuntimeError), log_event("mine") as ctx:
            raise RuntimeError("boom")
    sent = [c.args[0] for c in recorded.call_args_list]
    assert [e.api for e in sent] == ["dryrun", "schedule", "run", "mine"]
    assert {e.session for e in sent} == {"s-1"}
    assert "boom" in (ctx._torchx_event.raw_exception or "")


def test_torchx_get_or_create_logger_builds_one_logger_per_destination(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TorchX's ``_get_or_create_logger``: the destination's handler comes from the module's
    ``get_logging_handler`` (where TorchX's users patch it), one cached logger per destination."""
    made = [logging.NullHandler(), logging.StreamHandler()]
    monkeypatch.setattr(events, "_loggers", {})
    monkeypatch.setattr(events, "get_logging_handler", lambda destination: made.pop(0))
    first = events._get_or_create_logger("torchx_test_dest_a")
    second = events._get_or_create_logger("torchx_test_dest_b")
    assert first.name == "torchx-events-torchx_test_dest_a" and first.propagate is False
    assert type(first.handlers[-1]) is logging.NullHandler
    assert type(second.handlers[-1]) is logging.StreamHandler
    assert events._get_or_create_logger("torchx_test_dest_b") is second and made == []
