"""The README and the documentation stay true: the scheduler pages' run-option tables match the
schedulers' own definitions, and the README stays a landing page whose links resolve."""

from __future__ import annotations

import re
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


def test_readme_is_a_landing_page_whose_links_resolve() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250, "the README is a landing page: move details into docs/"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"README links to missing files: {missing}"
