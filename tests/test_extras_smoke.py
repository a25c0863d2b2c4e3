"""The extras smoke's own logic: the metadata checks and the floor pins (scripts/extras_smoke.py).

The smoke itself (fresh venvs, pip, each extra's use) runs in `make test`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import extras_smoke  # scripts/ is on the test path (pyproject's pythonpath)

EXTRAS = "".join(f"Provides-Extra: {e}\n" for e in extras_smoke.USES)
REQS = (
    'Requires-Dist: docker>=7.1; extra == "docker"\n'
    'Requires-Dist: ray[default]>=2.9; extra == "ray"\n'
    'Requires-Dist: kfp<3,>=2.16; extra == "kfp"\n'
    "Requires-Dist: fsspec>=2023.1\n"
)


def _wheel(tmp_path: Path, headers: str, body: str = "x" * 300) -> Path:
    wheel = tmp_path / "torchx_suite-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torchx_suite-0.1.0.dist-info/METADATA", f"{headers}\n{body}")
    return wheel


GOOD = (
    "Metadata-Version: 2.4\nName: torchx-suite\nVersion: 0.1.0\nSummary: s\n"
    "Requires-Python: >=3.10\nDescription-Content-Type: text/markdown\n"
)


def test_good_metadata_passes(tmp_path: Path) -> None:
    assert extras_smoke.check_metadata(_wheel(tmp_path, GOOD + EXTRAS)) == []


def test_missing_extra_and_readme_are_named(tmp_path: Path) -> None:
    headers = GOOD + EXTRAS.replace("Provides-Extra: dashboard\n", "")
    problems = extras_smoke.check_metadata(_wheel(tmp_path, headers, body=""))
    assert any("['dashboard'] not declared" in p for p in problems), problems
    assert any("long description" in p for p in problems), problems


def test_floor_pins_are_the_declared_lower_bounds(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, GOOD + EXTRAS + REQS)
    assert extras_smoke.floor_pins(wheel, "docker") == ["docker==7.1"]
    assert extras_smoke.floor_pins(wheel, "ray") == ["ray[default]==2.9"]
    assert extras_smoke.floor_pins(wheel, "kfp") == ["kfp==2.16"]
    assert extras_smoke.floor_pins(wheel, "aws") == []
