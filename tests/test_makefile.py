"""`make venv` syncs only when the venv is missing or older than what it is built from."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYNC = "uv sync --frozen"


def _dry_run(work: Path, target: str) -> str:
    out = subprocess.run(
        ["make", "-n", target], cwd=work, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A checkout's build inputs, with uv present (so only the venv's state decides)."""
    for name in ("Makefile", "uv.lock", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    (tmp_path / ".tools" / "bin").mkdir(parents=True)
    (tmp_path / ".tools" / "bin" / "uv").touch()
    return tmp_path


def test_venv_does_nothing_when_nothing_changed(work: Path) -> None:
    assert SYNC in _dry_run(work, "venv")  # a fresh clone: no venv yet
    stamp = work / ".venv" / ".synced"
    stamp.parent.mkdir()
    stamp.touch()
    later = time.time() + 5
    os.utime(stamp, (later, later))
    assert SYNC not in _dry_run(work, "venv")
    assert SYNC not in _dry_run(work, "test-fast")
    lock = work / "uv.lock"
    os.utime(lock, (later + 5, later + 5))  # the lock changed since the last sync
    assert SYNC in _dry_run(work, "venv")
