"""Builtin components: linter, argument parsing, the AppDefs they build, their helper apps."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from torchx_core.apps.utils import booth_main, copy_main
from torchx_core.components import dist, serve, utils
from torchx_core.components._apps import serve_main
from torchx_core.specs import AppDef, ComponentArgumentError, finder, materialize_appdef
from torchx_core.specs.file_linter import validate

BUILTINS = [
    "dist.ddp",
    "dist.spmd",
    "utils.echo",
    "utils.sh",
    "utils.python",
    "utils.binary",
    "utils.touch",
    "utils.copy",
    "utils.booth",
    "utils.hydra",
    "serve.torchserve",
]


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_passes_the_component_linter(name: str) -> None:
    comp = finder.get_component(name)
    path = Path(comp.fn.__code__.co_filename)
    assert validate(str(path), comp.fn.__name__) == []
    assert comp.validation_errors == []
    assert comp.description  # help comes from the docstring


def test_every_public_component_function_is_listed() -> None:
    found = {n for n in finder.get_components() if n.split(".")[0] in ("dist", "utils", "serve")}
    assert found == set(BUILTINS)


def test_echo_from_cli_args() -> None:
    app = materialize_appdef(utils.echo, ["--msg", "hi there", "--num_replicas", "3"])
    role = app.roles[0]
    assert (role.entrypoint, role.args, role.num_replicas) == ("echo", ["hi there"], 3)


def test_sh_quotes_arguments_and_requires_a_command() -> None:
    app = materialize_appdef(utils.sh, ["--env", "A=1", "echo", "a b", "$HOME"])
    role = app.roles[0]
    assert role.entrypoint == "sh"
    assert shlex.split(role.args[1]) == ["echo", "a b", "$HOME"]
    assert role.env == {"A": "1", "LOGLEVEL": "WARNING"}
    with pytest.raises(ComponentArgumentError, match="needs a command"):
        utils.sh()


def test_sh_sets_loglevel_as_torchx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Silent incompatibility 4 (issue 25): TorchX's utils.sh sets LOGLEVEL to the launcher's
    $LOGLEVEL, WARNING if unset, unless the component's env gives one; the caller's dict is
    not changed."""
    monkeypatch.delenv("LOGLEVEL", raising=False)
    env = {"FOO": "bar"}
    assert utils.sh("true", env=env).roles[0].env == {"FOO": "bar", "LOGLEVEL": "WARNING"}
    assert env == {"FOO": "bar"}
    monkeypatch.setenv("LOGLEVEL", "DEBUG")
    assert utils.sh("true").roles[0].env == {"LOGLEVEL": "DEBUG"}
    assert utils.sh("true", env={"LOGLEVEL": "INFO"}).roles[0].env == {"LOGLEVEL": "INFO"}


@pytest.mark.parametrize("component", [dist.ddp, dist.spmd])
def test_dist_without_name_uses_default_experiment(component: object) -> None:
    """Silent incompatibility 4 (issue 25): without --name, TorchX's dist.ddp/dist.spmd set
    TORCHX_TRACKING_EXPERIMENT_NAME to ``default-experiment`` (not the script name), so tracker
    runs of a migrated job land in the same experiment."""
    for kwargs, expected in [
        ({"script": "foo/bar.py"}, ("default-experiment", "bar")),
        ({"m": "foo.bar"}, ("default-experiment", "bar")),
        ({"script": "foo/bar.py", "name": "/run1"}, ("default-experiment", "run1")),
        ({"script": "foo/bar.py", "name": "run1"}, ("default-experiment", "run1")),
        ({"script": "foo/bar.py", "name": "exp/"}, ("exp", "bar")),
        ({"script": "foo/bar.py", "name": "exp/run1"}, ("exp", "run1")),
    ]:
        app = component(**kwargs)  # type: ignore[operator]
        env = app.roles[0].env
        assert (env["TORCHX_TRACKING_EXPERIMENT_NAME"], env["TORCHX_TRACKING_RUN_NAME"]) == expected
        assert app.name == expected[1]


def test_spmd_passes_metadata() -> None:
    app = dist.spmd(script="t.py", metadata={"team": "ml"})
    assert app.metadata == {"team": "ml"}


def test_python_needs_exactly_one_program() -> None:
    assert utils.python("--x", m="pkg.main").roles[0].args == ["-m", "pkg.main", "--x"]
    assert utils.python(c="print(1)").roles[0].args == ["-c", "print(1)"]
    assert utils.python(script="a.py").roles[0].args == ["a.py"]
    with pytest.raises(ComponentArgumentError, match="exactly one"):
        utils.python(m="a", c="b")
    with pytest.raises(ComponentArgumentError, match="none"):
        utils.python()


def test_binary_and_named_resource() -> None:
    app = utils.binary("-l", entrypoint="/bin/ls", h="cpu.small")
    role = app.roles[0]
    assert role.entrypoint == "/bin/ls" and role.args == ["-l"]
    assert role.resource.cpu == 1 and role.resource.memMB == 2048


