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
    assert lines[:4] == ["AppStatus:", "    State: FAILED", "    Num Restarts: 1", "    Roles: "]
    assert lines[-4:] == [
        f"    Msg: {st.msg}",
        f"    Structured Error Msg: {st.structured_error_msg}",
        "    UI URL: http://ui",
        "    ",
    ]
    replicas = [line for line in lines[4:-4] if "[" in line]
    assert [line.strip().lstrip("*").split(" ")[0] for line in replicas] == [
        "trainer[0]:FAILED",
        "trainer[1]:SUCCEEDED",
        "ps[0]:RUNNING",
    ]
    # the replica 0 of each role is starred
    assert [line[:2] for line in replicas] == [" *", "  ", " *"]
    filtered = st.format(filter_roles=["ps"]).splitlines()
    assert [line for line in filtered if "[" in line] == [replicas[2]]
    assert filtered[-4:] == lines[-4:]
    assert st.format(filter_roles=[]) == st.format()  # empty: all roles, as in TorchX


def test_format_message_lines_carry_the_values() -> None:
    st = AppStatus(AppState.FAILED, msg="replica trainer/0 exited 3", structured_error_msg="OOM")
    assert st.format().splitlines()[-4:-1] == [
        "    Msg: replica trainer/0 exited 3",
        "    Structured Error Msg: OOM",
        "    UI URL: None",
    ]


# TorchX's exact texts (meta-pytorch/torchx @ cafea3f3, torchx/specs/api.py AppStatus)
TORCHX_FORMAT = (
    "AppStatus:\n"
    "    State: RUNNING\n"
    "    Num Restarts: 0\n"
    "    Roles: \n"
    " *worker[0]:FAILED (exitcode: -1)\n"
    "        timestamp: <N/A>\n"
    "        hostname: localhost\n"
    "        error_msg: error\n"
    "  worker[1]:RUNNING\n"
    " *ps[0]:CANCELLED (no reply file)\n"
    "    Msg: \n"
    "    Structured Error Msg: <NONE>\n"
    "    UI URL: None\n"
    "    "
)


def _torchx_example() -> AppStatus:
    nested = '{"message":{"message":"error","errorCode":-1,"extraInfo":{}}}'
    return AppStatus(
        AppState.RUNNING,
        roles=[
            RoleStatus(
                "worker",
                [  # listed out of order: replicas are shown by id
                    ReplicaStatus(1, AppState.RUNNING, "worker", "localhost"),
                    ReplicaStatus(0, AppState.FAILED, "worker", "localhost", nested),
                ],
            ),
            RoleStatus("ps", [ReplicaStatus(0, AppState.CANCELLED, "ps", "h")]),
        ],
    )


def test_format_is_torchx_text() -> None:
    """Silent incompatibility 5 (issue 25): ``torchx status`` text is TorchX's, byte for byte
    (layout, the ``(exitcode/timestamp/hostname/error_msg)`` block of a replica with a JSON error,
    ``(no reply file)``, the trailing template whitespace), so scripts parsing it keep working."""
    assert _torchx_example().format() == TORCHX_FORMAT


@pytest.mark.parametrize(
    "error, block",
    [
        # torchelastic's nested error file
        (
            '{"message": {"message": "boom", "errorCode": 3, "extraInfo": {"timestamp": 0}}}',
            ["FAILED (exitcode: 3)", "timestamp: {ts}", "hostname: h", "error_msg: boom"],
        ),
        # a scheduler's flat reply file
        (
            '{"message": "boom", "errorCode": 2, "timestamp": 0}',
            ["FAILED (exitcode: 2)", "timestamp: {ts}", "hostname: h", "error_msg: boom"],
        ),
        # our local scheduler's flat error: exit_code fills TorchX's exitcode slot
        (
            '{"message": "boom", "exit_code": 7, "stderr_tail": "x"}',
            ["FAILED (exitcode: 7)", "timestamp: <N/A>", "hostname: h", "error_msg: boom"],
        ),
        # exit code 0 or missing: <N/A>, as in TorchX
        ('{"message": {"message": "m", "errorCode": 0}}', ["FAILED (exitcode: <N/A>)"]),
        # not JSON / an unknown layout: verbatim, in the message's place
        (
            "worker killed by SIGKILL",
            ["FAILED (exitcode: <N/A>)", "error_msg: worker killed by SIGKILL"],
        ),
        ('{"error": "x"}', ['error_msg: {"error": "x"}']),
    ],
)
def test_format_error_layouts(error: str, block: list[str]) -> None:
    from datetime import datetime

    st = AppStatus(
        AppState.FAILED,
        roles=[RoleStatus("r", [ReplicaStatus(0, AppState.FAILED, "r", "h", error)])],
    )
    text = st.format()
    ts = str(datetime.fromtimestamp(0))
    for part in block:
        assert part.replace("{ts}", ts) in text


