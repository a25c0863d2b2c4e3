"""Terminal helpers for the CLI: colors (only on a TTY), log-line prefixes, plain tables, and
neutralising the control sequences of app output before it reaches a terminal."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TextIO

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


# colours and text styles (SGR: ESC [ params m) are kept; every other control is neutralised
_SGR = re.compile(r"\x1b\[[0-9;:]{0,64}m")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _escaped(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def sanitize(text: str) -> str:
    """Neutralises terminal control sequences in app output: they are shown, not obeyed.

    Kept: tab, newline, carriage return (progress bars; every ``\\r`` segment gets the line
    prefix) and colour/style sequences (SGR, ``ESC [ ... m``), which cannot move the cursor or
    talk to the terminal. Every other control character (ESC starting cursor moves, screen
    clears, window titles, OSC 52 clipboard writes, device queries; BEL, backspace, C1 controls)
    is written as its ``\\xNN`` escape, so the rest of the sequence prints as plain text.

    >>> sanitize("\\x1b[31mred\\x1b[0m \\x1b]52;c;aGk=\\x07 \\x1b[2J")
    '\\x1b[31mred\\x1b[0m \\\\x1b]52;c;aGk=\\\\x07 \\\\x1b[2J'
    """
    if not _CONTROL.search(text):
        return text
    parts = _SGR.split(text)
    if len(parts) == 1:
        return _CONTROL.sub(_escaped, text)
    out = [_CONTROL.sub(_escaped, parts[0])]
    for sgr, part in zip(_SGR.findall(text), parts[1:], strict=True):
        out += [sgr, _CONTROL.sub(_escaped, part)]
    return "".join(out)


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
