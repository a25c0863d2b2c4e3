"""The repository carries everything its tests and build need: nothing reads a folder beside it.

A user who clones the repository alone must be able to run the README's test command, so no
test, script or build file may reach ``../shared`` (or any sibling folder of the clone).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_SCANNED = ("tests", "scripts", "docs", "examples", "benchmarks", ".ci")
_BUILD_FILES = ("Makefile", "pyproject.toml", "conftest.py")
# ways a path to a folder beside the clone is spelled: "../shared", "/work/shared",
# REPO.parent / "shared", parents[N] / "shared", os.path.join(..., "shared", ...)
OUTSIDE = re.compile(
    r"\.\./+shared\b|/work/shared\b|\.parent\s*/\s*[\"']shared[\"']"
    r"|parents\[\d+\]\s*/\s*[\"']shared[\"']|join\([^)]*[\"']shared[\"']"
)


def _files() -> list[Path]:
    out = [REPO / name for name in _BUILD_FILES if (REPO / name).is_file()]
    for top in _SCANNED:
        out += [
            p
            for p in (REPO / top).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p != Path(__file__).resolve()
        ]
    return out


def test_nothing_reads_a_folder_beside_the_clone() -> None:
    files = _files()
    assert REPO / "Makefile" in files and len(files) > 50, "the scan found nothing to check"
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [
            f"{path.relative_to(REPO)}:{n}: {line.strip()}"
            for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)
        ]
    assert not hits, "files reaching outside the repository:\n" + "\n".join(hits)


def test_pattern_spots_every_spelling() -> None:
    spelled = [
        'SEEDS = REPO.parent / "shared" / "seeds"',
        "open('../shared/seeds/000.txt')",
        "cat /work/shared/DESIGN.md",
        "Path(__file__).parents[2] / 'shared'",
        'os.path.join(root, "..", "shared")',
    ]
    assert [bool(OUTSIDE.search(s)) for s in spelled] == [True] * len(spelled)
    legit = ["--chdir=/shared/jobs/run1", "shared_memory", "a shared JobTable"]
    assert [bool(OUTSIDE.search(s)) for s in legit] == [False] * len(legit)
