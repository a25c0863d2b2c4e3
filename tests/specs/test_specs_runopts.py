"""Unit tests for runopts/runopt/CfgVal (torchx_core/specs/_runopts.py)."""

# ruff: noqa: UP006, UP035, UP045 - typing.List/Dict/Optional are part of what is tested
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Union

import pytest

from torchx_core.specs import (
    CfgVal,
    InvalidRunConfigException,
    RunOptDefinitionError,
    get_type_name,
    runopt,
    runopts,
)


def _opts() -> runopts:
    opts = runopts()
    opts.add("FOO", type_=List[str], default=["a"], help="an optional list option")
    opts.add("BAR", type_=str, required=True, help="a required str option")
    return opts


def test_cfgval_alias() -> None:
    assert CfgVal == (str | int | float | bool | list[str] | dict[str, str] | None)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", {}),
        ("UNKNOWN=VALUE", {}),
        ("FOO=v1", {"FOO": ["v1"]}),
        ("FOO=v1,v2", {"FOO": ["v1", "v2"]}),
        ("FOO=v1;v2", {"FOO": ["v1", "v2"]}),
        ("FOO=v1,v2,BAR=v3", {"FOO": ["v1", "v2"], "BAR": "v3"}),
        ("FOO=v1;v2,BAR=v3", {"FOO": ["v1", "v2"], "BAR": "v3"}),
        ("FOO=v1;v2;BAR=v3", {"FOO": ["v1", "v2"], "BAR": "v3"}),
    ],
)
def test_cfg_from_str_documented_examples(text: str, expected: dict[str, CfgVal]) -> None:
    assert _opts().cfg_from_str(text) == expected


def test_cfg_from_str_logs_unknown_with_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert _opts().cfg_from_str("FOOO=1") == {}
    assert "'FOOO'" in caplog.text and "Did you mean: 'FOO'" in caplog.text


def test_cast_to_type_rules() -> None:
    assert runopt(None, str, False, "").cast_to_type("foo") == "foo"
    assert runopt(None, bool, False, "").cast_to_type("True") is True
    assert runopt(None, bool, False, "").cast_to_type("False") is False
    assert runopt(None, int, False, "").cast_to_type("1") == 1
    assert runopt(None, float, False, "").cast_to_type("1.1") == 1.1
    for tp in (list[str], List[str]):
        opt = runopt(None, tp, False, "")
        assert opt.cast_to_type("a,b,c") == ["a", "b", "c"]
        assert opt.cast_to_type("a;b;c") == ["a", "b", "c"]
        assert opt.is_type_list_of_str
    for tp in (dict[str, str], Dict[str, str]):
        opt = runopt(None, tp, False, "")
        assert opt.cast_to_type("a:1,b:2") == {"a": "1", "b": "2"}
        assert opt.cast_to_type("a:1;b:2") == {"a": "1", "b": "2"}
        # each item splits at its first ':' so values may hold colons (image names, URLs)
        assert opt.cast_to_type("image:repo:tag,url:http://h:80") == {
            "image": "repo:tag",
            "url": "http://h:80",
        }
        assert opt.is_type_dict_of_str


