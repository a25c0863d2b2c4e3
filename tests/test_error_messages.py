"""Our adapters' error messages read as sentences: no double full stop (issue 35 item 10).

A message that wraps another error (``f"...: {error}. Came from ..."``) printed ``group.. Came
from`` when the wrapped message already ended with a full stop. This scans the source of the
three adapters for an f-string placing an error or message value right before a ``.``; wrap it
with ``torchx_airflow.errors.sentence`` (or the like) instead, which adds the stop only when
missing. Behaviour is checked where the message is built (e.g.
``tests/airflow/test_airflow_operator_resume.py::test_a_configuration_error_reads_as_sentences``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ADAPTERS = ("torchx_airflow", "torchx_prefect", "torchx_kfp")
#: names that hold an exception or a message text (which may end with its own full stop)
MESSAGE_NAMES = frozenset(
    {"e", "err", "error", "exc", "ex", "message", "msg", "reason", "cause", "detail", "text"}
)


def stop_after_message(source: str) -> list[int]:
    """Line numbers of f-strings where a message value is directly followed by ``.``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, after in zip(node.values, node.values[1:], strict=False):
            if not (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)):
                continue
            text = after.value
            if not isinstance(text, str) or not text.startswith(".") or text.startswith(".."):
                continue
            inner = value.value
            name = (
                inner.id
                if isinstance(inner, ast.Name)
                else inner.attr
                if isinstance(inner, ast.Attribute)
                else None
            )
            if name in MESSAGE_NAMES and value.conversion in (-1, ord("s")):
                found.append(node.lineno)
    return found


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('f"bad: {error}. Came from x"', True),
        ('f"bad: {self.message}. Fix it"', True),
        ('f"bad: {sentence(error)} Came from x"', False),
        ('f"bad: {error!r}. Came from x"', False),  # a repr ends with a quote
        ('f"{name}.py"', False),
        ('f"{error}..."', False),
    ],
)
def test_the_scan_flags_a_stop_after_a_message(source: str, flagged: bool) -> None:
    assert bool(stop_after_message(source)) is flagged


@pytest.mark.parametrize("package", ADAPTERS)
def test_no_adapter_message_puts_a_stop_after_a_wrapped_message(package: str) -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line in stop_after_message(path.read_text())
    ]
    assert offenders == [], "a wrapped message may end with its own '.': use sentence()"
