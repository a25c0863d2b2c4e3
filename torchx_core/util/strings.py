"""String normalization for names with restricted alphabets (``torchx.util.strings``)."""

from __future__ import annotations

import re

__all__ = ["normalize_str"]

_DROPPED = re.compile(r"[^a-z0-9\-]")


def normalize_str(data: str) -> str:
    """``data`` lower-cased, with every character outside ``[a-z0-9-]`` dropped and the leading
    ``-`` stripped (e.g. for Kubernetes object names).

    >>> normalize_str("-/_My/Job!1")
    'myjob1'
    """
    return _DROPPED.sub("", data.lower()).lstrip("-")
