"""The torchx CLI against the fake scheduler (registered as a real entry-point plugin)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fake_scheduler import JobTable

from torchx_core.cli.cmd_log import parse_identifier
from torchx_core.cli.cmd_run import parse_component_and_args
from torchx_core.cli.main import run_main
from torchx_core.specs import AppState, ComponentArgumentError, MalformedAppHandleException


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = run_main(list(argv))
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def launch(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    rc, out, err = cli(
        capsys, "run", "-s", "fake", *extra, "utils.echo", "--msg", "hi", "--num_replicas", "2"
    )
    assert rc == 0, err
    return out.strip().splitlines()[-1]


def test_help_lists_subcommands_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0
    for name in (
        "run",
        "status",
        "log",
        "list",
        "describe",
        "cancel",
        "delete",
        "builtins",
        "runopts",
        "configure",
    ):
        assert name in out
    rc, out, _ = cli(capsys, "--version")
    assert rc == 0 and out.startswith("torchx-suite ")


def test_no_subcommand_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(capsys)
    assert rc == 1 and "usage: torchx" in err


def test_unknown_subcommand_and_bad_log_level_are_argparse_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = cli(capsys, "frobnicate")
    assert rc == 2 and "invalid choice" in err
    rc, _, err = cli(capsys, "--log_level", "LOUD", "list")
    assert rc == 2 and "invalid log level" in err


def test_run_prints_handle_and_submits(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = launch(capsys, "-cfg", "priority=3")
    assert handle.startswith("fake://torchx/echo-")
    (job,) = fake_plugin.jobs.values()
    assert job.request.cfg["priority"] == 3
    assert job.request.roles == [("echo", 2, "echo", ["hi"])]
    assert job.describes == 0  # not a local scheduler and no --wait: returns at once


@pytest.mark.parametrize("final,rc_expected", [(AppState.SUCCEEDED, 0), (AppState.FAILED, 1)])
def test_run_wait_log_exit_code_follows_app_state(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], final: AppState, rc_expected: int
) -> None:
    fake_plugin.final = final
    fake_plugin.steps = 3
    rc, _, err = cli(
        capsys, "run", "-s", "fake", "--wait", "--log", "utils.echo", "--num_replicas", "2"
    )
    assert rc == rc_expected
    assert "echo/0 echo 0 line 0" in err and "echo/1 echo 1 line 2" in err
    assert f"Job finished: {final}" in err


def test_run_log_streams_at_most_16_replicas_and_says_how_to_read_the_others(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_plugin.steps = 3
    rc, _, err = cli(
        capsys, "run", "-s", "fake", "--wait", "--log", "utils.echo", "--num_replicas", "20"
    )
    assert rc == 0, err
    handle = next(line for line in err.splitlines() if "showing 16 of 20 replicas" in line)
    assert "`torchx log fake://torchx/echo-" in handle and "/<role>/<k>`" in handle
    assert "echo/15 echo 15 line 2" in err and "echo/16 " not in err


def test_log_tail_with_a_bad_regex_fails_at_once_while_the_app_runs(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = launch(capsys)
    fake_plugin.hold = True  # the app runs until the test ends
    rc, _, err = cli(capsys, "log", "-t", "--regex", "(", handle)
    assert rc == 1 and "invalid log regex '('" in err


def test_dryrun_prints_app_and_request_without_submitting(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = cli(capsys, "run", "-s", "fake", "--dryrun", "utils.echo", "--msg", "yo")
    assert rc == 0
    assert "=== APPLICATION ===" in out and "=== SCHEDULER REQUEST ===" in out
    assert "FakeRequest(echo" in out and "'yo'" in out
    assert fake_plugin.jobs == {}


def test_torchxconfig_supplies_run_defaults_and_run_options(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    (isolated_config / ".torchxconfig").write_text(
        "[cli:run]\nscheduler = fake\ncomponent = utils.echo\n"
        "[fake]\nqueue = gpu\npriority = 1\n"
        "[component:utils.echo]\nmsg = from-config\n"
    )
    rc, _, err = cli(capsys, "run", "-cfg", "priority=9")
    assert rc == 0, err
    (job,) = fake_plugin.jobs.values()
    assert job.request.cfg["queue"] == "gpu"
    assert job.request.cfg["priority"] == 9  # explicit -cfg wins over the file
    assert job.request.roles[0][3] == ["from-config"]


def test_component_help_comes_from_docstring(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = cli(capsys, "run", "-s", "fake", "utils.echo", "--help")
    assert rc == 0
    assert "Echos a message to stdout (calls echo)" in out and "--msg" in out
    assert fake_plugin.jobs == {}


@pytest.mark.parametrize(
    "argv,needle,code",
    [
        (["run", "-s", "fake", "utils.ech"], "utils.echo", 1),  # suggestion; TorchX: 1
        # bad command-line arguments exit 2, as argparse and TorchX 0.7.0 do
        (["run", "-s", "fake", "utils.echo", "--nope", "1"], "--nope", 2),
        (["run", "-s", "fake", "-cfg", "priority=high", "utils.echo"], "priority", 1),
        (["run", "-s", "nosuch", "utils.echo"], "local_cwd", 2),
        (["run", "-s", "fake"], "no component given", 2),
        (["run", "-s", "fake", "utils.echo", "--msg", "a", "--msg", "b"], "more than once", 2),
        (["status", "not-a-handle"], "<scheduler_backend>://", 1),
        (["status", "fake://torchx/missing"], "does not exist", 1),
        (["log", "fake://torchx/missing"], "Unknown app", 1),
        (["describe", "fake://torchx/missing"], "does not exist", 1),
        (["runopts", "nosuch"], "does not exist", 2),
        (["configure", "--print", "-s", "nosuch"], "does not exist", 2),
    ],
)
def test_bad_input_is_a_clear_error_not_a_traceback(
    fake_plugin: JobTable,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    needle: str,
    code: int,
) -> None:
    rc, _, err = cli(capsys, *argv)
    assert rc == code
    assert needle in err
    assert "Traceback" not in err


def test_an_unknown_run_option_is_refused_with_a_suggestion(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    # an unknown key is an error at every entry point (TorchX's cfg_from_str dropped it)
    rc, _, err = cli(capsys, "run", "-s", "fake", "-cfg", "priorit=1", "utils.echo")
    assert rc != 0 and "unknown run option 'priorit'. Did you mean: 'priority'?" in err
    assert fake_plugin.jobs == {}


def test_run_option_given_twice_exits_1_as_torchx(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    # TorchX exits 1 for a `torchx run` option given twice (argparse's own errors exit 2)
    for argv in (["-s", "fake", "-s", "fake"], ["-s", "fake", "-cfg", "a=1", "-cfg", "b=2"]):
        rc, _, err = cli(capsys, "run", *argv, "utils.echo")
        assert rc == 1 and "is given more than once" in err and "usage:" in err


def test_status_text_and_json(fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]) -> None:
    handle = launch(capsys)
    rc, out, _ = cli(capsys, "status", handle)
    assert rc == 0 and "State: SUCCEEDED" in out and "echo[1]" in out
    rc, out, _ = cli(capsys, "status", handle, "--json")
    # TorchX's output: AppStatus.to_json() on one line
    assert out.count("\n") == 1
    data = json.loads(out)
    assert list(data) == ["state", "num_restarts", "roles", "msg", "structured_error_msg", "url"]
    assert data["state"] == "SUCCEEDED"
    assert [(r["id"], r["state"]) for r in data["roles"][0]["replicas"]] == [(0, 4), (1, 4)]
    rc, out, _ = cli(capsys, "status", handle, "--json", "--roles", "echo")
    assert [r["role"] for r in json.loads(out)["roles"]] == ["echo"]
    rc, out, err = cli(capsys, "status", handle, "--roles", "echo,ecko")
    assert rc == 1 and out == "" and "no role(s) 'ecko'" in err and "Its roles: echo" in err


def test_status_of_several_apps_is_one_batched_call(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.fake_scheduler import FakeScheduler

    h1, h2 = launch(capsys), launch(capsys)
    gone = h1.rsplit("/", 1)[0] + "/never-submitted"
    batches: list[list[str]] = []
    real = FakeScheduler.describe_many

    def counting(self: FakeScheduler, app_ids: Any) -> Any:
        batches.append(list(app_ids))
        return real(self, batches[-1])

    monkeypatch.setattr(FakeScheduler, "describe_many", counting)
    rc, out, err = cli(capsys, "status", h1, h2, "--json")
    assert rc == 0 and len(batches) == 1
    assert [d["app_handle"] for d in json.loads(out)] == [h1, h2]
    rc, out, err = cli(capsys, "status", h2, gone, h1)
    assert rc == 1 and len(batches) == 2 and len(batches[1]) == 3
    assert out.index(f"== {h2}") < out.index(f"== {h1}") and "State: SUCCEEDED" in out
    assert "never-submitted does not exist" in err


def test_log_selection(fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]) -> None:
    handle = launch(capsys)
    rc, out, _ = cli(capsys, "log", handle)
    assert rc == 0
    assert out.splitlines() == [f"echo/{k} echo {k} line {i}" for k in (0, 1) for i in range(3)]
    rc, out, _ = cli(capsys, "log", f"{handle}/echo/1", "--regex", "line [12]")
    assert out.splitlines() == ["echo/1 echo 1 line 1", "echo/1 echo 1 line 2"]
    rc, _, err = cli(capsys, "log", f"{handle}/ech")
    assert rc == 1 and "'echo'" in err
    rc, _, err = cli(capsys, "log", f"{handle}/echo/5")
    assert rc == 1 and "valid: [0, 1]" in err


def test_list_describe_cancel_delete(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_plugin.steps = 100  # stays RUNNING until cancelled
    h1 = launch(capsys)
    h2 = launch(capsys)
    rc, out, _ = cli(capsys, "list", "-s", "fake")
    assert rc == 0 and h1 in out and h2 in out and "APP HANDLE" in out
    rc, out, _ = cli(capsys, "list", "-s", "fake", "--json")
    assert {json.loads(line)["app_handle"] for line in out.splitlines()} == {h1, h2}
    rc, out, _ = cli(capsys, "describe", h1)
    assert rc == 0 and "'entrypoint': 'echo'" in out
    rc, out, _ = cli(capsys, "describe", h1, "--json")
    assert json.loads(out)["roles"][0]["entrypoint"] == "echo"
    rc, _, _ = cli(capsys, "cancel", h1)
    assert rc == 0
    job1 = fake_plugin.jobs[h1.rsplit("/", 1)[1]]
    assert job1.state == AppState.CANCELLED and job1.cancelled == 1
    assert cli(capsys, "cancel", h1)[0] == 0  # idempotent
    assert cli(capsys, "delete", h2)[0] == 0
    assert h2.rsplit("/", 1)[1] not in fake_plugin.jobs


def test_builtins_runopts_schedulers_configure(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    rc, out, _ = cli(capsys, "builtins")
    assert rc == 0 and "dist.ddp" in out and "utils.echo" in out
    rc, out, _ = cli(capsys, "builtins", "--print", "utils.echo")
    assert "def echo(" in out
    rc, out, _ = cli(capsys, "runopts", "fake")
    assert rc == 0 and "queue" in out and "priority" in out
    rc, out, _ = cli(capsys, "schedulers")
    assert "fake" in out and "plugin" in out and "local_cwd" in out
    rc, out, _ = cli(capsys, "configure", "-s", "fake", "--all", "--print")
    assert "[fake]" in out and "queue = default" in out
    assert cli(capsys, "configure", "-s", "fake", "--all")[0] == 0
    assert "[fake]" in (isolated_config / ".torchxconfig").read_text()


def test_configure_behaves_as_torchx(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    """TorchX 0.7.0: `-a` = `--all` (optional run options too), every registered scheduler by
    default, and an existing .torchxconfig is overwritten (we also keep it as .bak)."""
    config = isolated_config / ".torchxconfig"
    config.write_text("[local_cwd]\nlog_dir = mine\n")
    assert cli(capsys, "configure")[0] == 0
    text = config.read_text()
    for name in ("local_cwd", "slurm", "kubernetes", "fake"):
        assert f"[{name}]" in text
    assert "queue = default" not in text  # optional options only with -a
    assert (isolated_config / ".torchxconfig.bak").read_text() == "[local_cwd]\nlog_dir = mine\n"
    assert cli(capsys, "configure", "-a", "-s", "fake")[0] == 0
    assert "queue = default" in config.read_text() and "[slurm]" not in config.read_text()


def test_parse_component_and_args() -> None:
    assert parse_component_and_args(["utils.echo", "--msg", "x"], None) == (
        "utils.echo",
        ["--msg", "x"],
    )
    assert parse_component_and_args(["--", "--msg", "x"], "utils.echo") == (
        "utils.echo",
        ["--msg", "x"],
    )
    assert parse_component_and_args([], "a.b") == ("a.b", [])
    # repeated options after `--` belong to the program, not the component
    assert parse_component_and_args(["c", "--", "-x", "-x"], None) == ("c", ["--", "-x", "-x"])
    with pytest.raises(ComponentArgumentError):
        parse_component_and_args([], None)


def test_parse_log_identifier() -> None:
    assert parse_identifier("local_cwd://s/app") == ("local_cwd://s/app", None, None)
    assert parse_identifier("local_cwd:///app/trainer") == ("local_cwd:///app", "trainer", None)
    assert parse_identifier("k8s://s/app/trainer/0,2") == ("k8s://s/app", "trainer", [0, 2])
    for bad in ("app", "x://s", "x://s/app/r/a", "x://s/app/", "x://s/app/r/"):  # TorchX's
        with pytest.raises(MalformedAppHandleException):
            parse_identifier(bad)


def test_only_the_used_subcommand_is_imported() -> None:
    code = (
        "import sys\n"
        "from torchx_core.cli.main import run_main\n"
        "try:\n    run_main(['status', '--help'])\nexcept SystemExit:\n    pass\n"
        "mods = sorted(m for m in sys.modules if m.startswith('torchx_core.cli.cmd_'))\n"
        "heavy = [m for m in ('importlib.metadata', 'torchx_core.runner',\n"
        "         'torchx_core.schedulers.local.scheduler', 'yaml', 'fsspec', 'torch',\n"
        "         'docker', 'kubernetes', 'boto3', 'ray') if m in sys.modules]\n"
        "print(mods, heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        out.stderr.strip().splitlines()[-1]
        == "['torchx_core.cli.cmd_base', 'torchx_core.cli.cmd_status'] []"
    )


def test_workspace_defaults_to_cwd_only_on_workspace_schedulers(
    fake_plugin: JobTable,
    capsys: pytest.CaptureFixture[str],
    isolated_config: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from support import fake_scheduler

    from torchx_core.workspace.api import WorkspaceMixin

    # the plain fake has no workspace support: no default workspace is set (the run succeeds)
    assert cli(capsys, "run", "-s", "fake", "utils.echo")[0] == 0

    built: list[str] = []

    class WsFake(fake_scheduler.FakeScheduler, WorkspaceMixin[None]):
        def build_workspace_and_update_role(self, role, workspace, cfg) -> None:  # type: ignore[no-untyped-def]
            built.append(str(workspace))
            role.image = "built-image"

    monkeypatch.setattr(fake_scheduler, "FakeScheduler", WsFake)
    assert cli(capsys, "run", "-s", "fake", "utils.echo")[0] == 0
    assert built and str(isolated_config) in built[0]
    assert cli(capsys, "run", "-s", "fake", "--workspace", "/tmp", "utils.echo")[0] == 0
    assert "/tmp" in built[-1]


def test_ddp_through_the_cli(fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(
        capsys, "run", "-s", "fake", "dist.ddp", "-j", "2x2", "--script", "t.py", "-h", "cpu.small"
    )
    assert rc == 0, err
    (job,) = fake_plugin.jobs.values()
    (name, replicas, entrypoint, args) = job.request.roles[0]
    assert (name, replicas, entrypoint) == ("t", 2, "bash")
    assert "--nnodes 2 --nproc_per_node 2" in args[1]
    rc, out, _ = cli(capsys, "run", "-s", "fake", "dist.ddp", "--help")
    assert rc == 0 and "[-h str]" in out and "nproc_per_node" in out


def test_plugin_subcommand_from_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.fake_scheduler import write_plugin_dist

    site = tmp_path / "cmdsite"
    write_plugin_dist(
        site, "[torchx.cli.cmds]\nhello = hello_cmd_mod:CmdHello\n", name="hello_cmd_plugin"
    )
    (site / "hello_cmd_mod.py").write_text(
        "class CmdHello:\n"
        "    help = 'says hello'\n"
        "    def add_arguments(self, p):\n        p.add_argument('--who', default='world')\n"
        "    def run(self, args):\n        print('hello', args.who)\n        return 0\n"
    )
    monkeypatch.syspath_prepend(str(site))
    rc, out, _ = cli(capsys, "hello", "--who", "you")
    assert rc == 0 and out == "hello you\n"
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0 and "says hello (plugin)" in out and "run" in out


def test_plugin_subcommand_replaces_a_builtin_and_broken_one_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TorchX: `torchx.cli.cmds` entry points take priority over the built-in subcommands."""
    from support.fake_scheduler import write_plugin_dist

    from torchx_core.cli.cmd_base import SubCommand
    from torchx_core.cli.main import get_default_sub_cmds, get_sub_cmds

    site = tmp_path / "cmdsite2"
    write_plugin_dist(
        site,
        "[torchx.cli.cmds]\nstatus = my_status_mod:MyStatus\nbadcmd = no_such_cmd_mod:Cmd\n",
        name="status_plugin",
    )
    (site / "my_status_mod.py").write_text(
        "from torchx_core.cli.cmd_base import SubCommand\n"
        "class MyStatus(SubCommand):\n"
        '    """our own status"""\n'
        "    def add_arguments(self, p):\n        p.add_argument('handle')\n"
        "    def run(self, args):\n        print('custom', args.handle)\n"
    )
    monkeypatch.syspath_prepend(str(site))
    rc, out, _ = cli(capsys, "status", "x://y/z")
    assert rc == 0 and out == "custom x://y/z\n"
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0
    assert "our own status (replaces the built-in)" in out
    assert "badcmd" in out and "BROKEN" in out and "no_such_cmd_mod" in out
    rc, out, _ = cli(capsys, "list", "-s", "local_cwd")  # the broken plugin breaks nothing else
    assert rc == 0
    assert isinstance(get_sub_cmds()["status"], SubCommand)
    assert type(get_sub_cmds()["status"]).__name__ == "MyStatus"
    assert type(get_default_sub_cmds()["status"]).__name__ == "CmdStatus"


