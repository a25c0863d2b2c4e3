"""The Compatibility table (docs/compatibility.md) is the version matrix CI runs
(scripts/matrix/cells.py), and the declared lower bounds are the oldest versions it tests."""

from __future__ import annotations

import re
from pathlib import Path

from matrix.cells import CELLS, table

REPO = Path(__file__).resolve().parents[1]


def test_readme_table_is_the_matrix() -> None:
    page = (REPO / "docs" / "compatibility.md").read_text()
    m = re.search(r"<!-- compat:begin[^>]*-->\n(.*?)\n<!-- compat:end -->", page, re.DOTALL)
    assert m, "docs/compatibility.md has no compat:begin/compat:end block"
    assert m.group(1) == table(), "regenerate it: python scripts/matrix/run.py --table"


def test_lower_bounds_are_the_oldest_cells() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    oldest = {c.engine: c.version for c in CELLS if "oldest" in c.roles}
    for engine, dist in (("airflow", "apache-airflow"), ("prefect", "prefect"), ("kfp", "kfp")):
        bound = re.search(rf'"{dist}>=([0-9.]+)', pyproject)
        assert bound, dist
        declared = bound.group(1)
        assert oldest[engine] == declared or oldest[engine] == f"{declared}.0", (engine, declared)
    pythons = sorted(c.python for c in CELLS if c.engine == "python")
    assert f'requires-python = ">={pythons[0]}"' in pyproject
