"""Parsing component argument values from their CLI strings (``torchx.util.types``).

``to_list("a,b")`` and ``to_dict("k1=v1,k2=v2")`` split the CLI forms; :func:`decode` turns a
CLI string into the annotated type (``list[X]``, ``dict[K, V]``, ``bool``); the ``is_*`` helpers
classify annotations.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "decode",
    "decode_from_string",
    "decode_optional",
    "get_argparse_param_type",
    "is_bool",
    "is_primitive",
    "none_throws",
    "to_dict",
    "to_list",
]

_T = TypeVar("_T")
_PRIMITIVES = (int, str, float)


def to_list(arg: str) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]`` (blank -> ``[]``).

    >>> to_list("a, b,c")
    ['a', 'b', 'c']
    """
    if not arg.strip():
        return []
    return [item.strip() for item in arg.split(",")]


def to_dict(arg: str) -> dict[str, str]:
    """``"K1=v1,K2=v2"`` -> ``{"K1": "v1", "K2": "v2"}``.

    Pairs are separated by ``,`` or ``;``; a value may itself hold a list (the last delimiter
    before the next ``KEY=`` ends it), and ``''``/``""`` stand for an empty value.

    A value in quotes (``FOO="a = b, c"``) is taken whole, delimiters and ``=`` included.

    >>> to_dict("FOO=v1,v2,BAR=v3")
    {'FOO': 'v1,v2', 'BAR': 'v3'}
    >>> to_dict("FOO=''")
    {'FOO': ''}
    >>> to_dict('FOO="x=1, y=2",BAR=v')
    {'FOO': 'x=1, y=2', 'BAR': 'v'}

    Raises:
        ValueError: ``arg`` holds no ``key=value`` pair, or a value/key boundary is missing
    """
    if not arg or not arg.strip():
        return {}
    import re

    quoted: list[str] = []

    def hide(m: re.Match[str]) -> str:
        quoted.append(m.group(2))
        return f"={_HIDDEN}{len(quoted) - 1}{_HIDDEN}"

    hidden = re.sub(r"""=\s*(["'])(.*?)\1""", hide, arg)
    out = _split_pairs(arg, hidden)
    if not quoted:
        return out
    whole = re.compile(rf"{_HIDDEN}(\d+){_HIDDEN}")
    return {
        k: whole.sub(lambda m: quoted[int(m.group(1))], v) if _HIDDEN in v else v
        for k, v in out.items()
    }


# stands in for a quoted value while pairs are split (no delimiter, quote or `=` in it)
_HIDDEN = "\x00"


def _split_pairs(arg: str, hidden: str) -> dict[str, str]:
    """Splits ``hidden`` (``arg`` with its quoted values hidden) into its pairs."""
    parts = [p.strip() for p in hidden.split("=")]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        raise ValueError(f"{arg!r} is not of the form 'k1=v1,k2=v2' (no key=value pair)")
    out: dict[str, str] = {}
    key = parts[0]
    for middle in parts[1:-1]:
        cut = max(middle.rfind(","), middle.rfind(";"))
        if cut <= 0 or cut == len(middle) - 1:
            raise ValueError(
                f"{arg!r}: cannot tell where the value of {key!r} ends in {middle!r};"
                " separate pairs with ',' or ';'"
            )
        out[key] = _unquote(middle[:cut].strip())
        key = middle[cut + 1 :].strip()
    out[key] = _unquote(parts[-1])
    return out


def _unquote(value: str) -> str:
    return "" if value in ("''", '""') else value


def is_bool(param_type: Any) -> bool:
    """Whether the annotation is ``bool``."""
    return param_type is bool


def is_primitive(param_type: Any) -> bool:
    """Whether the annotation is ``int``, ``str`` or ``float``."""
    return param_type in _PRIMITIVES


def decode_optional(param_type: Any) -> Any:
    """``Optional[X]`` (or ``X | None``) -> ``X``; anything else unchanged.

    >>> decode_optional(typing.Optional[int])
    <class 'int'>
    """
    args = typing.get_args(param_type)
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return param_type


def decode_from_string(encoded_value: str, annotation: Any) -> dict[Any, Any] | list[Any] | None:
    """Decodes ``"a,b"`` into ``list[X]`` or ``"k=v,..."`` into ``dict[K, V]`` per ``annotation``.

    >>> decode_from_string("1,2", list[int])
    [1, 2]

    Returns:
        None for an empty string.

    Raises:
        ValueError: ``annotation`` is neither a list nor a dict of primitives
    """
    if not encoded_value:
        return None
    origin = typing.get_origin(annotation)
    if origin is dict:
        key_type, value_type = typing.get_args(annotation) or (str, str)
        return {key_type(k): value_type(v) for k, v in to_dict(encoded_value).items()}
    if origin is list:
        (value_type,) = typing.get_args(annotation) or (str,)
        if not is_primitive(value_type):
            raise ValueError(f"list types support only int, str and float, got {annotation}")
        return [value_type(v) for v in to_list(encoded_value)]
    raise ValueError(f"cannot decode {encoded_value!r} as {annotation}: use list[X] or dict[K, V]")


def _unannotated(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``; anything else unchanged."""
    if typing.get_origin(annotation) is typing.Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def decode(encoded_value: Any, annotation: Any) -> Any:
    """Decodes a CLI value for ``annotation`` (bools from ``"true"``, lists, dicts); other
    values are returned as they are. ``Annotated[X, ...]`` decodes as ``X``."""
    annotation = _unannotated(annotation)
    if encoded_value is None:
        return None
    if is_bool(annotation):
        return bool(encoded_value) and str(encoded_value).lower() == "true"
    if not is_primitive(annotation) and isinstance(encoded_value, str):
        return decode_from_string(encoded_value, annotation)
    return encoded_value


def get_argparse_param_type(parameter: inspect.Parameter) -> Callable[[str], object]:
    """The argparse ``type=`` of a component parameter: the primitive itself, else ``str``.

    String annotations (``from __future__ import annotations``) of primitives count too, and
    ``Annotated[X, ...]`` counts as ``X``.
    """
    ann = _unannotated(parameter.annotation)
    if isinstance(ann, str):
        ann = {t.__name__: t for t in _PRIMITIVES}.get(ann, ann)
    return ann if is_primitive(ann) else str


def none_throws(optional: _T | None, message: str = "Unexpected `None`") -> _T:
    """Returns ``optional`` or raises ``AssertionError(message)`` when it is None."""
    if optional is None:
        raise AssertionError(message)
    return optional
