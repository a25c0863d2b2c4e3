"""torchx_core.util.entrypoints: TorchX's load/load_group, and the cheap declared-names check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchx_core.util import entrypoints


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    dist = site / "eptest-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: eptest\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[eptest.group]\nfn = eptest_mod:double\nmod = eptest_mod\n# comment = no\n"
        "[other.group]\nx = eptest_mod:double\n"
    )
    (site / "eptest_mod.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_load_and_default(site: Path) -> None:
    assert entrypoints.load("eptest.group", "fn")(3) == 6  # type: ignore[operator]
    assert entrypoints.load("eptest.group", "missing", default=None) is None
    with pytest.raises(KeyError, match=r"entrypoint eptest\.group\.missing not found"):
        entrypoints.load("eptest.group", "missing")


def test_load_group_defers_loading(site: Path) -> None:
    group = entrypoints.load_group("eptest.group")
    assert sorted(group) == ["fn", "mod"]
    assert group["fn"](4) == 8
    assert group["mod"]("ignored", k=1).__name__ == "eptest_mod"  # type: ignore[attr-defined]
    assert entrypoints.load_group("no.such.group") == {}


def test_declared_names_reads_no_code(site: Path) -> None:
    assert entrypoints.declared_names("eptest.group") == {"fn", "mod"}
    assert entrypoints.declared_names("other.group") == {"x"}
    assert entrypoints.declared_names("nothing") == set()
    assert entrypoints.declared_names("eptest.group", paths=[str(site / "nope")]) == set()


def test_undeclared_group_skips_importlib_metadata() -> None:
    code = (
        "import sys\nfrom torchx_core.util import entrypoints\n"
        "assert entrypoints.load_group('surely.no.such.group') == {}\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_declared_names_sees_a_distribution_installed_later(site: Path) -> None:
    assert "late" not in entrypoints.declared_names("eptest.group")
    dist = site / "late_dist-0.1.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[eptest.group]\nlate = eptest_mod:double\n")
    assert "late" in entrypoints.declared_names("eptest.group")


def test_a_replaced_metadata_entry_points_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchX users fake entry points by patching ``entrypoints.metadata.entry_points`` (that is
    ``importlib.metadata.entry_points``): the group is then read from it, declared or not."""
    from importlib.metadata import EntryPoint, EntryPoints

    fake = EntryPoints(
        [EntryPoint("j", "os.path:join", "fake.group"), EntryPoint("x", "os:sep", "other")]
    )
    monkeypatch.setattr(entrypoints.metadata, "entry_points", lambda: fake)
    assert [ep.name for ep in entrypoints.entry_points("fake.group")] == ["j"]
    assert entrypoints.load("fake.group", "j") is os.path.join
    assert list(entrypoints.load_group("fake.group")) == ["j"]
