"""Unit tests of the engine-neutral launcher logic, against a stateful fake Runner."""

from __future__ import annotations

import pickle
import threading
import time

import pytest
from prefect_fakes import FakeRunner, echo_app

from torchx_core.specs import AppState, AppStatus, ReplicaStatus, RoleStatus, TorchXError
from torchx_prefect._launch import (
    AppResult,
    AppWatch,
    LogStreamer,
    artifact_key,
    cancel_app,
    deterministic_app_name,
    failed_error,
    find_live_app,
    log_tail,
    rename_app,
    run_identity,
    status_markdown,
    validate_args,
)
from torchx_prefect.errors import (
    AppFailedError,
    AppUnknownStateError,
    AppVanishedError,
    InvalidTaskArgumentError,
)
from torchx_prefect.states import Outcome

DEFAULTS: dict[str, object] = {
    "app_args": None, "scheduler": "local_cwd", "cfg": None, "workspace": None,
    "poll_interval": 1.0, "unknown_state_timeout": 10.0, "stream_logs": True,
    "log_tail_lines": 5, "create_artifacts": True, "reattach": True, "cancel_timeout": 5.0,
}


def _validate(app: object, **overrides: object):
    kwargs = {**DEFAULTS, **overrides}
    return validate_args(app, **kwargs)  # type: ignore[arg-type]


# -- arguments ---------------------------------------------------------------------------


def test_validate_accepts_an_appdef_and_copies_cfg() -> None:
    cfg = {"log_dir": "/tmp/x"}
    spec = _validate(echo_app(), cfg=cfg)
    assert spec.app is not None and spec.component is None
    assert spec.cfg == cfg and spec.cfg is not cfg
    assert spec.base_name == "echo"


def test_validate_accepts_a_component_with_list_or_dict_args() -> None:
    assert _validate("utils.echo", app_args=["--msg", "hi"]).component_args == ["--msg", "hi"]
    spec = _validate("utils.echo", app_args={"msg": "hi"})
    assert spec.component_args == {"msg": "hi"} and spec.base_name == "echo"
    assert _validate("path/to/my_comp.py:train").base_name == "train"


@pytest.mark.parametrize(
    ("app", "overrides", "fragment"),
    [
        (42, {}, "app must be an AppDef or a component name"),
        ("  ", {}, "app must be an AppDef or a component name"),
        (echo_app(), {"app_args": ["--x"]}, "app_args is only used with a component name"),
        ("utils.echo", {"app_args": [1, 2]}, "app_args must be a list of strings"),
        ("utils.echo", {"poll_interval": 0}, "poll_interval must be > 0"),
        ("utils.echo", {"poll_interval": "5"}, "poll_interval must be a finite number"),
        ("utils.echo", {"poll_interval": float("nan")}, "poll_interval must be a finite number"),
        ("utils.echo", {"unknown_state_timeout": -1}, "unknown_state_timeout must be >= 0"),
        ("utils.echo", {"cancel_timeout": True}, "cancel_timeout must be a finite number"),
        ("utils.echo", {"log_tail_lines": -3}, "log_tail_lines must be an int >= 0"),
        ("utils.echo", {"stream_logs": "yes"}, "stream_logs must be True or False"),
        ("utils.echo", {"scheduler": ""}, "scheduler must be a scheduler name"),
        ("utils.echo", {"cfg": ["a"]}, "cfg must be a mapping"),
        ("utils.echo", {"workspace": 3}, "workspace must be a path string"),
    ],
)
def test_validate_rejects_bad_arguments(app: object, overrides: dict, fragment: str) -> None:
    with pytest.raises(InvalidTaskArgumentError, match=fragment) as info:
        _validate(app, **overrides)
    assert isinstance(info.value, (TorchXError, ValueError, TypeError))


def test_validate_reports_every_problem_at_once() -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate("utils.echo", poll_interval=-1, log_tail_lines=-1, reattach=None)
    msg = str(info.value)
    assert "poll_interval" in msg and "log_tail_lines" in msg and "reattach" in msg


def test_validate_rejects_an_appdef_without_roles() -> None:
    from torchx_core.specs import AppDef

    with pytest.raises(InvalidTaskArgumentError, match="has no roles"):
        _validate(AppDef(name="empty"))


# -- naming ------------------------------------------------------------------------------


def test_identity_is_deterministic_and_distinguishes_calls() -> None:
    a = run_identity("flow-1", "run_app-abc", "0")
    assert a == run_identity("flow-1", "run_app-abc", "0")
    assert a != run_identity("flow-1", "run_app-abc", "1")
    assert a != run_identity("flow-2", "run_app-abc", "0")


def test_app_name_is_sanitized_and_bounded() -> None:
    name = deterministic_app_name("A" * 100 + "_x", "0123456789")
    assert len(name) <= 40 and name.endswith("-0123456789")
    assert deterministic_app_name("___", "0123456789") == "app-0123456789"
    assert set(deterministic_app_name("Tr ain/v2!", "abc")) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")


