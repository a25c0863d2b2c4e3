"""The executable examples of the public specs API run and pass.

``docs/specs.md`` is our own page of examples (its ``pycon`` blocks run top to bottom in one
namespace), and the ``>>>`` examples in the docstrings of ``torchx_core.specs`` run too.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import torchx_core.specs

REPO = Path(__file__).resolve().parents[2]
SPECS_PAGE = REPO / "docs" / "specs.md"
_FLAGS = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL
_BLOCK = re.compile(r"^```pycon\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def pycon_blocks(text: str) -> list[str]:
    """The bodies of the ```pycon fenced blocks of a markdown text, in order."""
    return _BLOCK.findall(text)


def run_examples(source: str, name: str) -> tuple[doctest.TestResults, str]:
    """Run doctest examples from ``source`` in a fresh namespace; return results and report."""
    test = doctest.DocTestParser().get_doctest(source, {}, name, name, 0)
    out = io.StringIO()
    runner = doctest.DocTestRunner(verbose=False, optionflags=_FLAGS)
    return runner.run(test, out=out.write), out.getvalue()


def test_specs_page_examples_pass() -> None:
    # in a fresh interpreter: in the full suite, threads other tests leave behind (a rich console
    # refreshing, ...) write into sys.stdout while doctest captures it
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_specs_docs as t\n"
        "blocks = t.pycon_blocks(t.SPECS_PAGE.read_text(encoding='utf-8'))\n"
        "r, report = t.run_examples('\\n'.join(blocks), str(t.SPECS_PAGE))\n"
        "print(report); print('RESULT', len(blocks), r.attempted, r.failed)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    *report, last = out.stdout.rstrip("\n").split("\n")
    assert last.startswith("RESULT "), out.stdout + out.stderr
    blocks, attempted, failed = (int(x) for x in last.split()[1:])
    assert failed == 0, "\n".join(report)
    # the page covers every area of the reference: a page cut down to nothing must fail
    assert blocks >= 20 and attempted >= 130, (blocks, attempted)


def test_specs_page_covers_every_area() -> None:
    text = SPECS_PAGE.read_text(encoding="utf-8")
    for api in (
        "AppDef(",
        "Role(",
        "Resource(",
        "resource(",
        "macros.Values",
        "runopts()",
        "cfg_from_str",
        "cast_to_type",
        "StructuredOpts",
        ".format(",
        "to_json()",
        "raise_for_status",
        "parse_app_handle",
        "parse_mounts",
        "set_overlay",
        "PUT(",
        "JOIN(",
        "DEL(",
        "validate_overlay",
        "named_resources",
        "file_linter.validate",
        "get_fn_docstring",
        "AppDryRunInfo",
        "Workspace",
    ):
        assert any(api in block for block in pycon_blocks(text)), f"no runnable example uses {api}"


def test_pycon_blocks_extracts_only_fenced_pycon() -> None:
    text = "intro\n```pycon\n>>> 1 + 1\n2\n\n```\n```python\n>>> 2\n```\n```pycon\n>>> 3\n3\n```\n"
    assert pycon_blocks(text) == [">>> 1 + 1\n2\n\n", ">>> 3\n3\n"]


def test_a_wrong_example_fails() -> None:
    results, report = run_examples(">>> 1 + 1\n3\n", "wrong")
    assert (results.attempted, results.failed) == (1, 1)
    assert "Expected:\n    3\nGot:\n    2" in report


def _specs_modules() -> list[str]:
    return [torchx_core.specs.__name__] + [
        f"{torchx_core.specs.__name__}.{m.name}"
        for m in pkgutil.iter_modules(torchx_core.specs.__path__)
    ]


@pytest.mark.parametrize("module", _specs_modules())
def test_specs_docstring_examples_pass(module: str) -> None:
    out = io.StringIO()
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(verbose=False, optionflags=_FLAGS)
    mod = importlib.import_module(module)
    for test in finder.find(mod, module):
        runner.run(test, out=out.write)
    assert runner.failures == 0, out.getvalue()
