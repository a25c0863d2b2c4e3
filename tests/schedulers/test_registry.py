"""Scheduler registry: lazy built-ins, entry-point plugins, broken plugins, clashes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from torchx_core.schedulers import (
    DEFAULT_SCHEDULER_MODULES,
    get_default_scheduler_name,
    get_scheduler_factories,
    get_scheduler_factory,
)
from torchx_core.schedulers.registry import (
    DeferredFactory,
    SchedulerRegistry,
    SchedulerRegistryError,
)
from torchx_core.specs import MissingDependencyError, UnknownSchedulerException
from torchx_core.specs.errors import extra_install_hint


@dataclass
class EP:
    """A stand-in for importlib.metadata.EntryPoint."""

    name: str
    value: str
    obj: Any = None
    error: Exception | None = None
    loads: int = 0

    def load(self) -> Any:
        self.loads += 1
        if self.error is not None:
            raise self.error
        return self.obj


def plugin_factory(session_name: str, **kwargs: Any) -> str:
    return f"plugin:{session_name}:{sorted(kwargs)}"


class Scans:
    def __init__(self, eps: list[EP]) -> None:
        self.eps = eps
        self.calls = 0

    def __call__(self, group: str) -> list[EP]:
        self.calls += 1
        return self.eps


BUILTINS = {"b1": "json:dumps", "b2": "os.path:join"}


def test_builtin_lookup_loads_no_plugin() -> None:
    """A built-in resolves after a cheap look at the declared names; no plugin is imported."""
    ep = EP("p", "x:y", plugin_factory)
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans([ep]))
    factory = reg.get("b1")
    assert isinstance(factory, DeferredFactory)
    assert reg.view()["b2"] is reg.get("b2")
    assert "b1" in reg.view()
    assert ep.loads == 0


def test_plugins_add_to_builtins_and_scan_is_cached() -> None:
    scans = Scans([EP("p", "mod:fn", plugin_factory)])
    reg = SchedulerRegistry(BUILTINS, entry_points=scans)
    assert reg.names() == ["b1", "b2", "p"]
    assert reg.get("p")("s", a=1) == "plugin:s:['a']"
    assert list(reg.view()) == ["b1", "b2", "p"]
    calls = scans.calls
    reg.names()
    assert scans.calls == calls  # cached
    reg.refresh()
    reg.names()
    assert scans.calls == calls + 1


def test_plugin_module_with_create_scheduler_is_accepted() -> None:
    import types

    mod = types.ModuleType("m")
    mod.create_scheduler = plugin_factory  # type: ignore[attr-defined]
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans([EP("m", "m", mod)]))
    assert reg.get("m")("x") == "plugin:x:[]"


def test_broken_plugin_is_recorded_not_fatal() -> None:
    scans = Scans(
        [
            EP("broken", "nope:fn", error=ImportError("No module named 'nope'")),
            EP("good", "mod:fn", plugin_factory),
        ]
    )
    reg = SchedulerRegistry(BUILTINS, entry_points=scans)
    assert reg.names() == ["b1", "b2", "good"]
    assert "nope" in reg.plugin_errors()["broken"]
    with pytest.raises(SchedulerRegistryError, match="`broken` failed to load: ImportError"):
        reg.get("broken")


def test_builtin_reregistered_with_the_same_factory_is_idempotent(caplog) -> None:  # type: ignore[no-untyped-def]
    """TorchX's plugins replace the built-ins, so TorchX users re-register them to keep them
    (`local_cwd = torchx.schedulers.local_scheduler:create_scheduler`): accepted, no change."""
    import json

    ep = EP("b1", "json:dumps", json.dumps)
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans([ep, EP("p", "m:f", plugin_factory)]))
    assert isinstance(reg.get("b1"), DeferredFactory)
    assert reg.names() == ["b1", "b2", "p"]
    assert reg.plugin_errors() == {}
    assert "overridden" not in caplog.text


def test_builtin_overridden_by_another_factory_is_allowed_and_logged(caplog) -> None:  # type: ignore[no-untyped-def]
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans([EP("b1", "evil:fn", plugin_factory)]))
    with caplog.at_level("WARNING"):
        assert reg.get("b1")("s") == "plugin:s:[]"  # even on the built-in lookup path
    assert "scheduler `b1` is overridden by the plugin" in caplog.text
    assert reg.names() == ["b1", "b2"]  # still listed once, in the built-in order
    assert reg.overridden() == ["b1"]
    assert reg.plugin_errors() == {}


def test_two_plugins_with_one_name_is_recorded_first_wins() -> None:
    def other(session_name: str) -> str:
        return "other"

    eps = [EP("p", "a:fn", plugin_factory), EP("p", "b:fn", other), EP("q", "c:fn", other)]
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans(eps))
    assert reg.get("p")("s") == "plugin:s:[]"
    assert reg.get("q")("s") == "other"  # the clash breaks no other plugin
    assert "declared twice" in reg.plugin_errors()["p"]


def test_same_plugin_seen_twice_is_not_a_clash() -> None:
    eps = [EP("p", "a:fn", plugin_factory), EP("p", "a:fn", plugin_factory)]
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans(eps))
    assert reg.names() == ["b1", "b2", "p"]


def test_unknown_name_lists_valid_names_with_suggestion() -> None:
    reg = SchedulerRegistry(BUILTINS, entry_points=Scans([]))
    with pytest.raises(UnknownSchedulerException) as e:
        reg.get("b11")
    msg = str(e.value)
    assert "b1" in msg and "b2" in msg and "Did you mean" in msg
    with pytest.raises(KeyError):
        reg.view()["b11"]


def test_deferred_factory_reports_missing_backend_module() -> None:
    reg = SchedulerRegistry(
        {"ghost": "torchx_core.schedulers.no_such_scheduler"}, entry_points=Scans([])
    )
    with pytest.raises(SchedulerRegistryError, match="not installed"):
        reg.get("ghost")("s")


def test_deferred_factory_missing_attribute() -> None:
    reg = SchedulerRegistry({"j": "json:no_such_fn"}, entry_points=Scans([]))
    with pytest.raises(SchedulerRegistryError, match="no callable"):
        reg.get("j")("s")


def test_deferred_factory_maps_missing_third_party_dep_to_extra(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "needs_dep_sched.py").write_text("import definitely_missing_dep_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = SchedulerRegistry({"kubernetes": "needs_dep_sched"}, entry_points=Scans([]))
    with pytest.raises(MissingDependencyError) as e:
        reg.get("kubernetes")("s")
    assert extra_install_hint("kubernetes") in str(e.value)


def test_public_helpers() -> None:
    assert get_default_scheduler_name() == "local_cwd"
    assert next(iter(DEFAULT_SCHEDULER_MODULES)) == "local_cwd"
    for name in ("local_cwd", "local_docker", "slurm", "kubernetes", "aws_batch", "ray", "lsf"):
        assert name in DEFAULT_SCHEDULER_MODULES
    assert isinstance(get_scheduler_factory("slurm"), DeferredFactory)
    factories = get_scheduler_factories()
    assert next(iter(factories)) == "local_cwd"
    assert set(get_scheduler_factories(skip_defaults=True)).isdisjoint(DEFAULT_SCHEDULER_MODULES)


def test_real_entry_point_plugin_is_found(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from torchx_core.schedulers.registry import default_registry

    site = tmp_path / "site"
    dist = site / "regtest_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: regtest-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[torchx.schedulers]\nregtest = regtest_plugin_mod:create_scheduler\n"
        "regtest_broken = regtest_missing_mod:create_scheduler\n"
    )
    (site / "regtest_plugin_mod.py").write_text(
        "def create_scheduler(session_name, **kwargs):\n    return ('sched', session_name)\n"
    )
    monkeypatch.syspath_prepend(str(site))
    default_registry().refresh()
    try:
        factories = get_scheduler_factories()
        assert "regtest" in factories and "regtest_broken" not in factories
        assert get_scheduler_factory("regtest")("sess") == ("sched", "sess")
        assert "regtest_missing_mod" in default_registry().plugin_errors()["regtest_broken"]
    finally:
        default_registry().refresh()


def test_importing_registry_loads_no_backend_and_scans_nothing() -> None:
    code = (
        "import sys, torchx_core.schedulers as s\n"
        "f = s.get_scheduler_factory('local_cwd')\n"
        "bad = [m for m in sys.modules if m.endswith('_scheduler') or m == 'importlib.metadata']\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
