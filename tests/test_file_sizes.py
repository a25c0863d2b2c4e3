"""No package module grows past 700 lines unless ARCHITECTURE.md lists it with a reason."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("torchx_core", "torchx_airflow", "torchx_kfp", "torchx_prefect")
MAX_LINES = 700


def listed() -> dict[str, str]:
    """``{path: why}`` of the table between the large-files markers of ARCHITECTURE.md."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    m = re.search(r"<!-- large-files:begin -->\n(.*?)<!-- large-files:end -->", text, re.DOTALL)
    assert m, "ARCHITECTURE.md has no large-files:begin/large-files:end block"
    rows = re.findall(r"^\| `([^`]+)` \| \d+ \| (.+) \|$", m.group(1), re.MULTILINE)
    return dict(rows)


def too_long(root: Path) -> dict[str, int]:
    """``{path: lines}`` of the package modules under ``root`` longer than ``MAX_LINES``."""
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            with path.open("rb") as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                found[path.relative_to(root).as_posix()] = n
    return found


def test_every_long_module_is_listed_with_a_reason() -> None:
    reasons = listed()
    unlisted = {p: n for p, n in too_long(REPO).items() if p not in reasons}
    assert not unlisted, (
        f"modules over {MAX_LINES} lines not in ARCHITECTURE.md's 'Files over 700 lines' list"
        f" (split them, or list them with why): {unlisted}"
    )
    assert all(why.strip() for why in reasons.values())


def test_the_check_sees_a_new_long_module(tmp_path: Path) -> None:
    (tmp_path / "torchx_kfp").mkdir()
    (tmp_path / "torchx_kfp" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "torchx_kfp" / "small.py").write_text("x = 1\n" * MAX_LINES)
    assert too_long(tmp_path) == {"torchx_kfp/big.py": MAX_LINES + 1}
    assert "torchx_core/runner/api.py" in listed()
