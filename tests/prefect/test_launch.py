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
    assert spec.app is not None and spec.component is None and spec.component_args == []
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
        ("utils.echo", {"poll_interval": "5s"}, "poll_interval must be a finite number"),
        ("utils.echo", {"poll_interval": float("nan")}, "poll_interval must be a finite number"),
        (
            "utils.echo",
            {"unknown_state_timeout": -1},
            "unknown_state_timeout must be a finite number of seconds >= 0",
        ),
        ("utils.echo", {"cancel_timeout": True}, "cancel_timeout must be a finite number"),
        ("utils.echo", {"log_tail_lines": -3}, "log_tail_lines must be an int >= 0"),
        ("utils.echo", {"stream_logs": "maybe"}, "stream_logs must be True or False"),
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


# -- arguments: accepted values and what each rejection names ---------------------------------


def test_validate_normalises_accepted_values() -> None:
    spec = _validate(
        "  utils.echo  ",
        app_args=("--msg", "hi"),
        scheduler="slurm",
        cfg={"partition": "gpu"},
        workspace="/tmp/ws",
        poll_interval=2,
        unknown_state_timeout=0,
        stream_logs=False,
        log_tail_lines=0,
        create_artifacts=False,
        reattach=False,
        cancel_timeout=0.5,
    )
    assert spec.app is None and spec.component == "utils.echo"
    assert spec.component_args == ["--msg", "hi"] and isinstance(spec.component_args, list)
    assert (spec.scheduler, spec.cfg, spec.workspace) == ("slurm", {"partition": "gpu"}, "/tmp/ws")
    assert spec.poll_interval == 2.0 and isinstance(spec.poll_interval, float)
    assert spec.unknown_state_timeout == 0.0 and isinstance(spec.unknown_state_timeout, float)
    assert spec.cancel_timeout == 0.5
    assert (spec.stream_logs, spec.log_tail_lines, spec.create_artifacts, spec.reattach) == (
        False,
        0,
        False,
        False,
    )
    assert _validate("utils.echo", poll_interval=0.25, cancel_timeout=1).poll_interval == 0.25
    assert _validate("utils.echo").component_args == []
    assert _validate("utils.echo", cfg=None).cfg == {}


def test_validate_copies_dict_component_args() -> None:
    given = {"msg": "hi"}
    spec = _validate("utils.echo", app_args=given)
    assert spec.component_args == given and spec.component_args is not given


