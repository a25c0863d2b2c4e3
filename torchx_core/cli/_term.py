"""Terminal helpers for the CLI: colors (only on a TTY) and log-line prefixes."""

from __future__ import annotations

import os
from typing import TextIO

GREEN = "\033[32m"
BLUE = "\033[34m"
GRAY = "\033[2m"
RED = "\033[31m"
ENDC = "\033[0m"


def use_color(stream: TextIO) -> bool:
    """Colors only on a TTY and when ``NO_COLOR`` is unset."""
    if os.environ.get("NO_COLOR"):
        return False
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
