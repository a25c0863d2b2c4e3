"""lazy_exports: the one module ``__getattr__``/``__dir__`` of every lazy package face."""

from __future__ import annotations

import importlib
import sys

import pytest

from torchx_core.util.lazy import lazy_exports

FACES = (
    "torchx_core.specs",
    "torchx_core.specs.api",
    "torchx_core.runner",
    "torchx_core.runner.events",
    "torchx_core.schedulers",
    "torchx_core.plugins",
    "torchx_core.dashboard",
    "torchx_airflow",
    "torchx_kfp",
    "torchx_prefect",
)


def test_a_name_loads_on_first_access_and_is_cached() -> None:
    ns: dict[str, object] = {}
    getattr_, dir_ = lazy_exports("pkg", {"dedent": "textwrap"}, ns)
    assert "dedent" not in ns
    assert getattr_("dedent") is sys.modules["textwrap"].dedent
    assert ns["dedent"] is sys.modules["textwrap"].dedent
    assert dir_() == ["dedent"]


def test_without_cache_every_access_reads_the_defining_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns: dict[str, object] = {"here": 1}
    getattr_, dir_ = lazy_exports("pkg", {"dedent": "textwrap"}, ns, cache=False)
    getattr_("dedent")
    assert "dedent" not in ns
    monkeypatch.setattr("textwrap.dedent", len)
    assert getattr_("dedent") is len
    assert dir_() == ["dedent", "here"]


def test_an_unknown_name_is_the_attribute_error_python_raises() -> None:
    getattr_, _ = lazy_exports("pkg.sub", {}, {})
    with pytest.raises(AttributeError, match=r"^module 'pkg.sub' has no attribute 'nope'$"):
        getattr_("nope")


@pytest.mark.parametrize("face", FACES)
def test_every_face_lists_its_names_and_refuses_unknown_ones(face: str) -> None:
    module = importlib.import_module(face)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match=rf"^module '{face}' has no attribute 'no_such'$"):
        getattr(module, "no_such")  # noqa: B009 - the module's __getattr__ is what is tested
    assert not hasattr(module, "no_such")
