"""torchx_core.plugins: discovery from the namespace package and entry points, errors collected."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from torchx_core import plugins
from torchx_core.plugins import (
    PluginRegistry,
    PluginSource,
    PluginType,
    RegistrationError,
    register,
)

Write = Callable[[str, str], Path]

SCHED = """
from torchx_core.plugins import register

@register.scheduler()
def ns_sched(session_name, **kwargs):
    return ("ns_sched", session_name)

@register.scheduler(name="renamed")
def create(session_name, **kwargs):
    return ("renamed", session_name)

def not_a_plugin(session_name):
    return None
"""


def test_public_names_match_torchx() -> None:
    for name in (
        "register",
        "resource_tags",
        "powers_of_two_gpus",
        "halve_mem_down_to",
        "WHOLE",
        "HALF",
        "QUARTER",
        "EIGHTH",
        "SIXTEENTH",
        "RegistrationError",
        "PluginType",
        "PluginRegistry",
        "registry",
    ):
        assert hasattr(plugins, name), name
    assert PluginType.SCHEDULER.value == "torchx.schedulers"
    assert PluginType.NAMED_RESOURCE.value == "torchx.named_resources"
    assert PluginType.TRACKER.value == "torchx.tracker"
    assert PluginType.TRACKER.namespace == "torchx_plugins.tracker"


def test_namespace_package_plugins_are_found(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    plugin_site("torchx_plugins/schedulers/_private.py", "raise RuntimeError('never imported')")
    reg = PluginRegistry()
    found = reg.get(PluginType.SCHEDULER)
    assert sorted(found) == ["ns_sched", "renamed"]
    assert found["renamed"]("s") == ("renamed", "s")
    assert reg.load_errors() == []
    # only torchx-suite's own tracker entry points (TorchX also ships `fsspec`)
    assert sorted(reg.get(PluginType.TRACKER)) == ["fsspec", "mlflow"]
    assert PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG).get(PluginType.TRACKER) == {}


def test_implicit_namespace_subpackages_are_scanned(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/schedulers/team/cluster/mine.py", SCHED)
    assert "ns_sched" in PluginRegistry().get(PluginType.SCHEDULER)


def test_broken_module_wrong_kind_and_duplicates_are_collected(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/schedulers/a_good.py", SCHED)
    plugin_site("torchx_plugins/schedulers/b_broken.py", "import no_such_dependency_xyz\n")
    plugin_site(
        "torchx_plugins/schedulers/c_wrong.py",
        "from torchx_core.plugins import register\n"
        "@register.tracker()\ndef my_tracker(config):\n    return None\n",
    )
    plugin_site(
        "torchx_plugins/schedulers/d_dup.py",
        "from torchx_core.plugins import register\n"
        "@register.scheduler()\ndef ns_sched(session_name, **kwargs):\n    return 'dup'\n",
    )
    reg = PluginRegistry()
    found = reg.get(PluginType.SCHEDULER)
    assert found["ns_sched"]("s") == ("ns_sched", "s")  # first one wins
    errors = reg.load_errors(PluginType.SCHEDULER)
    by_module = {e.module: e for e in errors}
    assert "no_such_dependency_xyz" in by_module["torchx_plugins.schedulers.b_broken"].error
    assert by_module["torchx_plugins.schedulers.b_broken"].name is None
    wrong = by_module["torchx_plugins.schedulers.c_wrong"]
    assert (wrong.name, wrong.plugin_type) == ("my_tracker", "tracker")
    assert "register.scheduler" in wrong.error
    dup = by_module["torchx_plugins.schedulers.d_dup"]
    assert dup.name == "ns_sched" and "duplicate" in dup.error
    # the wrong-kind error is also reported under the kind it belongs to
    assert wrong in reg.load_errors(PluginType.TRACKER)


def test_entry_points_win_over_namespace_and_clash_is_recorded(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    plugin_site(
        "ep_sched_mod.py",
        "def create_scheduler(session_name, **kwargs):\n    return ('ep', session_name)\n",
    )
    plugin_site(
        "epdist-0.1.dist-info/entry_points.txt",
        "[torchx.schedulers]\nns_sched = ep_sched_mod:create_scheduler\n"
        "ep_broken = missing_mod_xyz:create_scheduler\n",
    )
    reg = PluginRegistry()
    found = reg.get(PluginType.SCHEDULER)
    assert found["ns_sched"]("s") == ("ep", "s")
    errors = {e.name: e for e in reg.load_errors(PluginType.SCHEDULER)}
    assert "entry point wins" in errors["ns_sched"].error
    assert "missing_mod_xyz" in errors["ep_broken"].error
    assert errors["ep_broken"].module == "missing_mod_xyz:create_scheduler"


def test_plugin_sources_select_channels(
    plugin_site: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    assert PluginRegistry(plugin_sources=PluginSource.ENTRYPOINT).get(PluginType.SCHEDULER) == {}
    assert PluginRegistry(plugin_sources=PluginSource.NONE).get(PluginType.SCHEDULER) == {}
    monkeypatch.setenv("TORCHX_PLUGINS_SOURCE", "7")
    monkeypatch.setattr(plugins._registry, "_registry", None)
    with pytest.raises(ValueError, match="TORCHX_PLUGINS_SOURCE='7' is invalid"):
        plugins.registry()
    monkeypatch.setenv("TORCHX_PLUGINS_SOURCE", "2")
    assert plugins.registry().get(PluginType.SCHEDULER) == {}  # namespace channel off
    monkeypatch.delenv("TORCHX_PLUGINS_SOURCE")


def test_add_remove_and_clear_keeps_code_registrations(plugin_site: Write) -> None:
    reg = PluginRegistry()
    reg.add(PluginType.TRACKER, "mem", dict)
    with pytest.raises(ValueError, match="already registered"):
        reg.add(PluginType.TRACKER, "mem", list)
    reg.add(PluginType.TRACKER, "mem", list, replace=True)
    reg.clear()
    builtin = {"fsspec", "mlflow"}  # torchx-suite's own tracker entry points
    assert reg.get(PluginType.TRACKER)["mem"] is list
    assert set(reg.get(PluginType.TRACKER)) == {"mem", *builtin}
    assert reg.may_provide(PluginType.TRACKER, "mem")
    reg.remove(PluginType.TRACKER, "mem")
    assert set(reg.get(PluginType.TRACKER)) == builtin


def test_may_provide_is_cheap_and_honest(plugin_site: Write) -> None:
    plugin_site(
        "mpdist-0.1.dist-info/entry_points.txt", "[torchx.tracker]\nmy_tracker = nowhere:make\n"
    )
    reg = PluginRegistry(plugin_sources=PluginSource.ENTRYPOINT)
    assert reg.may_provide(PluginType.TRACKER, "my_tracker")
    assert not reg.may_provide(PluginType.TRACKER, "other")
    assert reg.errors == []  # nothing was loaded by the check


def test_tracker_plugins_from_both_channels(plugin_site: Write) -> None:
    plugin_site(
        "torchx_plugins/tracker/mine.py",
        "from torchx_core.plugins import register\n"
        "@register.tracker(name='ns_tracker')\ndef make(config):\n    return ('ns', config)\n",
    )
    plugin_site("trk_mod.py", "def make(config):\n    return ('ep', config)\n")
    plugin_site(
        "trkdist-0.1.dist-info/entry_points.txt", "[torchx.tracker]\nep_tracker = trk_mod:make\n"
    )
    found = plugins.registry().get(PluginType.TRACKER)
    assert found["ns_tracker"]("c") == ("ns", "c")
    assert found["ep_tracker"]("c") == ("ep", "c")


def test_to_dict_and_str(plugin_site: Write) -> None:
    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    plugin_site("torchx_plugins/schedulers/bad.py", "raise ImportError('boom: x')\n")
    reg = PluginRegistry()
    data = reg.to_dict()
    json.dumps(data)
    assert {i["name"] for i in data["scheduler"]} == {"ns_sched", "renamed"}
    assert data["errors"] == [
        {"module": "torchx_plugins.schedulers.bad", "error": "ImportError: boom: x"}
    ]
    text = str(reg)
    # TorchX's layout: names and modules plain, error texts quoted
    assert "  - name: ns_sched\n    module: torchx_plugins.schedulers.mine" in text
    assert 'error: "ImportError: boom: x"' in text


def test_str_quotes_only_names_plain_yaml_would_misread() -> None:
    reg = PluginRegistry(
        plugin_sources=PluginSource.ENTRYPOINT, entry_points=lambda group: iter([])
    )
    for name in ("yes", "1.0", "a: b", "plain_name"):
        reg.add(PluginType.TRACKER, name, lambda config: None)
    text = str(reg)
    for quoted in ('"yes"', '"1.0"', '"a: b"'):
        assert f"  - name: {quoted}\n" in text
    assert "  - name: plain_name\n" in text


def test_registration_error_is_a_frozen_value() -> None:
    a = RegistrationError("m", "e", "n", "scheduler")
    assert a == RegistrationError(module="m", error="e", name="n", plugin_type="scheduler")
    assert len({a, RegistrationError("m", "e", "n", "scheduler")}) == 1
    with pytest.raises(AttributeError, match="frozen"):
        a.name = "x"  # type: ignore[misc]
    assert RegistrationError("m", "e").name is None


def test_register_tags_the_function() -> None:
    @register.scheduler()
    def s(session_name: str) -> None: ...

    @register(PluginType.TRACKER, name="t")
    def t(config: str) -> None: ...

    assert (s._plugin_type, s._plugin_name) == (PluginType.SCHEDULER, "s")  # type: ignore[attr-defined]
    assert (t._plugin_type, t._plugin_name) == (PluginType.TRACKER, "t")  # type: ignore[attr-defined]


def test_importing_plugins_is_light() -> None:
    code = (
        "import sys, torchx_core.plugins as p\n"
        "print(sorted(m for m in"
        " ('importlib.metadata', 'dataclasses', 'pkgutil', 'torchx_core.specs')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_cache_clear_builds_a_new_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchX's ``registry`` is an ``lru_cache``d function: tests call ``registry.cache_clear()``
    between cases."""
    monkeypatch.setattr(plugins._registry, "_registry", None)
    first = plugins.registry()
    assert plugins.registry() is first
    plugins.registry.cache_clear()  # type: ignore[attr-defined]
    assert plugins.registry() is not first