def test_format_error_message_wraps_as_torchx() -> None:
    st = AppStatus(AppState.FAILED)
    words = " ".join(["word"] * 40)  # 199 chars
    lines = st._format_error_message(words, header="  e: ", width=20).splitlines()
    # TorchX's rule: break at the first space once a line holds >= width chars; continuation
    # lines are indented by len(header) and start with that space
    assert lines[0] == "  e: " + "word " * 4 + "word"
    assert all(line.startswith("      word") for line in lines[1:])
    assert "".join(line[5:] for line in lines) == words
    nested = "c10::Error: CUDA error\nException raised from x at y.cpp:1"
    assert st._format_error_message(nested, header="") == "c10::Error: CUDA error"
    with pytest.raises(ValueError, match="shorter than width"):
        st._format_error_message("m", header="x" * 80)


def test_json_is_torchx_form_and_round_trips() -> None:
    """Silent incompatibility 5 (issue 25): ``to_json()`` (``torchx status --json``) is TorchX's
    dict: key order state, num_restarts, roles, msg, structured_error_msg, url; replica states
    by number with ``hostaddr``."""
    st = _torchx_example()
    data = st.to_json()
    assert list(data) == ["state", "num_restarts", "roles", "msg", "structured_error_msg", "url"]
    assert data["state"] == "RUNNING" and data["url"] is None
    assert data["roles"][0]["replicas"][0] == {
        "id": 1,
        "state": 3,
        "role": "worker",
        "hostname": "localhost",
        "structured_error_msg": "<NONE>",
        "hostaddr": "localhost",
    }
    assert [r["role"] for r in st.to_json(filter_roles=["ps"])["roles"]] == ["ps"]
    assert AppStatus.from_json(json.loads(json.dumps(data))) == st
    full = _status()
    assert AppStatus.from_json(json.loads(json.dumps(full.to_json()))) == full
    # the form earlier releases of ours wrote (state names, ui_url) still reads
    old = {
        "state": "FAILED",
        "ui_url": "http://ui",
        "roles": [
            {"role": "r", "replicas": [{"id": 0, "state": "FAILED", "role": "r", "hostname": "h"}]}
        ],
    }
    back = AppStatus.from_json(old)
    assert back.ui_url == "http://ui" and back.roles[0].replicas[0].state == AppState.FAILED


def test_repr_is_torchx_yaml() -> None:
    """Silent incompatibility 5 (issue 25): ``str()``/``repr()`` is TorchX's YAML: keys sorted,
    PyYAML quoting, a JSON error message embedded as data."""
    assert repr(AppStatus(AppState.FAILED)) == (
        "AppStatus:\n  msg: ''\n  num_restarts: 0\n  roles: []\n  state: FAILED (5)\n"
        "  structured_error_msg: <NONE>\n  ui_url: null\n"
    )
    embedded = AppStatus(AppState.FAILED, structured_error_msg='{"message": "test error"}')
    assert str(embedded) == (
        "AppStatus:\n  msg: ''\n  num_restarts: 0\n  roles: []\n  state: FAILED (5)\n"
        "  structured_error_msg:\n    message: test error\n  ui_url: null\n"
    )
    assert "worker terminated by SIGKILL" in repr(
        AppStatus(AppState.FAILED, structured_error_msg="worker terminated by SIGKILL")
    )
    assert repr(AppState.FAILED) == "FAILED (5)"
    text = repr(_status())
    assert "    - hostaddr: host0\n      hostname: host0\n      id: 0\n" in text
    assert "state: SUCCEEDED (4)" in text and "ui_url: http://ui" in text


def test_dryrun_info_uses_fmt() -> None:
    info: AppDryRunInfo[dict[str, int]] = AppDryRunInfo({"x": 1}, lambda r: f"REQ x={r['x']}")
    assert str(info) == "REQ x=1" and repr(info) == "REQ x=1"
    assert info.request == {"x": 1}
    assert info._app is None and info._cfg == {} and info._scheduler is None


def test_parse_app_handle_examples() -> None:
    assert parse_app_handle("k8s://default/foo_bar") == ParsedAppHandle("k8s", "default", "foo_bar")
    assert parse_app_handle("k8s:///foo_bar") == ParsedAppHandle("k8s", "", "foo_bar")
    # TorchX: the app id is what follows the last `/` (a session name may hold slashes)
    assert parse_app_handle("local_cwd://a/b/c") == ParsedAppHandle("local_cwd", "a/b", "c")
    assert make_app_handle(*parse_app_handle("local_cwd://a/b/c")) == "local_cwd://a/b/c"
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


@pytest.mark.parametrize(
    ("handle", "reason"),
    [
        ("foo", "missing '://' after the scheduler name"),
        ("k8s://x", "missing '/<app_id>' after the session name"),
        ("k8s://x/", "the app_id after the session name is empty"),
        ("k 8s://x/y", "scheduler name 'k 8s' must be non-empty letters, digits, '_', '-', '.'"),
        ("://x/y", "scheduler name '' must be non-empty letters, digits, '_', '-', '.'"),
        (3, "an app handle must be a str"),
    ],
)
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
    assert tuple(parsed) == ("a-b.c_D9", "s/x/y", "z")  # TorchX: the app id follows the last /
    assert make_app_handle(*parsed) == "a-b.c_D9://s/x/y/z"
