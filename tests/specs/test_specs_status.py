"""Unit tests for run status, dry-run info and app handles (torchx_core/specs/_status.py)."""

from __future__ import annotations

import json

import pytest

from torchx_core.specs import (
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    AppStatusError,
    MalformedAppHandleException,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
    make_app_handle,
    parse_app_handle,
)


def test_app_state_values_and_str() -> None:
    assert [s.name for s in AppState] == [
        "UNSUBMITTED",
        "SUBMITTED",
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
        "UNKNOWN",
    ]
    assert [int(s) for s in AppState] == list(range(8))
    assert str(AppState.RUNNING) == "RUNNING"
    assert ReplicaState is AppState


def test_is_started() -> None:
    started = {s for s in AppState if is_started(s)}
    assert started == {AppState.RUNNING, AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}


def test_is_terminal() -> None:
    terminal = {s for s in AppState if is_terminal(s)}
    assert terminal == {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}
    assert AppStatus(AppState.FAILED).is_terminal()
    assert not AppStatus(AppState.RUNNING).is_terminal()


def _status(state: AppState = AppState.FAILED) -> AppStatus:
    return AppStatus(
        state,
        num_restarts=1,
        msg="boom",
        ui_url="http://ui",
        roles=[
            RoleStatus(
                "trainer",
                [
                    ReplicaStatus(
                        0, AppState.FAILED, "trainer", "host0", structured_error_msg='{"e": 1}'
                    ),
                    ReplicaStatus(1, AppState.SUCCEEDED, "trainer", "host1"),
                ],
            ),
            RoleStatus("ps", [ReplicaStatus(0, AppState.RUNNING, "ps", "")]),
        ],
    )


def test_app_status_defaults() -> None:
    st = AppStatus(AppState.RUNNING)
    assert (st.num_restarts, st.msg, st.structured_error_msg, st.ui_url, st.roles) == (
        0,
        "",
        "<NONE>",
        None,
        [],
    )


def test_raise_for_status() -> None:
    AppStatus(AppState.SUCCEEDED).raise_for_status()
    st = _status()
    with pytest.raises(AppStatusError) as e:
        st.raise_for_status()
    assert e.value.app_status is st
    assert "FAILED" in str(e.value)


def test_format_and_filter_roles() -> None:
    st = _status()
    lines = st.format().splitlines()
    assert lines[:4] == ["AppStatus:", "    State: FAILED", "    Num Restarts: 1", "    Roles:"]
    assert lines[-3:] == [
        f"    Msg: {st.msg}",
        f"    Structured Error Msg: {st.structured_error_msg}",
        "    UI URL: http://ui",
    ]
    replicas = [line for line in lines[4:-3] if "[" in line]
    assert [line.strip().lstrip("*").split(" ")[0] for line in replicas] == [
        "trainer[0]:FAILED", "trainer[1]:SUCCEEDED", "ps[0]:RUNNING"
    ]
    # the first replica of each role is starred
    assert [line.strip().startswith("*") for line in replicas] == [True, False, True]
    filtered = st.format(filter_roles=["ps"]).splitlines()
    assert [line for line in filtered if "[" in line] == [replicas[2]]
    assert filtered[-3:] == lines[-3:]


def test_format_message_lines_carry_the_values() -> None:
    st = AppStatus(AppState.FAILED, msg="replica trainer/0 exited 3", structured_error_msg="OOM")
    assert st.format().splitlines()[-3:] == [
        "    Msg: replica trainer/0 exited 3",
        "    Structured Error Msg: OOM",
        "    UI URL: None",
    ]


def test_json_form_round_trips() -> None:
    st = _status()
    data = st.to_json()
    assert data["state"] == "FAILED"
    assert data["roles"][0]["replicas"][0] == {
        "id": 0,
        "state": "FAILED",
        "role": "trainer",
        "hostname": "host0",
        "structured_error_msg": '{"e": 1}',
    }
    assert AppStatus.from_json(json.loads(json.dumps(data))) == st