def test_broken_plugin_for_a_builtin_name_falls_back_to_the_builtin(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from support.fake_scheduler import write_plugin_dist

    site = tmp_path / "cmdsite3"
    write_plugin_dist(site, "[torchx.cli.cmds]\nbuiltins = gone_mod:Cmd\n", name="gone_plugin")
    monkeypatch.syspath_prepend(str(site))
    rc, out, _ = cli(capsys, "builtins")
    assert rc == 0 and "utils.echo" in out
    assert "`builtins` command plugin failed to load" in caplog.text


def test_cancel_and_delete_say_what_they_did(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = cli(capsys, "cancel", "fake://torchx/missing")
    assert rc == 1 and "does not exist" in err and "nothing to cancel" in err
    rc, _, err = cli(capsys, "delete", "fake://torchx/missing")
    assert rc == 0 and "nothing to delete" in err
    handle = launch(capsys)  # steps=1: SUCCEEDED at the first status
    rc, _, err = cli(capsys, "cancel", handle)
    assert rc == 0 and "already ended (SUCCEEDED)" in err
    assert fake_plugin.jobs[handle.rsplit("/", 1)[1]].cancelled == 0
    rc, _, err = cli(capsys, "delete", handle)
    assert rc == 0 and f"deleted {handle}" in err and not fake_plugin.jobs


def test_run_flag_mistakes_get_hints(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    rc, _, err = cli(capsys, "run", "--msg", "x")
    assert rc == 2 and "unrecognized arguments: --msg" in err and "torchx run -- --msg hi" in err
    rc, _, err = cli(
        capsys, "run", "-s", "fake", "--workspace", str(isolated_config / "nope"), "utils.echo"
    )
    assert rc == 1 and "nope" in err and "do not exist" in err and "Traceback" not in err
    assert fake_plugin.jobs == {}
    rc, _, err = cli(capsys, "configure", "-s", ",", "--print")
    assert rc == 1 and "names no scheduler" in err


def test_unknown_cli_run_config_key_is_warned_about(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    (isolated_config / ".torchxconfig").write_text(
        "[cli:run]\nschedular = other\nscheduler = fake\n"
    )
    rc, _, err = cli(capsys, "run", "utils.echo")
    assert rc == 0, err
    assert "`schedular` in the [cli:run] section" in err and "'scheduler'" in err
    assert len(fake_plugin.jobs) == 1


def test_schedulers_lists_a_broken_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.fake_scheduler import write_plugin_dist

    from torchx_core.schedulers.registry import default_registry

    site = tmp_path / "brokensite"
    write_plugin_dist(
        site,
        "[torchx.schedulers]\nbroken_one = no_such_module_xyz:create_scheduler\n",
        name="broken_plugin",
    )
    monkeypatch.syspath_prepend(str(site))
    default_registry().refresh()
    try:
        rc, out, _ = cli(capsys, "schedulers")
        assert rc == 0 and "local_cwd" in out
        assert "broken_one" in out and "BROKEN" in out and "no_such_module_xyz" in out
        rc, _, err = cli(capsys, "run", "-s", "broken_one", "utils.echo")
        assert rc == 1 and "failed to load" in err and "Traceback" not in err
    finally:
        default_registry().refresh()


def test_log_level_takes_names_and_torchx_style_numbers(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = cli(capsys, "--log_level", "10", "run", "-s", "fake", "utils.echo")
    assert rc == 0 and "DEBUG" in err  # TorchX's --log_level is an int
    rc, _, err = cli(capsys, "--log_level", "warning", "run", "-s", "fake", "utils.echo")
    assert rc == 0 and "INFO" not in err
    rc, _, err = cli(capsys, "--log_level", "verbose", "list")
    assert rc == 2 and "invalid log level 'verbose'" in err and "DEBUG" in err


def test_log_of_many_lines_is_complete_and_in_order(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = launch(capsys)
    job = fake_plugin.jobs[handle.rsplit("/", 1)[1]]
    n = 20_000  # more than one write chunk
    job.logs[("echo", 0)] = [f"l{i}\n" for i in range(n)] + ["no newline at the end"]
    rc, out, _ = cli(capsys, "log", f"{handle}/echo/0")
    assert rc == 0
    assert out.splitlines() == [f"echo/0 l{i}" for i in range(n)] + ["echo/0 no newline at the end"]


@pytest.mark.parametrize(
    "line", ["plain\n", "no newline", "a\nb\n", "50%\r100%\n", "\rstart\n", "", "\n", "x\r\n"]
)
def test_fast_prefixing_matches_the_general_rule(line: str) -> None:
    from torchx_core.cli._follow import _prefixed
    from torchx_core.cli._term import prefix_line

    assert _prefixed("r/0 ", line) == prefix_line(
        "r/0 ", line if line.endswith("\n") else line + "\n"
    )


def test_component_without_docstring_runs_and_help_shows_a_tip(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    """Migration break 1: TorchX 0.7.0 runs a typed component that has no docstring."""
    (isolated_config / "nodoc.py").write_text(
        "from torchx_core.specs import AppDef, Role\n"
        "def train(lr: float = 0.1, epochs: int = 1) -> AppDef:\n"
        "    return AppDef('train', [Role('r', image='i', entrypoint='echo', args=[str(lr)])])\n"
    )
    rc, out, _ = cli(capsys, "run", "-s", "fake", "nodoc.py:train", "--help")
    assert rc == 0 and "TIP" in out and "--lr" in out
    rc, out, err = cli(capsys, "run", "-s", "fake", "nodoc.py:train", "--lr", "0.5")
    assert rc == 0, err
    (job,) = fake_plugin.jobs.values()
    assert job.app.roles[0].args == ["0.5"]


def test_torchx_style_scheduler_plugins_through_real_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Migration break 2: TorchX users re-register the built-ins next to their plugin (TorchX's
    plugins replace the defaults); that re-registration is idempotent, a real override of a
    built-in is allowed and shown, and neither breaks the other plugin schedulers."""
    from support.fake_scheduler import write_plugin_dist

    from torchx_core.schedulers.registry import default_registry

    site = tmp_path / "torchx_style"
    write_plugin_dist(
        site,
        "[torchx.schedulers]\n"
        "local_cwd = torchx_core.schedulers.local_scheduler:create_scheduler\n"
        "slurm = support.fake_scheduler:create_scheduler\n"
        "fake = support.fake_scheduler:create_scheduler\n",
        name="torchx_style_plugins",
    )
    monkeypatch.syspath_prepend(str(site))
    default_registry().refresh()
    try:
        rc, out, _ = cli(capsys, "schedulers")
        assert rc == 0
        rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
        assert "(builtin, default)" in rows["local_cwd"]
        assert "overrides the builtin" in rows["slurm"]
        assert "(plugin)" in rows["fake"] and "BROKEN" not in out
        from torchx_core.schedulers import get_scheduler_factory

        assert get_scheduler_factory("slurm").__module__ == "support.fake_scheduler"
    finally:
        default_registry().refresh()


def test_torchxconfig_varargs_fill_utils_sh(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    """Silent incompatibility 2 (issue 25): ``[component:utils.sh] args = ...`` fills ``*args``
    when the command line gives none, as in TorchX; the command line wins otherwise."""
    (isolated_config / ".torchxconfig").write_text(
        "[component:utils.sh]\nargs = echo from-config\n"
    )
    rc, _, err = cli(capsys, "run", "-s", "fake", "utils.sh")
    assert rc == 0, err
    rc, _, err = cli(capsys, "run", "-s", "fake", "utils.sh", "echo", "from-cli")
    assert rc == 0, err
    first, second = fake_plugin.jobs.values()
    assert first.request.roles[0][3] == ["-c", "echo from-config"]
    assert second.request.roles[0][3] == ["-c", "echo from-cli"]


@pytest.mark.parametrize("extra", [["--wait"], ["--log"]])
def test_run_waits_through_runner_wait_even_for_an_ended_app(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """As TorchX: ``torchx run`` waits with ``Runner.wait`` (its users patch it to simulate a
    signal); what it raises ends the command, and the runner's schedulers are closed."""
    from unittest import mock

    from torchx_core.runner import Runner

    class Signalled(Exception):
        pass

    import argparse

    from torchx_core.cli.cmd_run import CmdRun

    fake_plugin.steps = 0  # ended by the first status read
    cmd = CmdRun()
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    args = parser.parse_args(["-s", "fake", *extra, "utils.echo", "--msg", "hi"])
    closed = fake_plugin.closed
    with (
        mock.patch.object(Runner, "wait", side_effect=Signalled) as wait,
        pytest.raises(Signalled),
    ):
        cmd.run(args)
    wait.assert_called_once()
    assert fake_plugin.closed > closed