def test_a_replaced_load_group_is_the_entry_point_channel(
    plugin_site: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TorchX users fake entry-point plugins by patching ``util.entrypoints.load_group``: its
    answer is the group, and it still wins over a namespace plugin of the same name."""
    from torchx_core.util import entrypoints

    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    monkeypatch.setattr(
        entrypoints, "load_group", lambda group: {"ns_sched": "from_ep", "ep_only": group}
    )
    both = PluginRegistry().get(PluginType.SCHEDULER)
    assert both["ns_sched"] == "from_ep" and both["ep_only"] == "torchx.schedulers"
    assert "renamed" in both  # the namespace plugins fill the gaps
    ns_only = PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG)
    assert "ep_only" not in ns_only.get(PluginType.SCHEDULER)


# -- TorchX's PluginRegistry internals, which plugin authors' tests call -----------------------


def test_get_returns_the_cached_dict_until_a_code_registration_changes_it() -> None:
    """TorchX's ``get`` hands back its cached dict (``info`` copies); ``add``/``remove``/``clear``
    make the next ``get`` build a new one."""
    reg = PluginRegistry(plugin_sources=PluginSource.NONE)
    first = reg.get(PluginType.TRACKER)
    assert reg.get(PluginType.TRACKER) is first
    assert reg.info(PluginType.TRACKER) is not first
    assert reg.get_group("torchx.tracker") is not first  # ours (not TorchX's) hands out a copy
    reg.add(PluginType.TRACKER, "mem", dict)
    added = reg.get(PluginType.TRACKER)
    assert added is not first and added == {"mem": dict}
    reg.remove(PluginType.TRACKER, "mem")
    assert reg.get(PluginType.TRACKER) == {}
    before = reg.get(PluginType.TRACKER)
    reg.clear()
    assert reg.get(PluginType.TRACKER) is not before


def test_namespace_for_type_is_torchx_static_name() -> None:
    assert PluginRegistry._namespace_for_type(PluginType.SCHEDULER) == "torchx_plugins.schedulers"
    assert (
        PluginRegistry._namespace_for_type(PluginType.NAMED_RESOURCE)
        == "torchx_plugins.named_resources"
    )
    assert PluginRegistry._namespace_for_type(PluginType.TRACKER) == "torchx_plugins.tracker"


def test_find_namespace_plugins_records_a_package_that_cannot_be_listed(
    plugin_site: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TorchX users patch ``_registry.pkgutil.iter_modules``: a failing scan is an error, not a
    crash."""
    plugin_site("torchx_plugins/schedulers/mine.py", SCHED)
    reg = PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG)

    def broken(path: object) -> object:
        raise OSError("broken __path__")

    monkeypatch.setattr(plugins._registry.pkgutil, "iter_modules", broken)
    assert reg._find_namespace_plugins("torchx_plugins.schedulers") == {}
    [error] = reg.errors
    assert error.module == "torchx_plugins.schedulers" and "broken __path__" in error.error
    monkeypatch.undo()
    assert reg._find_namespace_plugins("torchx_plugins.not_there_xyz") == {}
    found = reg._find_namespace_plugins("torchx_plugins.schedulers", PluginType.SCHEDULER)
    assert sorted(found) == ["ns_sched", "renamed"]


def test_plugins_are_listed_in_pkgutil_order_then_implicit_subpackages(plugin_site: Write) -> None:
    """As TorchX lists them (``print(registry())``): the modules ``pkgutil`` finds, then the
    sub-directories without ``__init__.py``; a wrong-kind plugin's error reads as TorchX's."""
    plugin_site("torchx_plugins/schedulers/aaa/inner.py", SCHED.replace("ns_sched", "first_abc"))
    plugin_site("torchx_plugins/schedulers/zzz.py", SCHED)
    plugin_site(
        "torchx_plugins/schedulers/wrong.py",
        "from torchx_core.plugins import register\n"
        "@register.tracker()\ndef mlflow(config):\n    return None\n",
    )
    reg = PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG)
    assert list(reg.get(PluginType.SCHEDULER))[-1] == "first_abc"
    [error] = reg.load_errors(PluginType.TRACKER)
    assert error.error == (
        "is a tracker but is under the scheduler namespace \u2014 use @register.scheduler()"
        " or move to `torchx_plugins.tracker`"
    )
