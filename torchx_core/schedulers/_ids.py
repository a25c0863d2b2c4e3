"""App-id helpers shared by the schedulers (kept neutral: no scheduler imports another)."""

from __future__ import annotations

import secrets

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_ALNUM = _LOWER + "0123456789"


def random_suffix(n: int = 8) -> str:
    """``n`` random lowercase alphanumerics, starting with a letter (valid in DNS labels,
    container names and AWS job names)."""
    return secrets.choice(_LOWER) + "".join(secrets.choice(_ALNUM) for _ in range(n - 1))
