"""Unit tests for the app definition types (torchx_core/specs/_app.py via the public API)."""

from __future__ import annotations

import copy
import inspect
import os
from dataclasses import fields
from enum import Enum
from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.specs import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppDef,
    BindMount,
    DeviceMount,
    InvalidMountError,
    InvalidResourceError,
    InvalidWorkspaceError,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    Workspace,
    macros,
    parse_mounts,
    resource,
)


def test_sentinels() -> None:
    assert MISSING == "<MISSING>"
    assert NONE == "<NONE>"
    assert Resource(cpu=-1, gpu=-1, memMB=-1) == NULL_RESOURCE
    assert ALL == "all" and isinstance(ALL, str)  # TorchX: the "every scheduler" name, no Resource


def test_retry_policy_str_is_torchx_s() -> None:
    """TorchX: ``str()`` of a policy names its class; ``.value`` is the bare name; ``format()``
    is what a ``(str, Enum)`` gives on this Python (the bare name before 3.11, as TorchX's)."""

    class RetryPolicy_(str, Enum):  # TorchX's definition
        REPLICA = "REPLICA"

    assert str(RetryPolicy.APPLICATION) == "RetryPolicy.APPLICATION"
    assert f"{RetryPolicy.REPLICA}" == f"{RetryPolicy_.REPLICA}".replace(
        "RetryPolicy_", "RetryPolicy"
    )
    assert RetryPolicy.ROLE.value == "ROLE" and RetryPolicy("ROLE") is RetryPolicy.ROLE


def test_role_signature_matches_torchx() -> None:
    names = [f.name for f in fields(Role)]
    assert names[:15] == [
        "name",
        "image",
        "min_replicas",
        "entrypoint",
        "args",
        "env",
        "num_replicas",
        "max_retries",
        "retry_policy",
        "resource",
        "port_map",
        "metadata",
        "mounts",
        "workspace",
        "overrides",
    ]
    role = Role("r", "img")
    assert role.entrypoint == MISSING
    assert role.num_replicas == 1 and role.max_retries == 0 and role.min_replicas is None
    assert role.retry_policy == RetryPolicy.APPLICATION
    assert role.resource == NULL_RESOURCE
    assert role.resource is not NULL_RESOURCE  # a fresh object per role
    assert role.workspace is None


def test_template_fields_are_classvars_not_fields() -> None:
    assert AppDef.template_fields == ("name", "roles", "metadata")
    assert Role.template_fields == ("args", "env", "image", "entrypoint", "metadata")
    assert "template_fields" not in {f.name for f in fields(Role)}
    assert "template_fields" not in repr(Role("r", "i"))
    assert "template_fields" not in {f.name for f in fields(AppDef)}


def test_appdef_defaults_and_repr() -> None:
    app = AppDef("echo")
    assert app.roles == [] and app.metadata == {}
    assert repr(app) == "AppDef(name='echo', roles=[], metadata={})"


def test_base_image_keyword_compat() -> None:
    role = Role("r", "img", base_image="base")
    assert role.base_image == "base"
    assert "base_image" not in repr(role)
    with pytest.raises(TypeError):
        Role(
            "r",
            "img",
            None,
            "ep",
            [],
            {},
            1,
            0,
            RetryPolicy.APPLICATION,
            NULL_RESOURCE,
            {},
            {},
            [],
            None,
            {},
            "too-many",
        )  # base_image is keyword only


def test_pre_proc_default_is_identity() -> None:
    info = specs.AppDryRunInfo({"a": 1}, str)
    assert Role("r", "i").pre_proc("local", info) is info


def test_role_overrides_take_precedence() -> None:
    role = Role("r", "img", entrypoint="a.py", overrides={"entrypoint": "b.py"})
    assert role.entrypoint == "b.py"
    assert role.image == "img"


def test_role_overrides_await_once() -> None:
    calls: list[int] = []

    async def compute() -> str:
        calls.append(1)
        return "built-image"

    role = Role("r", "img", overrides={"image": compute()})
    assert role.image == "built-image"
    assert role.image == "built-image"
    assert calls == [1]


def test_retry_policy_values() -> None:
    assert [p.value for p in RetryPolicy] == ["REPLICA", "APPLICATION", "ROLE"]
    assert RetryPolicy("ROLE") is RetryPolicy.ROLE


def test_resource_repr_and_copy() -> None:
    res = Resource(cpu=4, gpu=1, memMB=8192, capabilities={"a": 1}, devices={"efa": 1})
    cp = Resource.copy(res, b=2, a=3)
    assert cp.capabilities == {"a": 3, "b": 2}
    assert res.capabilities == {"a": 1}
    assert cp.devices == {"efa": 1} and cp.devices is not res.devices
    assert repr(Resource(1, 0, 2)) == (
        "Resource(cpu=1, gpu=0, memMB=2, capabilities={}, devices={}, tags={})"
    )


def test_resource_name_and_fractional_defaults() -> None:
    res = Resource(1, 0, 1)
    assert res.get_resource_name() is None
    assert res.is_fractional() is False