def test_repr_is_yaml_like_and_complete() -> None:
    text = repr(_status())
    assert text.startswith("AppStatus:\n")
    lines = text.splitlines()
    assert lines[1:7] == [
        "  state: FAILED (5)",
        "  num_restarts: 1",
        "  msg: boom",
        "  structured_error_msg: <NONE>",
        '  ui_url: "http://ui"',
        "  roles:",
    ]
    # every replica of every role, with every field
    assert [line.strip() for line in lines if line.strip().startswith(("- role:", "hostname:"))] == [
        "- role: trainer", "hostname: host0", "hostname: host1", "- role: ps", 'hostname: ""'
    ]
    assert text.count("structured_error_msg:") == 4
    assert repr(AppStatus(AppState.SUCCEEDED)).count("\n") == 6


def test_dryrun_info_uses_fmt() -> None:
    info: AppDryRunInfo[dict[str, int]] = AppDryRunInfo({"x": 1}, lambda r: f"REQ x={r['x']}")
    assert str(info) == "REQ x=1" and repr(info) == "REQ x=1"
    assert info.request == {"x": 1}
    assert info._app is None and info._cfg == {} and info._scheduler is None


def test_parse_app_handle_examples() -> None:
    assert parse_app_handle("k8s://default/foo_bar") == ParsedAppHandle("k8s", "default", "foo_bar")
    assert parse_app_handle("k8s:///foo_bar") == ParsedAppHandle("k8s", "", "foo_bar")
    assert parse_app_handle("local_cwd://s/a/b") == ParsedAppHandle("local_cwd", "s", "a/b")
    assert AppHandle is str


def test_make_app_handle_round_trip() -> None:
    handle = make_app_handle("slurm", "sess", "123")
    assert handle == "slurm://sess/123"
    assert parse_app_handle(handle) == ("slurm", "sess", "123")


@pytest.mark.parametrize(
    "handle, needle",
    [
        ("foo", "missing '://'"),
        ("k8s://default", "missing '/<app_id>'"),
        ("k8s://default/", "app_id"),
        ("://s/a", "scheduler name"),
        ("bad name://s/a", "scheduler name"),
    ],
)
def test_malformed_app_handles(handle: str, needle: str) -> None:
    with pytest.raises(MalformedAppHandleException) as e:
        parse_app_handle(handle)
    assert needle in str(e.value)
    assert repr(handle) in str(e.value)
    assert "<scheduler_backend>://<session_name>/<app_id>" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_non_string_handle_is_typed_error() -> None:
    with pytest.raises(MalformedAppHandleException):
        parse_app_handle(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("handle", "reason"), [
    ("foo", "missing '://' after the scheduler name"),
    ("k8s://x", "missing '/<app_id>' after the session name"),
    ("k8s://x/", "the app_id after the session name is empty"),
    ("k 8s://x/y", "scheduler name 'k 8s' must be non-empty letters, digits, '_', '-', '.'"),
    ("://x/y", "scheduler name '' must be non-empty letters, digits, '_', '-', '.'"),
    (3, "an app handle must be a str"),
])
def test_malformed_handles_say_why(handle: object, reason: str) -> None:
    from torchx_core.specs import MalformedAppHandleException, parse_app_handle

    with pytest.raises(MalformedAppHandleException) as e:
        parse_app_handle(handle)  # type: ignore[arg-type]
    assert str(e.value) == (
        f"{handle!r} is not of the form: <scheduler_backend>://<session_name>/<app_id> ({reason})."
        " Example: 'local_cwd://default/my_app-x1y2z3' (session_name may be empty: 'k8s:///my_app')"
    )
    assert e.value.app_handle == handle


def test_handle_parts_keep_every_allowed_character() -> None:
    from torchx_core.specs import make_app_handle, parse_app_handle

    parsed = parse_app_handle("a-b.c_D9://s/x/y/z")
    assert tuple(parsed) == ("a-b.c_D9", "s", "x/y/z")
    assert make_app_handle(*parsed) == "a-b.c_D9://s/x/y/z"
