"""Golden files of the schedulers' dryrun requests (``tests/schedulers/golden/``).

A golden test renders a dryrun request exactly as ``torchx run --dryrun`` prints it
(``str(AppDryRunInfo)``), replaces the random part of the generated names with a fixed
placeholder, and compares the text with a file under ``golden/`` byte for byte.

To regenerate after an intended change, run the test with ``UPDATE_GOLDEN=1``, e.g.::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/schedulers/test_docker_scheduler.py -k golden

and review the diff (``git diff tests/schedulers/golden``) before committing. Under CI (``CI`` set)
``UPDATE_GOLDEN=1`` is refused: a run that rewrites its golden files can never fail.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"


def update_requested() -> bool:
    """True when ``UPDATE_GOLDEN=1`` asks to rewrite golden files; refused under CI.

    Raises:
        RuntimeError: ``UPDATE_GOLDEN=1`` while ``CI`` is set
    """
    if os.environ.get("UPDATE_GOLDEN") != "1":
        return False
    ci = os.environ.get("CI", "")
    if ci and ci.lower() not in ("0", "false", "no"):
        raise RuntimeError(
            f"UPDATE_GOLDEN=1 under CI (CI={ci!r}) would rewrite the golden files and let every"
            " golden test pass; unset UPDATE_GOLDEN (regenerate locally, see"
            " tests/schedulers/golden/README.md)"
        )
    return True


def check_golden(name: str, text: str, test_file: str) -> None:
    """Asserts that ``text`` equals ``golden/<name>``; rewrites the file under ``UPDATE_GOLDEN=1``.

    Args:
        name: file name under ``tests/schedulers/golden``
        text: the rendered request
        test_file: ``__file__`` of the calling test (named in the regenerate hint)
    """
    path = GOLDEN_DIR / name
    if not text.endswith("\n"):
        text += "\n"
    if update_requested():
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not path.is_file():
        raise AssertionError(
            f"golden file {path} is missing; create it with UPDATE_GOLDEN=1 .venv/bin/python -m"
            f" pytest {os.path.relpath(test_file)}"
        )
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=str(path),
                tofile="generated",
            )
        )
        raise AssertionError(
            f"the dryrun request differs from {path}:\n{diff}\nif the change is intended,"
            f" regenerate with UPDATE_GOLDEN=1 .venv/bin/python -m pytest"
            f" {os.path.relpath(test_file)} and review the diff"
        )
