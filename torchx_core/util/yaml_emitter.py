"""A small, fast YAML emitter for plain data (dicts, lists, str, int, float, bool, None).

Dry runs print large requests (thousands of pods); PyYAML's representer costs seconds there.
This emitter writes block-style YAML that any YAML 1.1/1.2 loader reads back to the same data:
strings that could be read as anything else (numbers, booleans, null, anything with special
characters) are written as JSON strings, which are valid YAML double-quoted scalars.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["dump_yaml"]

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@%+=-]*\Z")
# characters YAML does not allow raw in a document (JSON leaves them unescaped)
_NON_PRINTABLE = re.compile("[\x7f-\x9f\ud800-\udfff\ufeff\ufffe\uffff]")
_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", "none"})


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"  # YAML's spelling: `inf`/`nan` would read back as strings
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text:  # YAML 1.1 floats need a dot: 1e-05 -> 1.0e-05
            mantissa, _, exp = text.partition("e")
            text = f"{mantissa}.0e{exp}"
        return text
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED:
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return _NON_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _emit(obj: Any, pad: str, out: list[str]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            k = _scalar(key)
            if isinstance(value, (dict, list)) and value:
                out.append(f"{pad}{k}:")
                _emit(value, pad + "  ", out)
            elif isinstance(value, dict):
                out.append(f"{pad}{k}: {{}}")
            elif isinstance(value, list):
                out.append(f"{pad}{k}: []")
            else:
                out.append(f"{pad}{k}: {_scalar(value)}")
    else:
        for item in obj:
            if isinstance(item, (dict, list)) and item:
                start = len(out)
                _emit(item, pad + "  ", out)
                # put the first line of the item on the dash line
                out[start] = f"{pad}- {out[start][len(pad) + 2 :]}"
            elif isinstance(item, dict):
                out.append(f"{pad}- {{}}")
            elif isinstance(item, list):
                out.append(f"{pad}- []")
            else:
                out.append(f"{pad}- {_scalar(item)}")


def dump_yaml(obj: Any) -> str:
    """Returns ``obj`` (a dict or list of plain data) as block-style YAML text."""
    if not isinstance(obj, (dict, list)):
        return _scalar(obj) + "\n"
    if not obj:
        return ("{}" if isinstance(obj, dict) else "[]") + "\n"
    out: list[str] = []
    _emit(obj, "", out)
    return "\n".join(out) + "\n"
