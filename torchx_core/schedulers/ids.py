"""TorchX's public ``torchx.schedulers.ids``: random ids for app names.

Kept for code that calls TorchX's helpers. The schedulers of this package do not use it: they
name apps with :func:`torchx_core.schedulers._app_ids.unique_id` (per-backend rules).
"""

from __future__ import annotations

import os
import secrets

__all__ = ["make_unique", "random_id", "random_uint64"]

_START = "bcdfghjklmnpqrstvwxz"  # consonants: an id starting with one is a valid DNS label
_REST = _START + "012345679"


def make_unique(name: str, string_length: int = 0) -> str:
    """``name`` plus ``-`` and a random id (of ``string_length`` characters if given).

    >>> make_unique("train", 6).startswith("train-")
    True
    """
    return f"{name}-{random_id() if string_length == 0 else _random_chars(string_length)}"


def random_uint64() -> int:
    """A random unsigned 64-bit int."""
    return int.from_bytes(os.urandom(8), "big")


def random_id(max_length: int | None = None) -> str:
    """A random id valid as a Kubernetes object name (lowercase, starts with a letter).

    Args:
        max_length: cut the id to at most this many characters
    """
    out = ""
    v = random_uint64()
    while v > 0:
        chars = _REST if out else _START
        out += chars[v % len(chars)]
        v //= len(chars)
    out = out or _START[0]
    return out[:max_length] if max_length is not None else out


def _random_chars(n: int) -> str:
    return "".join(secrets.choice(_REST if i else _START) for i in range(n))
