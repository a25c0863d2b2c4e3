"""The one app-id builder of the schedulers (kept neutral: no scheduler imports another).

Private; TorchX's public id helpers are :mod:`torchx_core.schedulers.ids`.

Every backend names a new app ``<app name, cleaned>`` + separator + a random suffix; only the
rules differ (which characters the backend accepts, case, length). Each backend states its rules
as an :class:`IdRules` next to its other constants and calls :func:`unique_id`.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_ALNUM = _LOWER + "0123456789"


class IdRules(NamedTuple):
    """What a backend accepts in an app id (immutable; ``rules._replace(suffix_len=12)``).

    A named tuple, not a frozen dataclass: every backend builds its rules at import, and a
    frozen dataclass costs ~1 ms of CLI start-up to create.

    Args:
        allowed: the characters the name part may keep, as the inside of a regex character class
            (``"A-Za-z0-9_-"``); every run of other characters becomes ``sep``
        max_name_len: the longest name part kept (the id is at most this + 1 + ``suffix_len``)
        lower: lower-case the name first (DNS labels, container names)
        sep: between the name and the suffix, and the replacement of invalid characters
        suffix_len: random characters (lowercase alphanumerics, starting with a letter)
        fallback: the name part when nothing of the name is left
    """

    allowed: str
    max_name_len: int
    lower: bool = False
    sep: str = "-"
    suffix_len: int = 8
    fallback: str = "app"

    def clean(self, name: str) -> str:
        """The name part: invalid runs replaced, cut to length, no separator at either end."""
        text = name.lower() if self.lower else name
        edges = "".join({self.sep, "-", "_", "."} & set(self.allowed + self.sep))
        cleaned = re.sub(f"[^{self.allowed}]+", self.sep, text).strip(edges)
        return cleaned[: self.max_name_len].strip(edges) or self.fallback


def random_suffix(n: int = 8) -> str:
    """``n`` random lowercase alphanumerics, starting with a letter (valid in DNS labels,
    container names, directory names and AWS job names)."""
    # os.urandom, not `secrets`: importing secrets (hashlib, hmac, random) costs ~5 ms of CLI
    # startup; 16 random bits per character leave a negligible modulo bias
    rnd = int.from_bytes(os.urandom(2 * n + 2), "big")
    chars = [_LOWER[rnd % len(_LOWER)]]
    rnd //= len(_LOWER)
    for _ in range(n - 1):
        chars.append(_ALNUM[rnd % len(_ALNUM)])
        rnd //= len(_ALNUM)
    return "".join(chars)


def unique_id(name: str, rules: IdRules) -> str:
    """A new app id: ``rules.clean(name)`` + ``rules.sep`` + a random suffix.

    >>> rules = IdRules(allowed="a-z0-9-", max_name_len=10, lower=True)
    >>> unique_id("My App/Train", rules).startswith("my-app-tra-")
    True
    """
    return f"{rules.clean(name)}{rules.sep}{random_suffix(rules.suffix_len)}"
