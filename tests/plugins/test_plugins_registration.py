"""torchx_core.plugins.register: named resources with aliases and fractionals, end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchx_core import specs
from torchx_core.plugins import (
    EIGHTH,
    HALF,
    QUARTER,
    SIXTEENTH,
    WHOLE,
    PluginRegistry,
    PluginType,
    halve_mem_down_to,
    powers_of_two_gpus,
    resource_tags,
)

Write = Callable[[str, str], Path]

GPU_HOST = """
from torchx_core.plugins import register, powers_of_two_gpus, halve_mem_down_to, WHOLE
from torchx_core.specs import Resource

@register.named_resource(aliases=["big_gpu"], fractionals=powers_of_two_gpus)
def my_gpu(fractional: float = WHOLE) -> Resource:
    return Resource(cpu=int(64 * fractional), gpu=int(8 * fractional),
                    memMB=int(512 * 1024 * fractional), capabilities={"zone": "a"})

@register.named_resource(name="cpu_box", fractionals=halve_mem_down_to(minGiB=16))
def box(fractional: float = WHOLE) -> Resource:
    return Resource(cpu=int(32 * fractional), gpu=0, memMB=int(64 * 1024 * fractional))
"""


def test_fraction_constants() -> None:
    assert (WHOLE, HALF, QUARTER, EIGHTH, SIXTEENTH) == (1.0, 0.5, 0.25, 0.125, 0.0625)
    assert resource_tags.RESOURCE_NAME == "torchx/named_resources.name"
    assert resource_tags.IS_FRACTIONAL == "torchx/named_resources.is_fractional"


def test_powers_of_two_gpus() -> None:
    assert powers_of_two_gpus(SimpleNamespace(gpu=4)) == {1.0: "4", 0.5: "2", 0.25: "1"}
    assert powers_of_two_gpus(SimpleNamespace(gpu=1)) == {1.0: "1"}
    for bad in (0, 6):
        with pytest.raises(ValueError, match=f"gpu={bad}"):
            powers_of_two_gpus(SimpleNamespace(gpu=bad))


def test_halve_mem_down_to() -> None:
    assert halve_mem_down_to(minGiB=16)(SimpleNamespace(memMB=64 * 1024)) == {
        1.0: "64",
        0.5: "32",
        0.25: "16",
    }
    assert halve_mem_down_to(minGiB=3)(SimpleNamespace(memMB=12 * 1024)) == {
        1.0: "12",
        0.5: "6",
        0.25: "3",
    }
    with pytest.raises(ValueError, match="use minGiB >= 3"):
        halve_mem_down_to(minGiB=2)(SimpleNamespace(memMB=12 * 1024))
    with pytest.raises(ValueError, match="whole number of GiB"):
        halve_mem_down_to(minGiB=1)(SimpleNamespace(memMB=1000))


def test_named_resource_plugin_variants(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/named_resources/cluster.py", GPU_HOST)
    found = PluginRegistry().get(PluginType.NAMED_RESOURCE)
    assert sorted(found) == sorted(
        [
            "my_gpu",
            "big_gpu",
            "my_gpu_8",
            "my_gpu_4",
            "my_gpu_2",
            "my_gpu_1",
            "cpu_box",
            "cpu_box_64",
            "cpu_box_32",
            "cpu_box_16",
        ]
    )
    four = found["my_gpu_4"]()
    assert (four.cpu, four.gpu, four.memMB) == (32, 4, 256 * 1024)
    assert four.tags == {resource_tags.RESOURCE_NAME: "my_gpu_4", resource_tags.IS_FRACTIONAL: True}
    assert four.is_fractional() and four.get_resource_name() == "my_gpu_4"
    whole = found["my_gpu_8"]()
    assert not whole.is_fractional() and whole.get_resource_name() == "my_gpu_8"
    assert found["big_gpu"]().get_resource_name() == "my_gpu"  # an alias is the base resource
    import torchx_plugins.named_resources.cluster as mod  # type: ignore[import-not-found]

    assert mod.my_gpu_2().gpu == 2 and set(mod.NAMED_RESOURCES) == set(found)


def test_registry_lists_aliases_and_fractionals_under_their_resource(plugin_site: Write) -> None:
    """TorchX's ``to_dict``/``str``: ``aliases`` and ``fractionals`` of a named resource."""
    plugin_site("torchx_plugins/named_resources/cluster.py", GPU_HOST)
    reg = PluginRegistry()
    items = {i["name"]: i for i in reg.to_dict()["named_resource"]}
    assert set(items) == {"my_gpu", "cpu_box"}
    assert items["my_gpu"]["aliases"] == ["big_gpu"]
    fractionals = ["my_gpu_1", "my_gpu_2", "my_gpu_4", "my_gpu_8"]
    assert sorted(items["my_gpu"]["fractionals"]) == fractionals
    assert "aliases" not in items["cpu_box"]
    assert "    aliases: [big_gpu]\n    fractionals: [my_gpu_" in str(reg)


def test_namespace_named_resources_reach_specs(plugin_site: Write) -> None:
    """``resource(h=...)`` and ``named_resources`` read the same registry."""
    plugin_site("torchx_plugins/named_resources/cluster.py", GPU_HOST)
    res = specs.resource(h="my_gpu_2")
    assert (res.gpu, res.get_resource_name(), res.is_fractional()) == (2, "my_gpu_2", True)
    assert "cpu_box_32" in specs.named_resources
    assert "gpu.small" in specs.named_resources  # built-ins stay


def test_broken_named_resource_plugin_is_reported(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/named_resources/bad.py", "raise RuntimeError('bad table')\n")
    assert (
        "RuntimeError: bad table"
        in specs.named_resources.broken["torchx_plugins.named_resources.bad"]
    )
    assert specs.resource(h="gpu.small").gpu == 1


def test_duplicate_resource_name_in_one_module_is_refused(plugin_site: Write) -> None:
    plugin_site(
        "torchx_plugins/named_resources/dup.py",
        "from torchx_core.plugins import register\nfrom torchx_core.specs import Resource\n"
        "@register.named_resource(fractionals={1.0: 'x', 0.5: 'x'})\n"
        "def r(fractional=1.0):\n    return Resource(1, 0, 1)\n",
    )
    errors = PluginRegistry().load_errors(PluginType.NAMED_RESOURCE)
    assert any("duplicate named resource `r_x`" in e.error for e in errors)


def test_equal_resources_from_two_modules_are_idempotent(plugin_site: Write) -> None:
    body = (
        "from torchx_core.plugins import register\nfrom torchx_core.specs import Resource\n"
        "@register.named_resource()\ndef same_host():\n    return Resource(4, 0, 4096)\n"
    )
    plugin_site("torchx_plugins/named_resources/one.py", body)
    plugin_site("torchx_plugins/named_resources/two.py", body)
    reg = PluginRegistry()
    assert "same_host" in reg.get(PluginType.NAMED_RESOURCE)
    assert reg.load_errors() == []


def test_scheduler_plugin_from_namespace_reaches_the_scheduler_registry(plugin_site: Write) -> None:
    from torchx_core.schedulers import get_scheduler_factories, get_scheduler_factory

    plugin_site(
        "torchx_plugins/schedulers/mine.py",
        "from torchx_core.plugins import register\n"
        "@register.scheduler()\n"
        "def ns_only(session_name, **kw):\n"
        "    return ('ns', session_name)\n",
    )
    assert get_scheduler_factory("ns_only")("s") == ("ns", "s")
    assert "ns_only" in get_scheduler_factories()