def _chosen_module(args: list[str], installed: set[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The module the ``python -c`` launcher of a copy/booth command runs, given the packages."""
    import importlib.util
    import runpy

    ran: list[str] = []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: name in installed or None)
    monkeypatch.setattr(runpy, "run_module", lambda mod, **kw: ran.append(mod))
    assert args[0] == "-c"
    exec(args[1], {})
    return ran[0]


@pytest.mark.parametrize(("component", "app"), [("copy", "copy_main"), ("booth", "booth_main")])
def test_copy_and_booth_run_in_the_default_image(
    component: str, app: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default image is TorchX's, which has torchx.apps.utils.<app> (same arguments) but not
    # torchx-suite: the command runs ours where torchx-suite is installed, else TorchX's
    role = (utils.copy("a", "b") if component == "copy" else utils.booth(1.0, 3.0)).roles[0]
    assert role.image == "ghcr.io/pytorch/torchx:latest" and role.entrypoint == "python"
    torchx_image = _chosen_module(role.args, {"torchx"}, monkeypatch)
    assert torchx_image == f"torchx.apps.utils.{app}"
    suite = _chosen_module(role.args, {"torchx", "torchx_core"}, monkeypatch)
    assert suite == f"torchx_core.apps.utils.{app}"


def test_copy_command_runs_here(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import torchx_core

    src, dst = tmp_path / "in.txt", tmp_path / "out" / "o.txt"
    src.write_text("payload")
    role = utils.copy(f"file://{src}", f"file://{dst}").roles[0]
    checkout = str(Path(torchx_core.__file__).parents[1])  # this checkout's torchx_core
    env = {**os.environ, "PYTHONPATH": checkout}
    subprocess.run([sys.executable, *role.args], check=True, env=env, capture_output=True)
    assert dst.read_text() == "payload"


def test_copy_main_copies_between_fsspec_urls(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("payload")
    dst = tmp_path / "out" / "sub" / "o.txt"
    assert copy_main.main(["--src", f"file://{src}", "--dst", f"file://{dst}"]) == 0
    assert dst.read_text() == "payload"
    assert copy_main.main(["--src", f"file://{tmp_path}/missing", "--dst", str(dst)]) == 1


def test_booth_main_writes_result(tmp_path: Path) -> None:
    assert booth_main.booth(1, 3) == 0
    assert (
        booth_main.main(
            ["--x1", "0", "--x2", "0", "--trial_idx", "4", "--tracker_base", str(tmp_path)]
        )
        == 0
    )
    # as TorchX: readable as FsspecResultTracker(tracker_base)[trial_idx]
    from torchx_core.runtime.tracking import FsspecResultTracker

    assert FsspecResultTracker(str(tmp_path))[4] == {"booth_eval": 74.0}


def test_torchserve_registration_url() -> None:
    app = serve.torchserve(
        "http://h/m.mar", "http://ts:8081", params={"initial_workers": "2"}, dryrun=True
    )
    assert "--dryrun" in app.roles[0].args
    url = serve_main.registration_url("http://ts:8081/", "http://h/m.mar", ["initial_workers=2"])
    assert url == "http://ts:8081/models?url=http%3A%2F%2Fh%2Fm.mar&initial_workers=2"
    with pytest.raises(ValueError):
        serve_main.registration_url("http://ts", "m", ["oops"])
    assert serve_main.main(["--model_path", "m", "--management_api", "http://ts", "--dryrun"]) == 0


@pytest.mark.parametrize(
    "j,expected",
    [
        ("2x4", (2, 2, 4, "2")),
        ("1:3x2", (1, 3, 2, "1:3")),
        ("4", (1, 1, 4, "1")),
        (" 3x1 ", (3, 3, 1, "3")),
    ],
)
def test_parse_nnodes(j: str, expected: tuple[int, int, int, str]) -> None:
    assert dist.parse_nnodes(j) == expected


@pytest.mark.parametrize("j", ["", "x2", "2x", "axb", "3:2x1", "0", "2x0"])
def test_parse_nnodes_rejects(j: str) -> None:
    with pytest.raises(ComponentArgumentError, match="-j"):
        dist.parse_nnodes(j)


def _cmd(app: AppDef) -> list[str]:
    role = app.roles[0]
    assert role.entrypoint == "bash" and role.args[0] == "-c"
    return shlex.split(role.args[1])


def test_ddp_multinode_uses_c10d_at_rank0_host() -> None:
    app = materialize_appdef(
        dist.ddp, ["--script", "train.py", "-j", "2x2", "--rdzv_port", "1234", "--", "--lr", "0.1"]
    )
    role = app.roles[0]
    cmd = _cmd(app)
    # migration break 8: `torchrun` as TorchX (see the dist module docstring for why)
    assert cmd[0] == "torchrun" and "--rdzv_conf" not in cmd
    assert cmd[cmd.index("--rdzv_endpoint") + 1] == "$${${rank0_env}:=localhost}:1234"
    assert cmd[cmd.index("--nnodes") + 1] == "2"
    assert cmd[cmd.index("--nproc_per_node") + 1] == "2"
    assert cmd[cmd.index("--rdzv_id") + 1] == "${app_id}"
    assert cmd[-3:] == ["train.py", "--lr", "0.1"]
    assert role.num_replicas == 2 and role.min_replicas == 2
    assert role.name == "train" and app.name == "train"
    assert role.port_map == {"c10d": 1234}


def test_ddp_single_node_module_elastic_and_options() -> None:
    app = dist.ddp(
        m="pkg.trainer", j="1x3", name="exp/run1", env={"A": "b"}, max_retries=2, debug=True
    )
    cmd = _cmd(app)
    assert cmd[cmd.index("--rdzv_endpoint") + 1] == "localhost:0"
    assert cmd[-2:] == ["-m", "pkg.trainer"]
    role = app.roles[0]
    assert app.name == "run1" and role.name == "trainer"
    assert role.env["TORCHX_TRACKING_EXPERIMENT_NAME"] == "exp"
    assert role.env["A"] == "b" and role.env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert role.max_retries == 2
    elastic = dist.ddp(script="t.py", j="1:3x1")
    assert elastic.roles[0].min_replicas == 1 and elastic.roles[0].num_replicas == 3
    assert "1:3" in _cmd(elastic)


def test_ddp_metadata_and_rdzv_conf_as_torchx() -> None:
    app = materialize_appdef(
        dist.ddp,
        [
            "--script",
            "t.py",
            "-j",
            "2x1",
            "--metadata",
            "team=ml,prio=high",
            "--rdzv_conf",
            "join_timeout=600,timeout=900",
            "--name",
            "exp/r1",
        ],
    )
    assert app.metadata == {"team": "ml", "prio": "high"}
    cmd = _cmd(app)
    assert cmd[cmd.index("--rdzv_conf") + 1] == "join_timeout=600,timeout=900"
    assert cmd.index("--rdzv_conf") < cmd.index("--rdzv_endpoint")
    env = app.roles[0].env
    assert (env["TORCHX_TRACKING_EXPERIMENT_NAME"], env["TORCHX_TRACKING_RUN_NAME"]) == (
        "exp",
        "r1",
    )


def test_ddp_static_rendezvous_passes_node_rank() -> None:
    cmd = _cmd(dist.ddp(script="t.py", j="2x1", rdzv_backend="static"))
    assert cmd[cmd.index("--node_rank") + 1] == "${replica_id}"


def test_ddp_requires_exactly_one_of_script_and_module() -> None:
    with pytest.raises(ComponentArgumentError, match="exactly one"):
        dist.ddp()
    with pytest.raises(ComponentArgumentError, match="exactly one"):
        dist.ddp(script="a.py", m="b")


def test_ddp_mounts_and_named_resource() -> None:
    app = dist.ddp(script="t.py", h="cpu.medium", mounts=["type=bind,src=/data,dst=/data,readonly"])
    role = app.roles[0]
    assert role.resource.cpu == 2 and role.resource.memMB == 4096
    assert role.mounts[0].src_path == "/data" and role.mounts[0].read_only


def test_spmd_derives_nproc_from_gpus() -> None:
    cmd = _cmd(dist.spmd(script="t.py", j="2", h="gpu.medium"))
    assert cmd[cmd.index("--nnodes") + 1] == "2"
    assert cmd[cmd.index("--nproc_per_node") + 1] == "2"
    cmd = _cmd(dist.spmd(script="t.py", j="1x4"))
    assert cmd[cmd.index("--nproc_per_node") + 1] == "4"
    with pytest.raises(ComponentArgumentError):
        dist.spmd(script="t.py", j="two")


def test_component_help_comes_from_the_docstring() -> None:
    from torchx_core.specs.builders import component_help

    text = component_help(dist.ddp)
    assert "Distributed data parallel" in text
    assert "[{min_nnodes}:]{nnodes}x{nproc_per_node}" in text


def test_python_and_copy_take_mounts() -> None:
    """TorchX HEAD: utils.python(mounts=) and utils.copy(mounts=) mount into the role."""
    from torchx_core.specs import BindMount

    app = utils.python(m="foo.main", mounts=["type=bind", "src=/host", "dst=/job", "readonly"])
    assert app.roles[0].mounts == [BindMount("/host", "/job", read_only=True)]
    app = materialize_appdef(
        utils.copy, ["--src", "a", "--dst", "b", "--mounts", "type=bind,src=/h,dst=/j"]
    )
    assert app.roles[0].mounts == [BindMount("/h", "/j")]
    assert utils.copy(src="a", dst="b").roles[0].mounts == []
