"""Terminal helpers for the CLI: colors (only on a TTY), log-line prefixes, plain tables, and
neutralising the control sequences of app output before it reaches a terminal."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TextIO

from torchx_core.util.terminal import sanitize as sanitize  # the CLI's name for it, kept

GREEN = "\033[32m"
BLUE = "\033[34m"
GRAY = "\033[2m"
RED = "\033[31m"
ENDC = "\033[0m"


def use_color(stream: TextIO) -> bool:
    """Colors only on a TTY and when ``NO_COLOR`` is unset."""
    return not os.environ.get("NO_COLOR") and is_terminal(stream)


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (app output written there is sanitised)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def prefix_line(prefix: str, line: str) -> str:
    """Prefixes every visual line of ``line`` (``\\r`` progress updates and embedded ``\\n``)."""
    body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
    body = body.replace("\r", "\r" + prefix).replace("\n", "\n" + prefix)
    if not body.startswith("\r"):
        body = prefix + body
    return body + nl


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns with a dashed rule under the headers (no trailing spaces)."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in [headers, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
