"""torchx_core.util.types: TorchX's CLI value parsing helpers."""

from __future__ import annotations

import inspect
import typing

import pytest

from torchx_core.util import types


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", {}),
        ("FOO=v1", {"FOO": "v1"}),
        ("FOO=''", {"FOO": ""}),
        ('FOO=""', {"FOO": ""}),
        ("FOO=v1,v2", {"FOO": "v1,v2"}),
        ("FOO=v1,v2,BAR=v3", {"FOO": "v1,v2", "BAR": "v3"}),
        ("FOO=v1;v2;BAR=v3", {"FOO": "v1;v2", "BAR": "v3"}),
        # TorchX: a quoted value is taken whole, delimiters and `=` included
        ('FOO="value with = and , and ;"', {"FOO": "value with = and , and ;"}),
        ("A='x=1, y;2',B=v", {"A": "x=1, y;2", "B": "v"}),
        ('A=1,B="",C=3', {"A": "1", "B": "", "C": "3"}),
    ],
)
def test_to_dict_as_torchx(text: str, expected: dict[str, str]) -> None:
    assert types.to_dict(text) == expected


@pytest.mark.parametrize("bad", ["novalue", "A=1,=2", "A=1=2"])
def test_to_dict_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        types.to_dict(bad)


def test_lists_decode_and_classifiers() -> None:
    assert types.to_list(" ") == [] and types.to_list("a, b") == ["a", "b"]
    assert types.decode("1,2", list[int]) == [1, 2]
    assert types.decode("a=1", dict[str, int]) == {"a": 1}
    assert types.decode("True", bool) is True and types.decode("no", bool) is False
    assert types.decode(None, int) is None and types.decode("5", int) == "5"
    assert types.decode_from_string("", list[str]) is None
    with pytest.raises(ValueError, match="support only int, str and float"):
        types.decode_from_string("a", list[list[str]])
    assert types.decode_optional(typing.Optional[int]) is int  # noqa: UP045 - the typing form
    assert types.decode_optional(int | None) is int and types.decode_optional(str) is str
    assert types.is_bool(bool) and not types.is_bool(int)
    assert types.is_primitive(float) and not types.is_primitive(bool)


def test_argparse_type_and_none_throws() -> None:
    def f(a: int, b: list[str]) -> None: ...

    params = inspect.signature(f).parameters
    assert types.get_argparse_param_type(params["a"]) is int
    assert types.get_argparse_param_type(params["b"]) is str
    assert types.none_throws(0) == 0
    with pytest.raises(AssertionError, match="boom"):
        types.none_throws(None, "boom")


def test_annotated_decodes_as_its_type() -> None:
    """TorchX: ``Annotated[X, ...]`` component parameters decode and parse as ``X``."""

    def param(annotation: object) -> inspect.Parameter:
        return inspect.Parameter("p", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)

    assert types.get_argparse_param_type(param(typing.Annotated[str, "-s"])) is str
    assert types.get_argparse_param_type(param(typing.Annotated[int, "-n"])) is int
    assert types.get_argparse_param_type(param(typing.Annotated[list[str], "-l"])) is str
    assert types.decode("test", typing.Annotated[str, "-s"]) == "test"
    assert types.decode("true", typing.Annotated[bool, "-b"]) is True
    assert types.decode("a,b", typing.Annotated[list[str], "-l"]) == ["a", "b"]
