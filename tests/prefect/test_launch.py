"""Unit tests of the adapter's own arguments, results and reports (``torchx_prefect._launch``)."""

from __future__ import annotations

import pytest

from torchx_core.specs import AppDef, AppState, AppStatus, ReplicaStatus, Role, RoleStatus
from torchx_prefect._launch import AppResult, artifact_key, status_markdown, validate_args
from torchx_prefect.errors import InvalidTaskArgumentError

DEFAULTS: dict[str, object] = {
    "app_args": None,
    "scheduler": "local_cwd",
    "cfg": None,
    "workspace": None,
    "poll_interval": 1.0,
    "unknown_state_timeout": 10.0,
    "stream_logs": True,
    "log_tail_lines": 5,
    "create_artifacts": True,
    "reattach": True,
    "cancel_timeout": 5.0,
}


def echo_app(name: str = "echo") -> AppDef:
    return AppDef(name=name, roles=[Role(name="worker", image="/tmp", entrypoint="echo")])


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
        (
            "utils.echo",
            {"poll_interval": 0},
            "poll_interval must be a finite number of seconds > 0",
        ),
        ("utils.echo", {"poll_interval": "5"}, "poll_interval must be a finite number"),
        ("utils.echo", {"poll_interval": float("nan")}, "poll_interval must be a finite number"),
        (
            "utils.echo",
            {"unknown_state_timeout": -1},
            "unknown_state_timeout must be a finite number of seconds >= 0",
        ),
        ("utils.echo", {"cancel_timeout": True}, "cancel_timeout must be a finite number"),
        ("utils.echo", {"log_tail_lines": -3}, "log_tail_lines must be an int >= 0"),
        ("utils.echo", {"stream_logs": "yes"}, "stream_logs must be True or False"),
        ("utils.echo", {"scheduler": ""}, "scheduler must be a scheduler name"),
        ("utils.echo", {"cfg": ["a"]}, "cfg must be a mapping"),
        ("utils.echo", {"workspace": 3}, "workspace must be a path string"),
    ],
)
def test_validate_rejects_bad_arguments(app: object, overrides: dict, fragment: str) -> None:
    with pytest.raises(InvalidTaskArgumentError, match=fragment):
        _validate(app, **overrides)


def test_validate_reports_every_problem_at_once() -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate("utils.echo", poll_interval=-1, log_tail_lines=-1, reattach=None)
    msg = str(info.value)
    assert "poll_interval" in msg and "log_tail_lines" in msg and "reattach" in msg


def test_validate_rejects_an_appdef_without_roles() -> None:
    from torchx_core.specs import AppDef

    with pytest.raises(InvalidTaskArgumentError, match="has no roles"):
        _validate(AppDef(name="empty"))


# -- results and reports ------------------------------------------------------------------


def test_artifact_key_is_lowercase_digits_and_dashes() -> None:
    key = artifact_key("Echo_App.x", "status")
    assert key == "torchx-echo-app-x-status"


def _failed_status() -> AppStatus:
    return AppStatus(
        AppState.FAILED,
        num_restarts=1,
        msg="exit 3",
        structured_error_msg='{"message": "boom"}',
        roles=[
            RoleStatus(
                "worker",
                [
                    ReplicaStatus(0, AppState.SUCCEEDED, "worker", "h0"),
                    ReplicaStatus(1, AppState.FAILED, "worker", "h1", '{"message": "rank1 boom"}'),
                ],
            )
        ],
    )


def test_status_markdown_has_one_row_per_replica() -> None:
    md = status_markdown("local_cwd://s/a", _failed_status())
    rows = [ln for ln in md.splitlines() if ln.startswith("| worker")]
    assert len(rows) == 2 and "FAILED" in rows[1] and "rank1 boom" in rows[1]
    assert "**State:** FAILED" in md and "local_cwd://s/a" in md
    assert "no longer knows" in status_markdown("h", None)


def test_status_markdown_escapes_pipes_and_links_the_ui() -> None:
    st = AppStatus(
        AppState.SUCCEEDED,
        ui_url="http://ui/app",
        msg="a|b",
        roles=[RoleStatus("r", [ReplicaStatus(0, AppState.SUCCEEDED, "r", "")])],
    )
    md = status_markdown("h", st)
    assert "a\\|b" in md and "(http://ui/app)" in md


def test_app_result_to_dict_is_json_ready() -> None:
    import json

    res = AppResult("local_cwd://s/a", AppStatus(AppState.SUCCEEDED), "a-123", reattached=True)
    data = json.loads(json.dumps(res.to_dict()))
    assert data["status"]["state"] == "SUCCEEDED" and data["reattached"] is True
    assert res.state == AppState.SUCCEEDED and res.ui_url is None
