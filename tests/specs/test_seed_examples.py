"""Every ``>>>`` example of the TorchX specs reference (seed 000) passes against torchx_core.

The examples are read straight from ``<repo>/../shared/seeds/000_081598ade595c54f.txt`` with
``torchx.`` read as ``torchx_core.`` (the same extraction as ``shared/hooks/seed_examples.py``).
"""

from __future__ import annotations

import doctest
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
SEED_000 = SEEDS / "000_081598ade595c54f.txt"


def _extract_examples(text: str, prefix: str = "torchx_core") -> str:
    text = re.sub(r"\btorchx\.", prefix + ".", text)
    text = re.sub(r"\bimport torchx\b", f"import {prefix}", text)
    cur: list[str] = []
    in_ex = False
    for line in text.splitlines():
        if line.startswith(">>>") or (in_ex and line.startswith("...")):
            cur.append(line)
            in_ex = True
        elif (
            in_ex
            and line.strip()
            and not line.startswith(("Parameters", "Raises", "Note", "class ", "torchx", prefix))
        ):
            cur.append(line)  # expected output
        else:
            if cur:
                cur.append("")
            in_ex = False
    return "\n".join(cur)


def _run(path: Path) -> tuple[doctest.TestResults, str]:
    examples = _extract_examples(path.read_text(encoding="utf-8"))
    test = doctest.DocTestParser().get_doctest(examples, {}, path.name, str(path), 0)
    out = io.StringIO()
    runner = doctest.DocTestRunner(
        verbose=False, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    )
    results = runner.run(test, out=out.write)
    return results, out.getvalue()


def test_seed_000_is_present() -> None:
    assert SEED_000.is_file(), (
        f"seed reference missing: {SEED_000} (CI keeps shared/ beside the clone)"
    )


def test_seed_000_examples_pass() -> None:
    if not SEED_000.is_file():
        pytest.fail(f"seed reference missing: {SEED_000}")
    results, report = _run(SEED_000)
    assert results.attempted >= 60, f"only {results.attempted} examples found in {SEED_000}"
    assert results.failed == 0, report


def test_extraction_rewrites_module_prefix() -> None:
    text = ">>> import torchx.specs as specs\n>>> specs.NONE\n'<NONE>'\n"
    assert _extract_examples(text).splitlines()[:3] == [
        ">>> import torchx_core.specs as specs",
        ">>> specs.NONE",
        "'<NONE>'",
    ]
