"""Run option errors say exactly what was given, what is valid and how to fix it, and name the key.

The messages are part of the user interface (``torchx run -cfg ...`` prints them), so they are
compared whole, together with the ``cfg_key`` the exception carries.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, Dict, Literal, Optional  # noqa: UP035

import pytest

from torchx_core.specs import InvalidRunConfigException, runopt, runopts


class Color(Enum):
    RED = "r"
    BLUE = "b"


@pytest.fixture
def opts() -> runopts:
    o = runopts()
    o.add("n", type_=int, help="an int")
    o.add("f", type_=float, help="a float")
    o.add("b", type_=bool, help="a bool")
    o.add("d", type_=dict[str, str], help="a dict")
    o.add("lit", type_=Literal["a", "b"], help="a choice")
    o.add("col", type_=Color, help="an enum")
    o.add("opt", type_=Optional[int], help="an optional int")  # noqa: UP045  (the typing spelling)
    o.add("l", type_=list[str], help="a list")
    return o


CAST_ERRORS = [
    (
        "n=x",
        "n",
        (
            "run option 'n': cannot cast 'x' to int; expected a valid int literal"
            " (invalid literal for int() with base 10: 'x')"
        ),
    ),
    (
        "f=1.x",
        "f",
        (
            "run option 'f': cannot cast '1.x' to float; expected a valid float literal"
            " (could not convert string to float: '1.x')"
        ),
    ),
    (
        "b=maybe",
        "b",
        ("run option 'b': 'maybe' is not a bool; use one of true/false (also 1/0, yes/no, on/off)"),
    ),
    (
        "d=novalue",
        "d",
        (
            "run option 'd': 'novalue' in 'novalue' is not a 'key:value' pair;"
            " write dict options as 'k1:v1,k2:v2' (or 'k1:v1;k2:v2')"
        ),
    ),
    (
        "d=:v",
        "d",
        (
            "run option 'd': ':v' in ':v' is not a 'key:value' pair;"
            " write dict options as 'k1:v1,k2:v2' (or 'k1:v1;k2:v2')"
        ),
    ),
    ("lit=c", "lit", "run option 'lit': 'c' is not one of the valid choices: 'a', 'b'"),
    (
        "col=GREEN",
        "col",
        "run option 'col': 'GREEN' is not one of the valid choices: 'RED', 'BLUE'",
    ),
    (
        "opt=q",
        "opt",
        (
            "run option 'opt': cannot cast 'q' to int; expected a valid int literal"
            " (invalid literal for int() with base 10: 'q')"
        ),
    ),
]


@pytest.mark.parametrize(("text", "key", "message"), CAST_ERRORS)
def test_cfg_from_str_cast_errors(opts: runopts, text: str, key: str, message: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_str(text)
    assert str(e.value) == f"run config {text!r}: {message}"
    assert e.value.cfg_key == key


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("n", "", "run config 'n' has no 'key=value' pair; write 'key1=v1,key2=v2'"),
        (
            "=x",
            "",
            (
                "run config '=x': '' is not a valid option name (letters, digits, '_', '.', '-');"
                " write 'key1=v1,key2=v2'"
            ),
        ),
        (
            "a b=1",
            "a b",
            (
                "run config 'a b=1': 'a b' is not a valid option name (letters, digits, '_',"
                " '.', '-'); write 'key1=v1,key2=v2'"
            ),
        ),
        ("n=1,n=2", "n", "run config 'n=1,n=2': option 'n' is given twice; use each option once"),
    ],
)
def test_cfg_from_str_syntax_errors(opts: runopts, text: str, key: str, message: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_str(text)
    assert (str(e.value), e.value.cfg_key) == (message, key)


def test_cfg_from_str_casts_every_kind(opts: runopts) -> None:
    assert opts.cfg_from_str("col=RED,lit=b,opt=3,b=yes") == {
        "col": Color.RED,
        "lit": "b",
        "opt": 3,
        "b": True,
    }
    # enum members by value too; bools case-insensitive; numbers tolerate spaces
    assert opts.cfg_from_str("col=b;b=OFF;n= 4 ;f=2e3") == {
        "col": Color.BLUE,
        "b": False,
        "n": 4,
        "f": 2000.0,
    }
    assert opts.cfg_from_str("l=a,,b;;c,n=1") == {"l": ["a", "b", "c"], "n": 1}


def test_cfg_from_str_warns_about_unknown_keys_with_the_valid_ones(
    opts: runopts, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert opts.cfg_from_str("zz=1,n=2") == {"n": 2}
    assert (
        "unknown run option 'zz'. Valid options: n, f, b, d, lit, col, opt, l; ignoring it"
        in caplog.text
    )


def test_cast_to_type_needs_a_string() -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        runopt(None, int, False, "").cast_to_type(7)  # type: ignore[arg-type]
    assert (str(e.value), e.value.cfg_key) == ("expected a string to cast to int, got 7", "")
    assert runopt(None, int, False, "").cast_to_type(" 7 ") == 7


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"n": "x"}, "Run option: n, must be of type: int, but was: 'x' (str)"),
        ({"n": 1.5}, "Run option: n, must be of type: int, but was: 1.5 (float)"),
        ({"b": 1}, "Run option: b, must be of type: bool, but was: 1 (int)"),
        (
            {"d": {"a": 1}},
            "Run option: d, must be of type: dict[str, str], but was: {'a': 1} (dict)",
        ),
        ({"d": "a:1"}, "Run option: d, must be of type: dict[str, str], but was: 'a:1' (str)"),
        ({"l": "a,b"}, "Run option: l, must be of type: list[str], but was: 'a,b' (str)"),
        ({"l": ["a", 1]}, "Run option: l, must be of type: list[str], but was: ['a', 1] (list)"),
    ],
)
def test_resolve_type_errors(opts: runopts, cfg: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.resolve(cfg)  # type: ignore[arg-type]
    assert str(e.value) == f"{message}. Given: {cfg}"
    assert e.value.cfg_key == next(iter(cfg))


def test_resolve_fills_every_default_and_widens_int_to_float(opts: runopts) -> None:
    assert opts.resolve({"f": 2, "opt": None}) == {
        "n": None,
        "f": 2.0,
        "b": None,
        "d": None,
        "lit": None,
        "col": None,
        "opt": None,
        "l": None,
    }
    assert isinstance(opts.resolve({"f": 2})["f"], float)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"n": "3"}', {"n": 3}),
        ('{"d": {"a": "1"}}', {"d": {"a": "1"}}),
        ('{"b": "true"}', {"b": True}),
        ('{"f": 2}', {"f": 2.0}),
        ('{"l": ["a"]}', {"l": ["a"]}),
        ('{"l": "a,b"}', {"l": ["a", "b"]}),
        ('{"zz": 1}', {}),
    ],
)
def test_cfg_from_json_repr_casts(opts: runopts, text: str, expected: dict[str, object]) -> None:
    assert opts.cfg_from_json_repr(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", 'run config JSON \'[1]\' must be an object like {"key": "value"}, got a list'),
        (
            '{"n": 3.0}',
            (
                "run config JSON '{\"n\": 3.0}': Run option: n, must be of type: int, but was:"
                " 3.0 (float)"
            ),
        ),
        (
            "not json",
            (
                "run config 'not json' is not valid JSON (Expecting value: line 1 column 1"
                ' (char 0)); expected an object like {"key": "value"}'
            ),
        ),
    ],
)
def test_cfg_from_json_repr_errors(opts: runopts, text: str, message: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_json_repr(text)
    assert str(e.value) == message


def test_resolve_reports_every_problem_at_once(opts: runopts) -> None:
    strict = runopts()
    strict.add("cluster", type_=str, help="where to run", required=True)
    strict.add("n", type_=int, help="an int")
    with pytest.raises(InvalidRunConfigException) as e:
        strict.resolve({"n": "x", "nn": 1}, strict=True)
    cfg = {"n": "x", "nn": 1}
    assert str(e.value) == (
        "Required run option: cluster, must be provided and not `None` (str: where to run);"
        " Run option: n, must be of type: int, but was: 'x' (str);"
        " unknown run option 'nn'. Did you mean: 'n'? Valid options: cluster, n"
        f". Given: {cfg}"
    )
    assert e.value.cfg_key == "cluster"
    with pytest.raises(InvalidRunConfigException) as e:
        strict.resolve(["cluster"])  # type: ignore[arg-type]
    assert (str(e.value), e.value.cfg_key) == (
        "a run config must be a mapping of option name to value, got ['cluster']",
        "",
    )


def test_resolve_keeps_unknown_keys_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    o = runopts()
    o.add("cluster_name", type_=str, help="c")
    with caplog.at_level(logging.WARNING):
        assert o.resolve({"clusterNam": "x", 3: "y"}) == {
            "cluster_name": None,
            "clusterNam": "x",
            3: "y",
        }  # type: ignore[dict-item]
    assert caplog.messages == [
        (
            "unknown run option 'clusterNam'. Did you mean: 'cluster_name'?"
            " Valid options: cluster_name;"
            " passing it through unchecked"
        ),
        "unknown run option '3'. Valid options: cluster_name; passing it through unchecked",
    ]


def test_camel_case_keys_resolve_and_the_snake_spelling_wins(opts: runopts) -> None:
    o = runopts()
    o.add("cluster_name_long", type_=str, help="c")
    assert o.get("clusterNameLong") is o.get("cluster_name_long") is not None
    assert o.get(3) is None  # type: ignore[arg-type]
    assert o.resolve({"clusterNameLong": "camel"}) == {"cluster_name_long": "camel"}
    both = {"cluster_name_long": "snake", "clusterNameLong": "camel"}
    assert o.resolve(both) == {"cluster_name_long": "snake"}
    assert o.resolve(dict(reversed(both.items()))) == {"cluster_name_long": "snake"}


@pytest.mark.parametrize(
    ("obj", "tp", "expected"),
    [
        ("a", str, True),
        (1, str, False),
        (True, bool, True),
        (1, bool, False),
        (1.0, float, True),
        (None, Optional[int], True),  # noqa: UP045 - the typing spelling is under test
        (3, Optional[int], True),  # noqa: UP045 - the typing spelling is under test
        ("3", Optional[int], False),  # noqa: UP045 - the typing spelling is under test
        (["a"], list[str], True),
        (["a", 1], list[str], False),
        ("a", list[str], False),
        ([], list[str], True),
        ([1], list, True),
        ({"a": "1"}, dict[str, str], True),
        ({1: "1"}, dict[str, str], False),
        ({"a": 1}, dict[str, str], False),
        ({1: 2}, dict, True),
        (["a"], dict[str, str], False),
        ("a", Literal["a", "b"], True),
        ("c", Literal["a", "b"], False),
        (Color.RED, Color, True),
        ("RED", Color, False),
    ],
)
def test_is_type(obj: object, tp: object, expected: bool) -> None:
    assert runopts.is_type(obj, tp) is expected  # type: ignore[arg-type]


def test_optional_types_cast_like_their_inner_type() -> None:
    assert runopt(None, Optional[list[str]], False, "").cast_to_type("a;b") == ["a", "b"]  # noqa: UP045
    assert runopt(None, Optional[bool], False, "").cast_to_type("no") is False  # noqa: UP045
    assert runopt(None, int | None, False, "").cast_to_type("5") == 5
    # a union of two real types is not unwrapped: it is cast as a whole and fails clearly
    with pytest.raises(InvalidRunConfigException, match=r"cannot cast 'x' to int \| str"):
        runopt(None, int | str, False, "").cast_to_type("x")  # type: ignore[arg-type]


def test_add_refuses_a_default_of_the_wrong_type() -> None:
    from torchx_core.specs import RunOptDefinitionError

    with pytest.raises(RunOptDefinitionError) as e:
        runopts().add("n", type_=int, help="n", default="1")
    assert str(e.value).endswith(" Given: '1' (str)")
    with pytest.raises(RunOptDefinitionError, match=r"Given: \['a'\] \(list\)"):
        runopts().add("d", type_=dict[str, str], help="d", default=["a"])


@pytest.mark.parametrize("dict_type", [dict[str, str], Dict[str, str]])  # noqa: UP006
def test_an_empty_list_default_of_a_dict_option_is_an_empty_dict(dict_type: Any) -> None:
    """TorchX's definitions write ``default=[]`` for a dict option; kept as ``{}`` so a cfg that
    omits the option still gets a dict."""
    opts = runopts()
    opts.add("E", type_=dict_type, help="a dict opt", default=[])
    assert opts.get("E").default == {}  # type: ignore[union-attr]
    assert opts.resolve({}) == {"E": {}}
    assert opts.cfg_from_str("E=f:b,F:B") == {"E": {"f": "b", "F": "B"}}


@pytest.mark.parametrize("bad", [3, None])
def test_cfg_from_str_needs_a_string(opts: runopts, bad: object) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_str(bad)  # type: ignore[arg-type]
    assert (str(e.value), e.value.cfg_key) == (
        f"cfg_str must be a string like 'key1=v1,key2=v2', got {bad!r}",
        "",
    )


def test_cfg_from_json_repr_errors_name_the_key(
    opts: runopts, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_json_repr("3")
    assert (str(e.value), e.value.cfg_key) == (
        'run config JSON \'3\' must be an object like {"key": "value"}, got a int',
        "",
    )
    with pytest.raises(InvalidRunConfigException) as e:
        opts.cfg_from_json_repr('{"n": "x"}')
    assert e.value.cfg_key == "n"
    assert str(e.value) == (
        "run config JSON '{\"n\": \"x\"}': run option 'n': cannot cast 'x' to int; expected a valid"
        " int literal (invalid literal for int() with base 10: 'x')"
    )
    with caplog.at_level(logging.WARNING):
        opts.cfg_from_json_repr('{"nn": 1}')
        opts.cfg_from_str("nn=1")
    assert (
        caplog.messages
        == [
            (
                "unknown run option 'nn'. Did you mean: 'n'?"
                " Valid options: n, f, b, d, lit, col, opt, l;"
                " ignoring it"
            )
        ]
        * 2
    )