def test_named_resource_survives_copy_and_deepcopy() -> None:
    res = resource(h="gpu.small")
    assert res.get_resource_name() == "gpu.small"
    assert Resource.copy(res).get_resource_name() == "gpu.small"
    assert copy.deepcopy(res).get_resource_name() == "gpu.small"
    assert res == Resource(cpu=8, gpu=1, memMB=32 * 1024)  # name does not affect equality


def test_resource_function_defaults_and_named() -> None:
    assert resource() == Resource(cpu=2, gpu=0, memMB=1024)
    assert resource(cpu=4, gpu=1, memMB=8192) == Resource(4, 1, 8192)
    assert resource(cpu=1, h="cpu.small") == Resource(1, 0, 2048)  # h wins


@pytest.mark.parametrize("kwargs", [{"cpu": -1}, {"gpu": "2"}, {"memMB": 1.5}, {"cpu": True}])
def test_resource_function_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidResourceError) as e:
        resource(**kwargs)  # type: ignore[arg-type]
    ((name, value),) = kwargs.items()
    assert name in str(e.value) and repr(value) in str(e.value)


def test_resource_unknown_name_is_keyerror_with_suggestion() -> None:
    with pytest.raises(KeyError) as e:
        resource(h="gpu.smal")
    assert isinstance(e.value, specs.UnknownNamedResourceError)
    assert "`gpu.smal`" in str(e.value) and "Did you mean `gpu.small`?" in str(e.value)
    assert "cpu.nano" in str(e.value)


def test_parse_mounts_all_types() -> None:
    mounts = parse_mounts(
        [
            "type=bind",
            "src=/a",
            "dst=/b",
            "readonly",
            "type=volume,src=vol,dst=/v",
            "type=device",
            "src=/dev/fuse",
            "perm=rw",
            "type=device,src=/dev/x,dst=/dev/y",
        ]
    )
    assert mounts == [
        BindMount(src_path="/a", dst_path="/b", read_only=True),
        VolumeMount(src="vol", dst_path="/v", read_only=False),
        DeviceMount(src_path="/dev/fuse", dst_path="/dev/fuse", permissions="rw"),
        DeviceMount(src_path="/dev/x", dst_path="/dev/y", permissions="rwm"),
    ]
    assert parse_mounts([]) == []


@pytest.mark.parametrize(
    "opts, needle",
    [
        (["src=/a"], "type must be specified first"),
        (["type=nfs", "src=/a", "dst=/b"], "'nfs'"),
        (["type=bind", "src=/a"], "dst"),
        (["type=bind", "dst=/a"], "src"),
        (["type=device", "src=/dev/x", "perm=rwx"], "'rwx'"),
        (["type=bind", "src=/a", "dst=/b", "color=red"], "color"),
        (["type=bind", "src=/a", "src=/c", "dst=/b"], "twice"),
        ("type=bind,src=/a,dst=/b", "list"),
    ],
)
def test_parse_mounts_errors(opts: list[str], needle: str) -> None:
    with pytest.raises(InvalidMountError) as e:
        parse_mounts(opts)
    assert needle in str(e.value)
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, KeyError)  # TorchX raises KeyError for bad mount options


def test_parse_mounts_docker_spellings() -> None:
    """Silent incompatibility 3 (issue 25): TorchX accepts Docker's ``source``, ``target``,
    ``destination`` and ``read_only`` as aliases of ``src``/``dst``/``readonly``, and expands
    ``~`` in a bind mount's source."""
    assert parse_mounts(["type=bind,source=/a,target=/b"]) == [BindMount("/a", "/b")]
    assert parse_mounts(["type=volume", "source=v", "destination=/d", "read_only"]) == [
        VolumeMount(src="v", dst_path="/d", read_only=True)
    ]
    assert parse_mounts(["type=device,source=/dev/x,target=/dev/y"]) == [
        DeviceMount("/dev/x", "/dev/y")
    ]
    home = os.path.expanduser("~")
    assert parse_mounts(["type=bind,src=~/data,dst=/data"]) == [BindMount(f"{home}/data", "/data")]
    with pytest.raises(InvalidMountError, match="unknown mount option blah, must be one of"):
        parse_mounts(["type=bind", "blah=x"])


def test_workspace_helpers(tmp_path: Path) -> None:
    assert Workspace({"~/a": ""}).is_unmapped_single_project()
    assert not Workspace({"~/a": "a"}).is_unmapped_single_project()
    assert not Workspace({"~/a": "", "~/b": ""}).is_unmapped_single_project()
    assert Workspace.from_str(None) is None and Workspace.from_str(" ") is None
    ws = Workspace.from_str("p1:x, p2")
    assert ws == Workspace({"p1": "x", "p2": ""})
    assert str(Workspace({"p": ""})) == "p"
    assert Workspace.from_str(str(ws)) == ws


