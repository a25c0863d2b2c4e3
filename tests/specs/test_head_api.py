"""TorchX HEAD's newer torchx.specs API (meta-pytorch/torchx @ cafea3f3), as TorchX behaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.specs import AppDef, AppDryRunInfo, Workspace, runopts
from torchx_core.specs.api import TORCHX_HOME, UNKNOWN, cases


def test_torchx_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCHX_HOME", raising=False)
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "sally")
    assert TORCHX_HOME() == tmp_path / "sally" / ".torchx" and TORCHX_HOME().is_dir()
    monkeypatch.setenv("TORCHX_HOME", str(tmp_path / "x"))
    sub = TORCHX_HOME("conda-pack", "out")
    assert sub == tmp_path / "x" / "conda-pack" / "out" and sub.is_dir()
    assert specs.TORCHX_HOME is TORCHX_HOME


def test_unknown_sentinel_and_cases() -> None:
    assert UNKNOWN == specs.UNKNOWN == "<UNKNOWN>"
    for snake, camel in [
        ("cluster_name", "clusterName"),
        ("hpc_cluster_uuid", "hpcClusterUuid"),
        ("name", "name"),
    ]:
        assert cases.snake_to_camel(snake) == camel
        assert cases.camel_to_snake(camel) == snake


def test_dryrun_info_app_and_read_only_cfg() -> None:
    info: AppDryRunInfo[str] = AppDryRunInfo("req", str)
    assert info.app is None and dict(info.cfg) == {}
    app = AppDef("a")
    info._app, info._cfg = app, {"cluster": "foo"}
    assert info.app is app and dict(info.cfg) == {"cluster": "foo"}
    with pytest.raises(TypeError):
        info.cfg["cluster"] = "bar"  # type: ignore[index]


def test_runopts_or_merges_into_a_new_runopts() -> None:
    a, b = runopts(), runopts()
    a.add("foo", type_=str, default="a", help="foo")
    a.add("shared", type_=int, default=1, help="a's")
    b.add("shared", type_=int, default=2, help="b's")
    merged = a | b
    assert sorted(k for k, _ in merged) == ["foo", "shared"]
    assert merged.get("shared").default == 2  # type: ignore[union-attr]
    assert a.get("shared").default == 1 and b.get("foo") is None  # type: ignore[union-attr]


def test_workspace_string_forms_as_torchx() -> None:
    ws = Workspace({"/home/foo/myproj": "", "/home/foo/torch": "torch"})
    assert str(ws) == "/home/foo/myproj;/home/foo/torch:torch"  # TorchX's spelling
    assert Workspace.from_str(str(ws)) == ws
    # TorchX's YAML form, one "path: remote" per line, with comments
    text = "#\n/home/foo/bar:\n/home/foo/third-party/verl: verl\n"
    assert Workspace.from_str(text) == Workspace(
        {"/home/foo/bar": "", "/home/foo/third-party/verl": "verl"}
    )
