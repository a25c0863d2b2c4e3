"""Same-name named resources from two portions of the namespace: equal values are idempotent,
different ones are a recorded duplicate (TorchX's ``_collect_plugins_from_module``)."""

from __future__ import annotations

import enum
import types
from collections.abc import Callable
from typing import Any

from torchx_core.plugins import PluginRegistry, PluginSource, PluginType, resource_tags
from torchx_core.specs import Resource


def _module(mod_name: str, factory: Callable[[], object]) -> types.ModuleType:
    factory._plugin_type = PluginType.NAMED_RESOURCE  # type: ignore[attr-defined]
    factory._plugin_name = "t_test"  # type: ignore[attr-defined]
    factory.__module__ = mod_name
    mod = types.ModuleType(mod_name)
    mod.t_test = factory  # type: ignore[attr-defined]
    return mod


def _collect_both(a: Callable[[], object], b: Callable[[], object]) -> PluginRegistry:
    reg = PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG)
    found: dict[str, Any] = {}
    for name, factory in (("portion_a.mod", a), ("portion_b.mod", b)):
        reg._collect_plugins_from_module(
            _module(name, factory), name, PluginType.NAMED_RESOURCE, found
        )
    assert found["t_test"] is a  # the first one is kept
    return reg


def test_equal_value_is_idempotent_and_a_different_one_is_recorded() -> None:
    reg = _collect_both(lambda: Resource(1, 0, 1024), lambda: Resource(1, 0, 1024))
    assert reg.errors == []
    reg = _collect_both(lambda: Resource(1, 0, 1024), lambda: Resource(2, 0, 2048))
    [error] = reg.errors
    assert "DIFFERENT value" in error.error
    assert (error.name, error.module, error.plugin_type) == (
        "t_test",
        "portion_b.mod",
        "named_resource",
    )


def test_a_raising_factory_is_never_equal() -> None:
    def raises() -> Resource:
        raise RuntimeError("cannot materialize")

    assert len(_collect_both(lambda: Resource(1, 0, 1024), raises).errors) == 1


def test_twin_enums_and_a_false_fractional_tag_compare_semantically() -> None:
    def twin() -> type[enum.Enum]:
        class ServerType(enum.Enum):
            T1 = 100

        return ServerType

    a_type, b_type = twin(), twin()

    def a() -> Resource:
        return Resource(1, 0, 1024, capabilities={"types": [a_type["T1"]]})

    def b() -> Resource:
        tags = {resource_tags.IS_FRACTIONAL: False}
        return Resource(1, 0, 1024, capabilities={"types": [b_type["T1"]]}, tags=tags)

    assert a() != b()  # plain == sees two enum classes
    assert _collect_both(a, b).errors == []

    def fractional() -> Resource:
        return Resource(1, 0, 1024, tags={resource_tags.IS_FRACTIONAL: True})

    assert len(_collect_both(lambda: Resource(1, 0, 1024), fractional).errors) == 1


def test_normalize_value_ignores_set_order() -> None:
    set_a, set_b = {0, 8}, {8, 0}
    assert list(set_a) != list(set_b)  # the premise: equal sets, different iteration order
    norm = PluginRegistry._normalize_value
    assert norm(set_a) == norm(set_b)
    assert norm(frozenset(set_a)) == norm(frozenset(set_b))
    assert norm({"k": set_a}) == norm({"k": set_b})
    assert norm([0, 8]) != norm([8, 0])  # sequences keep their order