def test_artifact_key_is_lowercase_digits_and_dashes() -> None:
    key = artifact_key("Echo_App.x", "status")
    assert key == "torchx-echo-app-x-status"


def test_rename_does_not_modify_the_callers_app() -> None:
    app = echo_app("mine")
    renamed = rename_app(app, "mine-0123")
    assert (app.name, renamed.name) == ("mine", "mine-0123")
    assert renamed.roles == app.roles


# -- reattaching -------------------------------------------------------------------------


def test_find_live_app_prefers_the_persisted_handle(fake_runner: FakeRunner) -> None:
    fake_runner.script = [AppState.RUNNING]
    handle = fake_runner.run(echo_app("job-abc"), "local_cwd")
    assert find_live_app(fake_runner, "local_cwd", "other-name", handle) == handle


def test_find_live_app_searches_the_list_by_name(fake_runner: FakeRunner) -> None:
    fake_runner.script = [AppState.RUNNING]
    handle = fake_runner.run(echo_app("job-abc"), "local_cwd")
    fake_runner.run(echo_app("job-other"), "local_cwd")
    assert find_live_app(fake_runner, "local_cwd", "job-abc", None) == handle
    assert find_live_app(fake_runner, "local_cwd", "job-zzz", None) is None


def test_find_live_app_ignores_ended_apps(fake_runner: FakeRunner) -> None:
    fake_runner.script = [AppState.FAILED]
    handle = fake_runner.run(echo_app("job-abc"), "local_cwd")
    assert find_live_app(fake_runner, "local_cwd", "job-abc", handle) is None


def test_find_live_app_survives_list_and_status_errors(fake_runner: FakeRunner) -> None:
    fake_runner.fail_list = NotImplementedError("no list here")
    fake_runner.fail_status = ConnectionError("down")
    assert find_live_app(fake_runner, "local_cwd", "job-abc", "local_cwd://torchx/x") is None


# -- watching ----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _status(state: AppState) -> AppStatus:
    return AppStatus(state)


def test_watch_maps_states_through_the_table() -> None:
    watch = AppWatch("h", 10.0)
    assert watch.observe(_status(AppState.PENDING)) is Outcome.WAIT
    assert watch.observe(_status(AppState.SUCCEEDED)) is Outcome.COMPLETE
    assert watch.last_status is not None and watch.last_status.state == AppState.SUCCEEDED


def test_watch_tolerates_unknown_until_the_grace_ends() -> None:
    clock = Clock()
    watch = AppWatch("h", 10.0, clock=clock)
    assert watch.observe(_status(AppState.UNKNOWN)) is Outcome.WAIT
    clock.now = 9.0
    assert watch.observe(_status(AppState.UNKNOWN)) is Outcome.WAIT
    clock.now = 10.5
    with pytest.raises(AppUnknownStateError, match="stayed UNKNOWN") as info:
        watch.observe(_status(AppState.UNKNOWN))
    assert info.value.app_handle == "h"


def test_watch_resets_the_grace_when_the_state_is_known_again() -> None:
    clock = Clock()
    watch = AppWatch("h", 10.0, clock=clock)
    watch.observe(None)
    clock.now = 8.0
    assert watch.observe(_status(AppState.RUNNING)) is Outcome.WAIT
    clock.now = 15.0
    assert watch.observe(None) is Outcome.WAIT  # grace restarts at 15
    clock.now = 26.0
    with pytest.raises(AppVanishedError, match="no longer knows"):
        watch.observe(None)


def test_watch_with_zero_grace_fails_at_once() -> None:
    with pytest.raises(AppVanishedError):
        AppWatch("h", 0.0).observe(None)


# -- results, errors, artifacts ----------------------------------------------------------


def _failed_status() -> AppStatus:
    return AppStatus(
        AppState.FAILED,
        num_restarts=1,
        msg="exit 3",
        structured_error_msg='{"message": "boom"}',
        roles=[RoleStatus("worker", [
            ReplicaStatus(0, AppState.SUCCEEDED, "worker", "h0"),
            ReplicaStatus(1, AppState.FAILED, "worker", "h1", '{"message": "rank1 boom"}'),
        ])],
    )


def test_failed_error_carries_status_structured_error_and_tail() -> None:
    err = failed_error("local_cwd://s/a", _failed_status(), ["[worker/1] Traceback"])
    text = str(err)
    assert "FAILED after 1 restart" in text
    assert "boom" in text and "worker[1] error" in text and "[worker/1] Traceback" in text
    assert err.status is not None and err.status.state == AppState.FAILED
    copy = pickle.loads(pickle.dumps(err))
    assert isinstance(copy, AppFailedError) and copy.log_tail == ["[worker/1] Traceback"]
    assert copy.app_handle == "local_cwd://s/a" and str(copy) == text


