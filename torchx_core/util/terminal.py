"""Neutralising the control sequences of app output before a terminal (or a page that shows
it as ``torchx log`` does) gets it: ``torchx log``, ``torchx run`` and the dashboard use it."""

from __future__ import annotations

import re

__all__ = ["sanitize"]

# colours and text styles (SGR: ESC [ params m) are kept; every other control is neutralised.
# Compiled on first use: every CLI command imports this module, few print app output.
_PATTERNS: tuple[re.Pattern[str], re.Pattern[str]] | None = None


def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    global _PATTERNS
    if _PATTERNS is None:
        _PATTERNS = (
            re.compile(r"\x1b\[[0-9;:]{0,64}m"),
            re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"),
        )
    return _PATTERNS


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
    sgr_re, control = _PATTERNS or _patterns()
    if not control.search(text):
        return text
    parts = sgr_re.split(text)
    if len(parts) == 1:
        return control.sub(_escaped, text)
    out = [control.sub(_escaped, parts[0])]
    for sgr, part in zip(sgr_re.findall(text), parts[1:], strict=True):
        out += [sgr, control.sub(_escaped, part)]
    return "".join(out)