@pytest.mark.parametrize("text", [":dst", "a:b,a:c"])
def test_workspace_from_str_errors(text: str) -> None:
    with pytest.raises(InvalidWorkspaceError) as e:
        Workspace.from_str(text)
    assert repr(text) in str(e.value) or "'a'" in str(e.value)


def test_workspace_merge_into(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "m.py").write_text("x = 1")
    single = tmp_path / "single.txt"
    single.write_text("s")
    out = tmp_path / "out"
    Workspace({str(proj): "torch", str(single): "cfg/s.txt"}).merge_into(out)
    assert (out / "torch" / "pkg" / "m.py").read_text() == "x = 1"
    assert (out / "cfg" / "s.txt").read_text() == "s"
    root = tmp_path / "root"
    Workspace({str(proj): ""}).merge_into(root)
    assert (root / "pkg" / "m.py").exists()
    with pytest.raises(InvalidWorkspaceError, match="does not exist"):
        Workspace({str(tmp_path / "missing"): ""}).merge_into(out)


def test_macros_values_apply_only_args_env_metadata() -> None:
    role = Role(
        "r",
        image=macros.img_root,
        entrypoint=macros.app_id,
        args=["--id", macros.app_id, f"--rep={macros.replica_id}", f"$${{{macros.rank0_env}}}"],
        env={"ROOT": macros.img_root},
        metadata={"nested": {"list": [macros.app_id]}, "n": 1},
    )
    values = macros.Values(img_root="/img", app_id="app-1", replica_id="3", rank0_env="MASTER_ADDR")
    out = values.apply(role)
    assert out.args == ["--id", "app-1", "--rep=3", "${MASTER_ADDR}"]
    assert out.env == {"ROOT": "/img"}
    assert out.metadata == {"nested": {"list": ["app-1"]}, "n": 1}
    assert out.image == macros.img_root and out.entrypoint == macros.app_id  # untouched
    assert role.args[1] == macros.app_id  # original not modified
    assert values.to_dict() == {
        "img_root": "/img",
        "app_id": "app-1",
        "replica_id": "3",
        "rank0_env": "MASTER_ADDR",
        "base_img_root": "DEPRECATED",
    }
    assert values.substitute("${unknown} $app_id") == "${unknown} app-1"


def test_macros_names() -> None:
    assert (
        macros.img_root,
        macros.app_id,
        macros.replica_id,
        macros.rank0_env,
        macros.base_img_root,
    ) == ("${img_root}", "${app_id}", "${replica_id}", "${rank0_env}", "${base_img_root}")
    params = list(inspect.signature(macros.Values).parameters)
    assert params == ["img_root", "app_id", "replica_id", "rank0_env", "base_img_root"]


def test_dataclass_behaviour_is_standard() -> None:
    import dataclasses

    role = Role("r", "img", args=["a"])
    assert dataclasses.is_dataclass(role)
    assert dataclasses.replace(role, name="s").name == "s"
    assert dataclasses.asdict(Resource(1, 2, 3)) == {
        "cpu": 1,
        "gpu": 2,
        "memMB": 3,
        "capabilities": {},
        "devices": {},
        "tags": {},
    }
    assert Role("r", "img", args=["a"]) == role and Role("r", "img") != role
    assert role != ("r", "img") and role.__eq__(object()) is NotImplemented
    assert Role("r", "img", base_image="x") == Role("r", "img")  # base_image: compare=False
    with pytest.raises(TypeError):
        hash(role)
    assert repr(BindMount("/a", "/b")) == "BindMount(src_path='/a', dst_path='/b', read_only=False)"


def test_subclass_of_a_spec_dataclass_keeps_working() -> None:
    import dataclasses

    @dataclasses.dataclass
    class MyRole(Role):
        extra: str = "x"

    r = MyRole("r", "img")
    assert repr(r).startswith(
        "test_subclass_of_a_spec_dataclass_keeps_working.<locals>.MyRole(name='r'"
    )
    assert r.extra == "x" and r == MyRole("r", "img")


def test_replica_pairs_lists_every_replica_in_role_order_or_one_role() -> None:
    from torchx_core.specs._app import replica_pairs

    app = AppDef(
        "a", [Role("w", "img", num_replicas=2), Role("ps", "img"), Role("z", "img", num_replicas=0)]
    )
    assert replica_pairs(app) == [("w", 0), ("w", 1), ("ps", 0)]
    assert replica_pairs(app, "w") == [("w", 0), ("w", 1)]
    assert replica_pairs(app, "nope") == []


def test_workspace_string_with_an_fsspec_url_is_one_project() -> None:
    """A URL's ``://`` is no ``local:remote`` separator; ``": "`` maps it (TorchX's YAML form)."""
    assert Workspace.from_str("memory://proj").projects == {"memory://proj": ""}
    assert Workspace.from_str("s3://b/p: remote").projects == {"s3://b/p": "remote"}
    assert Workspace.from_str("file:///a,~/b:b").projects == {"file:///a": "", "~/b": "b"}
    assert Workspace.from_str("a:b").projects == {"a": "b"}
