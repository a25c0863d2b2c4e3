"""torchx_core.util.modules, .strings and .cuda: TorchX's small helpers, behaving as TorchX's."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from torchx_core.util.modules import import_attr, load_module
from torchx_core.util.strings import normalize_str


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "tx_broken_mod.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "tx_broken_dep_mod.py").write_text("import tx_no_such_dependency\n")
    for name in ("tx_broken_mod", "tx_broken_dep_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_load_module_resolves_a_module_or_its_attribute() -> None:
    assert load_module("os.path") is os.path
    assert load_module("os.path:join") is os.path.join


def test_load_module_is_none_when_absent_silently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "torchx_core.util.modules"):
        assert load_module("no_such_pkg.mod") is None
    assert caplog.records == []


@pytest.mark.parametrize(
    "path, named",
    [
        ("tx_broken_mod", "boom"),
        ("tx_broken_dep_mod", "tx_no_such_dependency"),  # a broken module is not an absent one
        ("os.path:join:extra", "join:extra"),  # only the first `:` splits
    ],
)
def test_load_module_is_none_with_a_warning_when_broken(
    on_path: Path, caplog: pytest.LogCaptureFixture, path: str, named: str
) -> None:
    with caplog.at_level(logging.WARNING, "torchx_core.util.modules"):
        assert load_module(path) is None
    assert named in caplog.text and path in caplog.text


def test_import_attr_defaults_only_for_an_absent_module(on_path: Path) -> None:
    assert import_attr("os.path", "join", default=None) is os.path.join
    assert import_attr("no_such_pkg", "x", default="d") == "d"
    with pytest.raises(ModuleNotFoundError, match="tx_no_such_dependency"):
        import_attr("tx_broken_dep_mod", "x", default="d")
    with pytest.raises(AttributeError):
        import_attr("os.path", "joyin", default=None)


@pytest.mark.parametrize(
    "raw, expected",
    [("abcd123", "abcd123"), ("-/_a/b/CD!123!", "abcd123"), ("_-job", "job"), ("!!!", "")],
)
def test_normalize_str(raw: str, expected: str) -> None:
    assert normalize_str(raw) == expected


@pytest.mark.parametrize(
    "available, count, expected", [(True, 1, True), (True, 0, False), (False, 1, False)]
)
def test_has_cuda_devices_needs_a_cuda_torch_and_a_device(
    monkeypatch: pytest.MonkeyPatch, available: bool, count: int, expected: bool
) -> None:
    torch = pytest.importorskip("torch")  # the dev lock holds torch's CPU wheel
    from torchx_core.util.cuda import has_cuda_devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    assert has_cuda_devices() is expected
