"""The CLI's TorchX library API: names TorchX users import, patch or call to build their own CLI
(``cmd_log.get_logs``, ``argparse_util``, ``main.run_main(subcmds, argv)``, ``main.load_group``,
``cmd_tracker``'s ``func`` defaults, ``list -cfg``), behaving as TorchX's."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from unittest import mock

import pytest
from support.fake_scheduler import JobTable

from torchx_core.cli import argparse_util, cmd_log, cmd_tracker, main
from torchx_core.cli.cmd_base import SubCommand
from torchx_core.cli.cmd_list import CmdList
from torchx_core.runner import config
from torchx_core.specs import AppState


def add_job(table: JobTable, app_id: str, roles: dict[str, int], state: AppState) -> str:
    """A job the fake already knows, in ``state``, with these roles (name -> replicas)."""
    from support.fake_scheduler import FakeJob, FakeRequest

    from torchx_core.specs import AppDef, Role

    app = AppDef(
        app_id, [Role(n, "img", entrypoint="echo", num_replicas=k) for n, k in roles.items()]
    )
    request = FakeRequest(app_id, [(n, k, "echo", []) for n, k in roles.items()], {})
    table.jobs[app_id] = FakeJob(app=app, request=request, state=state)
    return f"fake://torchx/{app_id}"


def test_get_logs_writes_every_selected_replica_with_torchx_prefixes(
    fake_plugin: JobTable,
) -> None:
    handle = add_job(fake_plugin, "a1", {"master": 1, "trainer": 3}, AppState.RUNNING)
    for k in range(3):
        fake_plugin.jobs["a1"].logs[("trainer", k)] = ["INFO foo\n", "WARN bar\n"]
    fake_plugin.jobs["a1"].logs[("master", 0)] = ["INFO m\n"]
    g, e = cmd_log.GREEN, cmd_log.ENDC
    out = io.StringIO()
    cmd_log.get_logs(out, f"{handle}/trainer/0,2", regex="WARN")
    assert sorted(out.getvalue().splitlines()) == [
        f"{g}trainer/0{e} WARN bar",
        f"{g}trainer/2{e} WARN bar",
    ]
    out = io.StringIO()
    cmd_log.get_logs(out, handle, regex="INFO")  # every role: the app is started, all replicas
    assert len(out.getvalue().splitlines()) == 4 and f"{g}master/0{e} INFO m" in out.getvalue()


def test_get_logs_of_an_unknown_app_warns_and_a_bad_identifier_exits_1(
    fake_plugin: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    out = io.StringIO()
    cmd_log.get_logs(out, "fake://torchx/nope/trainer", regex=None)
    assert out.getvalue() == "" and "app `fake://torchx/nope` not found" in caplog.text
    # as TorchX: logged, then sys.exit(1) (parse_identifier is the typed form)
    for bad in ("fake://session", "fake://s/app/role/", "local:///app/"):
        with (
            mock.patch("sys.exit", side_effect=RuntimeError("exit")) as exit_,
            pytest.raises(RuntimeError),
        ):
            cmd_log.validate(bad)
        exit_.assert_called_once_with(1)
        with pytest.raises(SystemExit):
            cmd_log.get_logs(out, bad, regex=None)
    assert "SCHEDULER://" in caplog.text
    cmd_log.validate("kubernetes://session/queue:name-1234/role/1,2,3")


def test_get_logs_of_an_unknown_role_exits_1(
    fake_plugin: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    handle = add_job(fake_plugin, "a3", {"trainer": 1}, AppState.RUNNING)
    with (
        mock.patch("sys.exit", side_effect=RuntimeError("exit")) as exit_,
        pytest.raises(RuntimeError),
    ):
        cmd_log.get_logs(io.StringIO(), f"{handle}/trainr", regex=None)
    exit_.assert_called_once_with(1)
    assert "has no role 'trainr'. Did you mean: 'trainer'?" in caplog.text


def test_get_logs_uses_the_patchable_get_runner(fake_plugin: JobTable) -> None:
    handle = add_job(fake_plugin, "a2", {"r": 1}, AppState.RUNNING)
    fake_plugin.jobs["a2"].logs[("r", 0)] = ["x\n"]
    from torchx_core.runner import get_runner

    with mock.patch.object(cmd_log, "get_runner", side_effect=get_runner) as patched:
        cmd_log.get_logs(io.StringIO(), f"{handle}/r/0", regex=None)
    patched.assert_called_once()


def test_torchxconfig_actions_take_their_default_from_the_cli_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".torchxconfig").write_text("[cli:run]\nworkspace = baz\n[cli:list]\ns = k8s\n")
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(tmp_path)])
    monkeypatch.setattr(argparse_util.torchxconfig, "_subcmd_configs", {})
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True, action=argparse_util.torchxconfig_run)
    parser.add_argument("--s", default="local", action=argparse_util.torchxconfig_list)
    parser.add_argument("--other", default="d", action=argparse_util.torchxconfig_run)
    assert vars(parser.parse_args([])) == {"workspace": "baz", "s": "k8s", "other": "d"}
    assert parser.parse_args(["--workspace", "bar"]).workspace == "bar"
    with pytest.raises(SystemExit):
        parser.parse_args(["--workspace", "a", "--workspace", "b"])


def test_arg_once_is_scoped_to_one_parse(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--w", action=argparse_util.ArgOnceAction)
    assert parser.parse_args(["--w", "a"]).w == "a"
    assert parser.parse_args(["--w", "b"]).w == "b"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--w", "a", "--w", "b"])
    assert exit_info.value.code == 1  # TorchX's exit code for it
    assert "`--w` is given more than once" in capsys.readouterr().err


class _Hello(SubCommand):
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("--who", default="world")

    def run(self, args: argparse.Namespace) -> None:
        print(f"hello {args.who}")


def test_run_main_with_ones_own_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.run_main({"hello": _Hello()}, ["hello", "--who", "x"]) == 0
    assert capsys.readouterr().out == "hello x\n"
    with pytest.raises(SystemExit):
        main.run_main({"hello": _Hello()}, ["status", "fake://s/a"])  # not one of them


def test_main_returns_on_success_and_exits_on_failure(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a3", {"r": 1}, AppState.RUNNING)
    assert main.main(["status", handle]) is None
    with pytest.raises(SystemExit) as e:
        main.main(["status", "fake://torchx/unknown"])
    assert e.value.code == 1


def test_get_sub_cmds_reads_plugins_through_load_group(caplog: pytest.LogCaptureFixture) -> None:
    broken = mock.Mock(side_effect=ImportError("gone"))
    with mock.patch.object(
        main, "load_group", return_value={"run": _Hello, "bad": broken, "odd": lambda: 42}
    ):
        cmds = main.get_sub_cmds()
    assert isinstance(cmds["run"], _Hello)
    assert "bad" not in cmds and "odd" not in cmds and "status" in cmds
    assert "`bad` failed to load" in caplog.text and "gives int, not a SubCommand" in caplog.text


def test_list_takes_scheduler_args_and_the_config_file(
    fake_plugin: JobTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".torchxconfig").write_text("[fake]\npriority = 7\nqueue = from_file\n")
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(tmp_path)])
    parser = argparse.ArgumentParser()
    CmdList().add_arguments(parser)
    from torchx_core.runner import Runner

    with mock.patch.object(Runner, "list", return_value=[]) as listed:
        CmdList().run(parser.parse_args(["-s", "fake", "-cfg", "queue=q1"]))
    listed.assert_called_once_with("fake", {"queue": "q1", "priority": 7})


def test_tracker_subcommands_set_func_and_raise_runtime_error_without_a_tracker() -> None:
    cmd = cmd_tracker.CmdTracker()
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    args = parser.parse_args(["list", "jobs"])
    with (
        mock.patch.object(cmd_tracker, "get_configured_trackers", return_value={}),
        pytest.raises(RuntimeError, match="no trackers are configured"),
    ):
        args.func(args)
    tracker = mock.Mock()
    tracker.run_ids.return_value = ["id1"]
    with mock.patch.object(cmd_tracker.CmdTracker, "tracker", tracker):
        args = parser.parse_args(["list", "jobs", "--parent-run-id", "p"])
        args.func(args)
    tracker.run_ids.assert_called_once_with(parent_run_id="p")


def test_run_args_from_json_fills_torchx_defaults_and_names_bad_fields() -> None:
    from torchx_core.cli.cmd_run import RunArgsError, TorchXRunArgs, torchx_run_args_from_json

    run = torchx_run_args_from_json(
        {"component_name": "utils.echo", "scheduler": "local_cwd", "scheduler_args": {}}
    )
    assert run == TorchXRunArgs("utils.echo", "local_cwd", {}, workspace=str(Path.cwd()))
    with pytest.raises(RunArgsError) as missing:
        torchx_run_args_from_json({"component_name": "x", "scheduler_args": {}})
    # TorchX's message first (its users' tests compare args[0]), then what is required
    assert missing.value.args[0] == "The following required fields are missing: scheduler"
    assert "needs component_name, scheduler, scheduler_args" in str(missing.value)
    with pytest.raises(RunArgsError, match=r"schedulr.*Did you mean: 'scheduler'") as extra:
        torchx_run_args_from_json(
            {"component_name": "x", "scheduler": "s", "scheduler_args": {}, "schedulr": "s"}
        )
    assert extra.value.args[0] == "The following fields are not part of the run command: schedulr."


def test_run_from_stdin_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """TorchX's ``torchx run --stdin``: the run comes as one JSON object; ``--dryrun`` may be
    added, any other option is refused."""
    import json
    import os

    run = {
        "component_name": "utils.echo",
        "scheduler": "local_cwd",
        "scheduler_args": {"log_dir": str(tmp_path)},
        "component_args": {"msg": "from json"},
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(run)))
    monkeypatch.delenv("TORCHX_CONTEXT_NAME", raising=False)
    assert main.run_main(["run", "--stdin", "--dryrun"]) == 0
    out = capsys.readouterr().out
    assert "=== SCHEDULER REQUEST ===" in out and "from json" in out and str(tmp_path) in out
    assert os.environ["TORCHX_CONTEXT_NAME"] == "cli_run"
    for bad in (["--wait"], ["-s", "slurm"], ["utils.echo"]):
        monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(run)))
        assert main.run_main(["run", "--stdin", *bad]) == 2  # the command's parser.error
    assert "cannot give --wait with --stdin" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("[1, 2]"))
    assert main.run_main(["run", "--stdin"]) == 2
    assert "expected a JSON object" in capsys.readouterr().err


def test_parse_component_name_and_args_as_torchx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TorchX's ``cmd_run._parse_component_name_and_args(args, subparser, dirs)``: the default
    component from ``[cli:run]`` in ``dirs``; bare dashes are values; problems exit 2."""
    from torchx_core.cli.cmd_run import _parse_component_name_and_args as parse

    sp = argparse.ArgumentParser(prog="test")
    dirs = [str(tmp_path)]
    assert parse(["utils.echo", "--msg", "hi", "-  ", "-  "], sp, dirs) == (
        "utils.echo",
        ["--msg", "hi", "-  ", "-  "],
    )
    with pytest.raises(SystemExit) as e:
        parse(["--msg", "hi"], sp, dirs)  # no component, none configured
    assert e.value.code == 2 and "no component given" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["utils.echo", "--msg", "a", "--msg", "b"], sp, dirs)
    (tmp_path / ".torchxconfig").write_text("[cli:run]\ncomponent = custom.echo\n")
    assert parse(["--", "--msg", "hi"], sp, dirs) == ("custom.echo", ["--msg", "hi"])
    assert parse([], sp, dirs) == ("custom.echo", [])


def test_builtins_method_and_prefix_line_as_torchx() -> None:
    from torchx_core.cli.cmd_builtins import CmdBuiltins

    builtins = CmdBuiltins()._builtins()
    assert "utils.echo" in builtins
    assert all(c.validation_errors == [] for c in builtins.values())
    p = cmd_log._prefix_line
    assert p("<p>", "foo\rtest\n") == "<p>foo\r<p>test\n"
    assert p("<p>", "\rtest\n") == "\r<p>test\n"
    assert p("<p>", "foo\ntest\n") == "<p>foo\n<p>test\n"
