"""The README stays true: its run-option tables match the schedulers' own definitions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_runopts_tables_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "runopts_markdown.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_names_the_two_setup_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
