"""Unit tests for named resources (register.py, named_resources_generic.py,
named_resources_aws.py)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.specs import (
    InvalidResourceError,
    Resource,
    UnknownNamedResourceError,
    register,
    resource,
)
from torchx_core.specs.named_resources_aws import EFA_DEVICE, K8S_ITYPE, NEURON_DEVICE
from torchx_core.specs.register import (
    _NamedResources,
    get_named_resources,
    named_resource,
    named_resources,
)

GENERIC = {
    "gpu.small": (8, 1, 32 * 1024),
    "gpu.medium": (16, 2, 64 * 1024),
    "gpu.large": (32, 4, 128 * 1024),
    "gpu.xlarge": (64, 8, 256 * 1024),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1024),
    "cpu.small": (1, 0, 2 * 1024),
    "cpu.medium": (2, 0, 4 * 1024),
    "cpu.large": (2, 0, 8 * 1024),
    "cpu.xlarge": (8, 0, 32 * 1024),
}


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_table_matches_reference(name: str) -> None:
    res = named_resources[name]
    assert (res.cpu, res.gpu, res.memMB) == GENERIC[name]
    assert res.get_resource_name() == name and not res.is_fractional()


def test_lookup_is_a_fresh_copy() -> None:
    a = named_resources["gpu.small"]
    a.capabilities["x"] = 1
    assert named_resources["gpu.small"].capabilities == {}


def test_aws_instance_types() -> None:
    for name in [
        "aws_t3.medium",
        "aws_m5.2xlarge",
        "aws_p3.2xlarge",
        "aws_p3.8xlarge",
        "aws_c5.18xlarge",
        "aws_g4dn.xlarge",
        "aws_g5.48xlarge",
        "aws_p4d.24xlarge",
        "aws_p5.48xlarge",
        "aws_trn1.32xlarge",
    ]:
        assert name in named_resources
    p3 = named_resources["aws_p3.2xlarge"]
    assert (p3.cpu, p3.gpu) == (8, 1) and 55 * 1024 < p3.memMB <= 61 * 1024
    assert p3.capabilities == {K8S_ITYPE: "p3.2xlarge"}
    assert named_resources["aws_p4d.24xlarge"].devices == {EFA_DEVICE: 4}
    assert named_resources["aws_p5.48xlarge"].devices == {EFA_DEVICE: 32}
    assert named_resources["aws_trn1.32xlarge"].devices == {EFA_DEVICE: 8, NEURON_DEVICE: 16}
    assert resource(h="aws_p3.8xlarge").gpu == 4


def test_get_named_resources_and_package_exports() -> None:
    assert get_named_resources("cpu.small") == Resource(1, 0, 2048)
    assert specs.get_named_resources is get_named_resources
    assert specs.named_resources is named_resources


def test_unknown_lists_known_and_suggests() -> None:
    with pytest.raises(UnknownNamedResourceError) as e:
        get_named_resources("aws_p3.2xlarg")
    msg = str(e.value)
    # TorchX's wording first, then every known name
    assert msg.startswith(
        "No named resource found for `aws_p3.2xlarg`. Did you mean `aws_p3.2xlarge`?"
    )
    assert "Registered named resources: " in msg and "gpu.small" in msg
    assert "nope" not in named_resources and named_resources.get("nope") is None


def test_named_resource_registration_with_fractionals() -> None:
    try:
        named_resource(
            "test_host",
            Resource(cpu=64, gpu=8, memMB=512_000, devices={EFA_DEVICE: 4}),
            fractionals=[2, 8],
        )
        full = resource(h="test_host")
        assert full.get_resource_name() == "test_host" and not full.is_fractional()
        half = resource(h="test_host/2")
        assert (half.cpu, half.gpu, half.memMB, half.devices) == (32, 4, 256_000, {EFA_DEVICE: 2})
        assert half.is_fractional() and half.get_resource_name() == "test_host/2"
        eighth = resource(h="test_host/8")
        assert (eighth.gpu, eighth.devices) == (1, {})
        with pytest.raises(InvalidResourceError, match="already registered"):
            named_resource("test_host", Resource(1, 0, 1))
        named_resource("test_host", Resource(1, 0, 1), clobber=True)
        assert resource(h="test_host").cpu == 1
    finally:
        for n in ("test_host", "test_host/2", "test_host/8"):
            named_resources._unregister(n)


def test_named_resource_decorator() -> None:
    try:

        @named_resource("test_deco")
        def make() -> Resource:
            return Resource(cpu=3, gpu=0, memMB=3)

        assert make().cpu == 3
        assert resource(h="test_deco").get_resource_name() == "test_deco"
    finally:
        named_resources._unregister("test_deco")


@pytest.mark.parametrize("fractionals", [[3], [1], ["2"]])
def test_bad_fractionals(fractionals: list[object]) -> None:
    with pytest.raises(InvalidResourceError) as e:
        named_resource("test_bad", Resource(cpu=8, gpu=8, memMB=8), fractionals=fractionals)  # type: ignore[arg-type]
    assert repr(fractionals[0]) in str(e.value) or str(fractionals[0]) in str(e.value)
    assert "test_bad" not in named_resources


def test_entry_points_merge_and_broken_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "my_nr_plugin.py").write_text(
        "from torchx_core.specs import Resource\n"
        "def override():\n    return Resource(99, 0, 99)\n"
        "def custom():\n    return Resource(5, 0, 5)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        EntryPoint("gpu.small", "my_nr_plugin:override", register.ENTRY_POINT_GROUP),
        EntryPoint("custom_x", "my_nr_plugin:custom", register.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_xyz:f", register.ENTRY_POINT_GROUP),
    ]

    def fake_entry_points(group: str) -> Iterator[EntryPoint]:
        return iter(eps if group == "torchx.named_resources" else [])

    from torchx_core.plugins import PluginRegistry, PluginSource

    fresh = _NamedResources(
        PluginRegistry(plugin_sources=PluginSource.ENTRYPOINT, entry_points=fake_entry_points)
    )
    assert fresh["custom_x"] == Resource(5, 0, 5)
    assert fresh["gpu.small"] == Resource(99, 0, 99)  # plugins replace builtins
    assert "broken" in fresh.broken
    with pytest.raises(UnknownNamedResourceError, match="broken"):
        fresh["broken"]


def test_module_level_factories() -> None:
    from torchx_core.specs import named_resources_aws, named_resources_generic

    # expected values written from the instance sheet (p3.2xlarge: 8 vCPU, 1 V100, 61 GiB),
    # memory as TorchX counts it: 61 GiB * int(1024 * 0.96) = 61 * 983
    p3 = named_resources_aws.aws_p3_2xlarge()
    assert (p3.cpu, p3.gpu, p3.memMB) == (8, 1, 59963)
    assert p3.capabilities == {"node.kubernetes.io/instance-type": "p3.2xlarge"}
    assert named_resources["aws_p3.2xlarge"] == p3
    assert named_resources_generic.gpu_small() == Resource(8, 1, 32 * 1024)
    assert named_resources["gpu.small"] == Resource(8, 1, 32768)


# TorchX's named_resources_aws (meta-pytorch/torchx @ cafea3f3): instance type ->
# (cpu, gpu, host GiB, EFA, Neuron); memMB = GiB * int(1024 * 0.96) = GiB * 983
TORCHX_AWS = {
    "t3.medium": (2, 0, 4, 0, 0),
    "m5.large": (2, 0, 8, 0, 0),
    "m5.2xlarge": (8, 0, 32, 0, 0),
    "m5.24xlarge": (96, 0, 384, 0, 0),
    "m5.metal": (96, 0, 384, 0, 0),
    "m5d.large": (2, 0, 8, 0, 0),
    "m5d.12xlarge": (48, 0, 192, 0, 0),
    "m5d.metal": (96, 0, 384, 0, 0),
    "c5.18xlarge": (72, 0, 142, 0, 0),
    "p3.2xlarge": (8, 1, 61, 0, 0),
    "p3dn.24xlarge": (96, 8, 768, 1, 0),
    "p4d.24xlarge": (96, 8, 1152, 4, 0),
    "p5.48xlarge": (192, 8, 2048, 32, 0),
    "p5e.48xlarge": (192, 8, 2048, 32, 0),
    "p5en.48xlarge": (192, 8, 2048, 16, 0),
    "p6-b200.48xlarge": (192, 8, 2048, 8, 0),
    "p6-b300.48xlarge": (192, 8, 4096, 16, 0),
    "p6e-gb200.36xlarge": (144, 4, 960, 16, 0),
    "g4dn.metal": (96, 8, 384, 1, 0),
    "g5.48xlarge": (192, 8, 768, 1, 0),
    "g6e.xlarge": (4, 1, 32, 0, 0),
    "g6e.16xlarge": (64, 1, 512, 0, 0),
    "g6e.24xlarge": (96, 4, 768, 2, 0),
    "g6e.48xlarge": (192, 8, 1536, 4, 0),
    "trn1.32xlarge": (128, 0, 512, 8, 16),
    "inf2.48xlarge": (192, 0, 768, 0, 12),
}


@pytest.mark.parametrize("itype", sorted(TORCHX_AWS))
def test_aws_resources_match_torchx_memory_formula(itype: str) -> None:
    """Migration break 4: TorchX computes memMB as ``gib * int(1024 * 0.96)``, not
    ``int(gib * 1024 * 0.96)`` (p4d.24xlarge: 1,132,416, not 1,132,462)."""
    cpu, gpu, gib, efa, neuron = TORCHX_AWS[itype]
    res = named_resources[f"aws_{itype}"]
    assert (res.cpu, res.gpu, res.memMB) == (cpu, gpu, gib * 983)
    assert res.devices == {k: v for k, v in ((EFA_DEVICE, efa), (NEURON_DEVICE, neuron)) if v}
    assert res.capabilities == {K8S_ITYPE: itype}
    from torchx_core.specs import named_resources_aws

    fn = getattr(named_resources_aws, f"aws_{itype.replace('.', '_').replace('-', '_')}")
    assert fn() == res


def test_p4d_memory_is_torchx_value() -> None:
    assert named_resources["aws_p4d.24xlarge"].memMB == 1_132_416


def test_instance_type_from_resource() -> None:
    from torchx_core.specs.named_resources_aws import instance_type_from_resource

    assert instance_type_from_resource(named_resources["aws_g5.xlarge"]) == "g5.xlarge"
    with pytest.warns(UserWarning, match="Cannot determine the instance type"):
        assert instance_type_from_resource(Resource(1, 0, 1)) is None


def test_aws_gib_is_1024_as_in_torchx() -> None:
    """Silent incompatibility 1 (issue 25): TorchX's ``named_resources_aws.GiB`` is 1024, and a
    user defines an instance type as ``n * int(GiB * MEM_TAX)``; with GiB = 983 that formula
    gave 4% less memory. Built-in values stay as TorchX computes them."""
    from torchx_core.specs import named_resources_aws as aws

    assert aws.GiB == 1024
    assert aws.MEM_TAX == 0.96
    # a user's own instance type, written TorchX's way
    mine = Resource(cpu=16, gpu=0, memMB=64 * int(aws.GiB * aws.MEM_TAX))
    assert mine.memMB == 64 * 983
    assert aws.aws_m5_4xlarge().memMB == mine.memMB
    assert aws.aws_p4d_24xlarge().memMB == 1_132_416


def test_null_and_missing_name_the_null_resource() -> None:
    """TorchX: ``named_resources["NULL"]`` and ``["MISSING"]`` are the null resource."""
    from torchx_core.specs import NULL_RESOURCE, named_resources, resource

    assert named_resources["NULL"] == NULL_RESOURCE == named_resources["MISSING"]
    assert resource(h="MISSING") == NULL_RESOURCE and "NULL" in named_resources
    named_resources["NULL"].capabilities["x"] = 1  # a copy: the sentinel stays as it was
    assert NULL_RESOURCE.capabilities == {}


def _empty_registry() -> object:
    from torchx_core.plugins import PluginRegistry, PluginSource

    return PluginRegistry(
        plugin_sources=PluginSource.ENTRYPOINT, entry_points=lambda group: iter([])
    )


def test_custom_named_resources_module_from_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """TorchX reads ``NAMED_RESOURCES`` of the module named by TORCHX_CUSTOM_NAMED_RESOURCES."""
    (tmp_path / "my_site_resources.py").write_text(
        "from torchx_core.specs import Resource\n"
        "NAMED_RESOURCES = {'site_box': lambda: Resource(3, 0, 3)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TORCHX_CUSTOM_NAMED_RESOURCES", "my_site_resources")
    lib = _NamedResources(_empty_registry())
    assert lib["site_box"] == Resource(3, 0, 3)
    assert "gpu.small" in lib  # the built-ins stay


def test_custom_named_resources_module_missing_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_CUSTOM_NAMED_RESOURCES", "no_such_module_xyz")
    with pytest.raises(InvalidResourceError, match="TORCHX_CUSTOM_NAMED_RESOURCES='no_such"):
        _NamedResources(_empty_registry())["gpu.small"]


def test_tables_load_on_first_lookup_and_reset_drops_them() -> None:
    from torchx_core.specs import _NamedResourcesLibrary  # TorchX's name

    lib = _NamedResourcesLibrary(_empty_registry())
    assert lib._factories is None
    assert "NULL" in lib and lib._factories is not None
    lib.reset()
    assert lib._factories is None


def test_lookup_while_plugins_load_is_a_runtime_error() -> None:
    """A plugin module that looks a resource up at import time re-enters the lookup (TorchX)."""

    class _Reentrant:
        def __init__(self) -> None:
            self.lib: _NamedResources | None = None
            self.error: BaseException | None = None

        def get(self, _type: object) -> dict[str, object]:
            try:
                assert self.lib is not None
                self.lib["gpu.small"]
            except RuntimeError as e:
                self.error = e
            return {}

    reg = _Reentrant()
    lib = reg.lib = _NamedResources(reg)
    assert lib["gpu.small"].gpu == 1  # the outer lookup completes
    assert reg.error is not None and "re-entrant named-resource lookup" in str(reg.error)