def test_log_tail_reads_only_the_failed_replicas(fake_runner: FakeRunner) -> None:
    fake_runner.logs = {("worker", 0): ["ok\n"], ("worker", 1): [f"l{i}\n" for i in range(10)]}
    handle = fake_runner.run(echo_app(replicas=2), "local_cwd")
    tail = log_tail(fake_runner, handle, None, _failed_status(), max_lines=3)
    assert tail == ["[worker/1] l7", "[worker/1] l8", "[worker/1] l9"]
    assert log_tail(fake_runner, handle, None, _failed_status(), max_lines=0) == []


def test_log_tail_reports_unreadable_logs() -> None:
    tail = log_tail(FakeRunner(), "local_cwd://s/gone", echo_app(), None, max_lines=3)
    assert len(tail) == 1 and "logs unavailable" in tail[0]


def test_status_markdown_has_one_row_per_replica() -> None:
    md = status_markdown("local_cwd://s/a", _failed_status())
    rows = [ln for ln in md.splitlines() if ln.startswith("| worker")]
    assert len(rows) == 2 and "FAILED" in rows[1] and "rank1 boom" in rows[1]
    assert "**State:** FAILED" in md and "local_cwd://s/a" in md
    assert "no longer knows" in status_markdown("h", None)


def test_status_markdown_escapes_pipes_and_links_the_ui() -> None:
    st = AppStatus(AppState.SUCCEEDED, ui_url="http://ui/app", msg="a|b",
                   roles=[RoleStatus("r", [ReplicaStatus(0, AppState.SUCCEEDED, "r", "")])])
    md = status_markdown("h", st)
    assert "a\\|b" in md and "(http://ui/app)" in md


def test_app_result_to_dict_is_json_ready() -> None:
    import json

    res = AppResult("local_cwd://s/a", AppStatus(AppState.SUCCEEDED), "a-123", reattached=True)
    data = json.loads(json.dumps(res.to_dict()))
    assert data["status"]["state"] == "SUCCEEDED" and data["reattached"] is True
    assert res.state == AppState.SUCCEEDED and res.ui_url is None


# -- cancelling --------------------------------------------------------------------------


def test_cancel_app_cancels_and_is_idempotent(fake_runner: FakeRunner) -> None:
    fake_runner.script = [AppState.RUNNING]
    handle = fake_runner.run(echo_app(), "local_cwd")
    assert cancel_app(fake_runner, handle, 5.0)
    assert cancel_app(fake_runner, handle, 5.0)
    assert fake_runner.peek(handle) == AppState.CANCELLED


def test_cancel_app_is_bounded_in_time() -> None:
    release = threading.Event()

    class Stuck(FakeRunner):
        def cancel(self, app_handle: str) -> None:
            release.wait(5)

    try:
        assert cancel_app(Stuck(), "local_cwd://s/a", 0.05) is False
    finally:
        release.set()


def test_cancel_app_reports_errors() -> None:
    class Broken(FakeRunner):
        def cancel(self, app_handle: str) -> None:
            raise ConnectionError("scheduler down")

    assert cancel_app(Broken(), "local_cwd://s/a", 5.0) is False


# -- logs --------------------------------------------------------------------------------


def test_log_streamer_emits_each_line_once_across_reopened_streams() -> None:
    runner = FakeRunner()
    done = threading.Event()
    opened: list[int] = []

    class Flaky(FakeRunner):
        def log_lines(self, app_handle, role_name, k=0, **kw):
            opened.append(k)
            if len(opened) == 1:
                raise FileNotFoundError("not yet")
            if len(opened) == 2:
                def gen():
                    yield "a\n"
                    yield "b\n"
                    raise OSError("broken pipe")
                return gen()
            done.set()
            return iter(["a\n", "b\n", "c\n"])

    flaky = Flaky()
    lines: list[str] = []
    streamer = LogStreamer(flaky, "h", emit=lines.append, app_done=done.is_set, retry_interval=0.01)
    streamer.start([("w", 0)])
    streamer.start([("w", 0)])  # already streaming: no second thread
    deadline = time.monotonic() + 5
    while len(lines) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    streamer.stop(5.0)
    assert lines == ["[w/0] a", "[w/0] b", "[w/0] c"]
    assert runner.apps == {}


def test_log_streamer_caps_the_number_of_streams() -> None:
    runner = FakeRunner()
    handle = runner.run(echo_app(replicas=3), "local_cwd")
    lines: list[str] = []
    streamer = LogStreamer(runner, handle, emit=lines.append, app_done=lambda: True, max_streams=2)
    streamer.start([("worker", 0), ("worker", 1), ("worker", 2)])
    streamer.stop(5.0)
    assert len(streamer._streams) == 2