@pytest.mark.parametrize(
    "tp, value, needle",
    [
        (bool, "maybe", "true/false"),
        (int, "x1", "int"),
        (float, "one", "float"),
        (dict[str, str], "a", "key:value"),
    ],
)
def test_cast_errors_name_value_and_valid_form(tp: type, value: str, needle: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        runopt(None, tp, False, "").cast_to_type(value)
    assert repr(value) in str(e.value) and needle in str(e.value)


def test_add_rejects_bad_definitions() -> None:
    opts = runopts()
    with pytest.raises(RunOptDefinitionError, match="must not specify default"):
        opts.add("x", type_=int, help="h", default=1, required=True)
    with pytest.raises(TypeError, match="must be of type: int"):
        opts.add("y", type_=int, help="h", default="1")


def test_get_accepts_camel_case() -> None:
    opts = runopts()
    opts.add("cluster_name", type_=str, help="h")
    assert opts.get("clusterName") is opts.get("cluster_name") is not None
    assert opts.get("nope") is None
    assert "clusterName" in opts and len(opts) == 1
    assert [k for k, _ in opts] == ["cluster_name"]


def test_is_type_generics() -> None:
    assert runopts.is_type(["a"], list[str]) and runopts.is_type(["a"], List[str])
    assert not runopts.is_type([1], list[str])
    assert runopts.is_type({"a": "b"}, Dict[str, str]) and not runopts.is_type(
        {"a": 1}, dict[str, str]
    )
    assert runopts.is_type(None, Optional[str]) and runopts.is_type("x", str | None)
    assert not runopts.is_type("1", int)
    # a bool is no int (nor float) run option, also inside Optional/lists
    assert not runopts.is_type(True, int) and not runopts.is_type(False, float)
    assert not runopts.is_type(True, Optional[int]) and not runopts.is_type([True], list[int])
    assert runopts.is_type(True, bool) and runopts.is_type(True, Optional[bool])


@pytest.mark.parametrize("scheduler", ["aws_batch", "kubernetes_mcad"])
def test_a_bool_is_refused_as_an_int_run_option_for_every_caller(scheduler: str) -> None:
    """resolve() (the runner, the engine adapters) and cfg_from_json_repr refuse priority=True."""
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        opts = runner.scheduler_run_opts(scheduler)
    with pytest.raises(InvalidRunConfigException, match="priority, must be of type: int"):
        opts.resolve({"priority": True, "queue": "q", "namespace": "n", "image_repo": "r"})
    assert opts.resolve({"priority": 3, "queue": "q"})["priority"] == 3


def test_resolve_fills_defaults_and_checks() -> None:
    opts = _opts()
    opts.add("priority", type_=float, default=0.5, help="p")
    assert opts.resolve({"BAR": "x"}) == {"FOO": ["a"], "BAR": "x", "priority": 0.5}
    assert opts.resolve({"BAR": "x", "priority": 2}) == {"FOO": ["a"], "BAR": "x", "priority": 2.0}
    with pytest.raises(InvalidRunConfigException) as e:
        opts.resolve({"FOO": "notalist"})
    msg = str(e.value)
    assert "Required run option: BAR" in msg and "must be of type: List[str]" in msg  # all problems
    assert e.value.cfg_key == "FOO"  # the first problem, in option order


def test_resolve_unknown_keys_warn_or_raise(caplog: pytest.LogCaptureFixture) -> None:
    opts = _opts()
    with caplog.at_level(logging.WARNING):
        assert opts.resolve({"BAR": "x", "BAZ": 1})["BAZ"] == 1
    assert "Did you mean: 'BAR'" in caplog.text
    with pytest.raises(InvalidRunConfigException, match="Did you mean: 'BAR'"):
        opts.resolve({"BAR": "x", "BAZ": 1}, strict=True)


def test_resolve_camel_case_keys() -> None:
    opts = runopts()
    opts.add("cluster_name", type_=str, help="h", required=True)
    assert opts.resolve({"clusterName": "c"}) == {"cluster_name": "c"}


def test_cfg_from_json_repr() -> None:
    opts = _opts()
    opts.add("n", type_=int, help="n")
    opts.add("d", type_=dict[str, str], help="d")
    opts.add("b", type_=bool, help="b")
    cfg = opts.cfg_from_json_repr(
        '{"FOO": ["x", 1], "BAR": "y", "n": "3", "d": {"k": 1}, "b": true, "zzz": 1}'
    )
    assert cfg == {"FOO": ["x", "1"], "BAR": "y", "n": 3, "d": {"k": "1"}, "b": True}


@pytest.mark.parametrize(
    "text, needle",
    [("{nope", "not valid JSON"), ("[1]", "object"), ('{"n": [1]}', "must be of type: int")],
)
def test_cfg_from_json_repr_errors(text: str, needle: str) -> None:
    opts = runopts()
    opts.add("n", type_=int, help="n")
    with pytest.raises(InvalidRunConfigException, match=needle):
        opts.cfg_from_json_repr(text)


@pytest.mark.parametrize("text", ["FOO", "A=B=C", "=x", "BAR=1,BAR=2"])
def test_cfg_from_str_malformed(text: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        _opts().cfg_from_str(text)
    assert repr(text) in str(e.value)


def test_help_text_lists_options() -> None:
    text = str(_opts())
    assert "required arguments:" in text and "BAR=BAR (str)" in text
    assert "optional arguments:" in text and "FOO=FOO (List[str], ['a'])" in text


def test_get_type_name_is_torchx() -> None:
    # TorchX: a class's __name__, else str(tp) (typing's own spelling)
    assert get_type_name(int) == "int"
    assert get_type_name(list[str]) == "list"
    assert get_type_name(List[str]) == "typing.List[str]"
    assert get_type_name(Union[str, int])  # noqa: UP007 - typing.Union is what is named == "typing.Union[str, int]"


def test_messages_name_types_without_typing_prefix() -> None:
    opts = runopts()
    opts.add("u", type_=List[str], help="u")
    with pytest.raises(InvalidRunConfigException, match=r"List\[str\]") as e:
        opts.resolve({"u": 1})
    assert "typing." not in str(e.value)


def test_update_and_getitem() -> None:
    a, b = runopts(), runopts()
    a.add("x", type_=int, help="x")
    b.add("y", type_=str, help="y")
    a.update(b)
    assert a["y"].opt_type is str
    with pytest.raises(InvalidRunConfigException, match="Did you mean: 'y'"):
        a["yy"]