def test_base_name_falls_back_to_app_for_a_name_ending_in_a_separator() -> None:
    assert _validate("utils.").base_name == "app"
    assert _validate("my_comp.py:").base_name == "app"
    assert _validate("a/b").base_name == "b"
    assert _validate(echo_app("trainer")).base_name == "trainer"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"poll_interval": 0}, ("poll_interval", "> 0", "0")),
        ({"poll_interval": -0.5}, ("poll_interval", "> 0", "-0.5")),
        ({"cancel_timeout": 0}, ("cancel_timeout", "> 0", "0")),
        ({"unknown_state_timeout": -2}, ("unknown_state_timeout", ">= 0", "-2")),
        ({"poll_interval": float("inf")}, ("poll_interval", "finite", "inf")),
        ({"unknown_state_timeout": None}, ("unknown_state_timeout", "finite", "None")),
        ({"cancel_timeout": "30s"}, ("cancel_timeout", "finite", "'30s'", "str")),
        ({"poll_interval": False}, ("poll_interval", "finite", "False", "bool")),
        ({"log_tail_lines": True}, ("log_tail_lines", "int >= 0", "True")),
        ({"log_tail_lines": "5.0"}, ("log_tail_lines", "int >= 0", "'5.0'")),
        ({"log_tail_lines": 2.5}, ("log_tail_lines", "int >= 0", "2.5")),
        ({"stream_logs": 1}, ("stream_logs", "True or False", "1")),
        ({"create_artifacts": "nope"}, ("create_artifacts", "True or False", "'nope'")),
        ({"reattach": None}, ("reattach", "True or False", "None")),
        ({"scheduler": None}, ("scheduler", "'local_cwd'", "None")),
        ({"cfg": "a=1"}, ("cfg", "mapping", "str")),
        ({"workspace": b"/tmp"}, ("workspace", "path string", "bytes")),
    ],
)
def test_validate_rejection_names_the_argument_the_value_and_what_is_valid(
    overrides: dict, names: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate("utils.echo", **overrides)
    msg = str(info.value)
    for name in names:
        assert name in msg, (name, msg)


def test_validate_rejects_a_wrong_app_or_app_args_naming_what_is_valid() -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(None)
    assert "None (NoneType)" in str(info.value) and "'utils.echo'" in str(info.value)
    with pytest.raises(InvalidTaskArgumentError, match=r"42 \(int\)"):
        _validate(42)
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate("utils.echo", app_args="--msg hi")
    assert "'--msg hi'" in str(info.value) and "list of strings" in str(info.value)
    assert "dict" in str(info.value)
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(echo_app(), app_args={"msg": "hi"})
    msg = str(info.value)
    assert "app_args" in msg and "AppDef's roles" in msg and "'utils.echo'" in msg
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(AppDef(name="lonely"))
    assert "'lonely'" in str(info.value) and "add at least one Role" in str(info.value)


def test_validate_reports_each_problem_once_in_its_own_clause() -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(
            "utils.echo",
            poll_interval=-1,
            log_tail_lines=-1,
            reattach=None,
            cancel_timeout=0,
        )
    msg = str(info.value)
    assert "torchx_prefect" in msg.split(": ", 1)[0]
    clauses = msg.split(": ", 1)[1].removesuffix(".").split("; ")
    assert sorted(c.split()[0] for c in clauses) == [
        "cancel_timeout",
        "log_tail_lines",
        "poll_interval",
        "reattach",
    ]
    # one sentence: a capital first letter, one period at the very end
    assert msg[0].isupper() and msg.endswith(".") and not msg.endswith("..")
    assert not any(c.endswith(".") for c in clauses)
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(echo_app(), app_args=["--x"], create_artifacts=None, stream_logs=0)
    clauses = str(info.value).split(": ", 1)[1].removesuffix(".").split("; ")
    # (the app_args clause itself holds a "; ")
    assert clauses[0].split()[0] == "app_args"
    assert {"create_artifacts", "stream_logs"} <= {c.split()[0] for c in clauses}


# -- run options -------------------------------------------------------------------------------


class _OptsRunner:
    """A runner that only knows the run options of one scheduler."""

    def __init__(self) -> None:
        from torchx_core.specs import runopts

        self.asked: list[str] = []
        self.opts = runopts()
        self.opts.add("queue", type_=str, help="the queue", required=True)
        self.opts.add("priority", type_=int, help="the priority", default=0)

    def scheduler_run_opts(self, scheduler: str):  # type: ignore[no-untyped-def]
        self.asked.append(scheduler)
        return self.opts


def test_check_run_options_is_strict_about_the_schedulers_options() -> None:
    from torchx_core.specs.errors import InvalidRunConfigException
    from torchx_prefect._launch import check_run_options

    runner = _OptsRunner()
    check_run_options("fake", {"queue": "q", "priority": 2}, runner)
    assert runner.asked == ["fake"]
    with pytest.raises(InvalidRunConfigException, match="priorty"):
        check_run_options("fake", {"queue": "q", "priorty": 2}, runner)
    with pytest.raises(InvalidRunConfigException, match="priority"):
        check_run_options("fake", {"queue": "q", "priority": "high"}, runner)
    with pytest.raises(InvalidRunConfigException, match="queue"):
        check_run_options("fake", {}, runner)


def test_check_run_options_asks_a_new_runner_by_default() -> None:
    from torchx_core.specs.errors import InvalidRunConfigException, UnknownSchedulerException
    from torchx_prefect._launch import check_run_options

    check_run_options("local_cwd", {"log_dir": "/tmp/x"})
    with pytest.raises(InvalidRunConfigException, match="lgo_dir"):
        check_run_options("local_cwd", {"lgo_dir": "/tmp/x"})
    with pytest.raises(UnknownSchedulerException, match="no_such_scheduler"):
        check_run_options("no_such_scheduler", {})


# -- the call's identity -----------------------------------------------------------------------


def test_call_digest_is_short_hex_and_equal_for_equal_calls() -> None:
    from torchx_prefect._launch import call_digest

    a = call_digest(_validate("utils.echo", app_args=["--msg", "hi"], cfg={"a": 1, "b": 2}))
    b = call_digest(_validate("utils.echo", app_args=["--msg", "hi"], cfg={"b": 2, "a": 1}))
    assert a == b and len(a) == 16 and int(a, 16) >= 0
    # what does not change what is launched does not change the identity
    assert a == call_digest(
        _validate("utils.echo", app_args=["--msg", "hi"], cfg={"a": 1, "b": 2}, poll_interval=9.0)
    )
    assert call_digest(_validate(echo_app())) == call_digest(_validate(echo_app()))


@pytest.mark.parametrize(
    "change",
    [
        {"app_args": ["--msg", "ho"]},
        {"scheduler": "slurm"},
        {"cfg": {"a": 2}},
        {"workspace": "/tmp/ws"},
    ],
)
def test_call_digest_differs_when_what_is_launched_differs(change: dict) -> None:
    from torchx_prefect._launch import call_digest

    base = {"app_args": ["--msg", "hi"], "cfg": {"a": 1}}
    assert call_digest(_validate("utils.echo", **base)) != call_digest(
        _validate("utils.echo", **{**base, **change})
    )


def test_call_digest_tells_apps_components_and_unjsonable_options_apart() -> None:
    from pathlib import Path

    from torchx_prefect._launch import call_digest

    assert call_digest(_validate("utils.echo")) != call_digest(_validate("utils.sh"))
    assert call_digest(_validate(echo_app("a"))) != call_digest(_validate(echo_app("b")))
    other = AppDef(name="echo", roles=[Role(name="worker", image="/tmp", entrypoint="cat")])
    assert call_digest(_validate(echo_app())) != call_digest(_validate(other))
    assert call_digest(_validate("echo")) != call_digest(_validate(echo_app()))
    x = call_digest(_validate("utils.echo", cfg={"p": Path("/x")}))
    assert x != call_digest(_validate("utils.echo", cfg={"p": Path("/y")}))


# -- results and reports: exact forms ----------------------------------------------------------


def test_app_result_repr_and_dict_name_every_field() -> None:
    status = AppStatus(AppState.SUCCEEDED, ui_url="http://ui/a")
    res = AppResult("local_cwd://s/a", status, "a-123", reattached=True)
    assert repr(res) == (
        "AppResult(app_handle='local_cwd://s/a', state=SUCCEEDED, app_name='a-123',"
        " reattached=True)"
    )
    assert res.to_dict() == {
        "app_handle": "local_cwd://s/a",
        "app_name": "a-123",
        "reattached": True,
        "status": status.to_json(),
    }
    assert res.ui_url == "http://ui/a" and res.state == AppState.SUCCEEDED
    fresh = AppResult("h", AppStatus(AppState.SUCCEEDED))
    assert (fresh.app_name, fresh.reattached) == ("", False)


def test_status_markdown_exact_report() -> None:
    md = status_markdown("local_cwd://s/a", _failed_status())
    assert md == (
        "### TorchX app `local_cwd://s/a`\n"
        "\n"
        "**State:** FAILED &nbsp; **Restarts:** 1\n"
        "**Message:** exit 3\n"
        '**Error:** `{"message": "boom"}`\n'
        "\n"
        "| role | replica | state | hostname | error |\n"
        "|---|---|---|---|---|\n"
        "| worker | 0 | SUCCEEDED | h0 |  |\n"
        '| worker | 1 | FAILED | h1 | {"message": "rank1 boom"} |\n'
    )
    assert status_markdown("h", None) == (
        "### TorchX app `h`\n\nThe scheduler no longer knows this app.\n"
    )


def test_status_markdown_without_message_error_ui_or_roles() -> None:
    md = status_markdown("h", AppStatus(AppState.PENDING))
    assert md == (
        "### TorchX app `h`\n"
        "\n"
        "**State:** PENDING &nbsp; **Restarts:** 0\n"
        "\n"
        "| role | replica | state | hostname | error |\n"
        "|---|---|---|---|---|\n"
        "| - | - | - | - | - |\n"
    )
    st = AppStatus(
        AppState.RUNNING,
        ui_url="http://ui/x",
        roles=[RoleStatus("r", [ReplicaStatus(0, AppState.RUNNING, "r", None)])],  # type: ignore[arg-type]
    )
    lines = status_markdown("h", st).splitlines()
    assert lines[3] == "**UI:** [http://ui/x](http://ui/x)"
    assert lines[-1] == "| r | 0 | RUNNING |  |  |"


def test_status_markdown_cells_are_one_line_and_at_most_300_characters() -> None:
    exact = "m" * 300
    md = status_markdown("h", AppStatus(AppState.FAILED, msg=exact))
    assert f"**Message:** {exact}\n" in md
    md = status_markdown("h", AppStatus(AppState.FAILED, msg="x" * 301))
    assert f"**Message:** {'x' * 297}...\n" in md
    md = status_markdown("h", AppStatus(AppState.FAILED, msg="line one\nline two"))
    assert "**Message:** line one line two\n" in md


def test_validate_args_defaults_are_the_tasks_defaults() -> None:
    """The tasks and blocks pass every option; a direct caller gets exactly run_app's defaults."""
    import inspect

    from torchx_prefect.tasks import run_app, run_app_sync

    spec = validate_args("utils.echo")  # every option left to its default
    for task in (run_app, run_app_sync):
        for name, param in inspect.signature(task.fn).parameters.items():
            if name in ("app", "app_args", "cfg"):
                continue
            assert getattr(spec, name) == param.default, (task.name, name)
    assert spec.scheduler == "local_cwd" and spec.cfg == {}


def test_app_args_with_an_appdef_says_where_the_arguments_go() -> None:
    with pytest.raises(InvalidTaskArgumentError) as info:
        _validate(echo_app("given"), app_args=["--msg", "hi"])
    assert (
        "app_args is only used with a component name, but app is an AppDef; put the arguments"
        " into the AppDef's roles or pass a component name such as 'utils.echo' instead"
    ) in str(info.value)
