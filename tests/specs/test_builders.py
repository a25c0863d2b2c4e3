"""Unit tests for torchx_core.specs.builders."""

from __future__ import annotations

import re

import pytest
from components_fixture import echo, not_an_app, required, with_h  # type: ignore[import-not-found]

from torchx_core.specs import AppDef, ComponentArgumentError, ComponentValidationException, Role
from torchx_core.specs.builders import component_help, materialize_appdef, parse_args


def _args(app: AppDef) -> list[str]:
    return app.roles[0].args


def test_defaults() -> None:
    assert _args(materialize_appdef(echo, [])) == ["hello", "1", "0.5", "False", "1x2"]


def test_all_types_from_argv() -> None:
    app = materialize_appdef(
        echo,
        [
            "--msg",
            "hi",
            "-n",
            "3",
            "--ratio",
            "2.5",
            "--debug",
            "--tags",
            "a,b",
            "--env",
            "A=1,B=x,y",
            "--ports",
            "tb=6006",
            "-j",
            "2x4",
        ],
    )
    assert _args(app) == ["hi", "3", "2.5", "True", "2x4", "a", "b"]
    assert app.roles[0].env == {"A": "1", "B": "x,y"}
    assert app.roles[0].port_map == {"tb": 6006}


def test_bool_values_and_dash_alias() -> None:
    assert _args(materialize_appdef(echo, ["--debug", "false"]))[3] == "False"
    ns = parse_args(echo, ["--debug", "yes", "--msg", "m"])
    assert ns.debug is True and ns.msg == "m"


def test_varargs_and_required() -> None:
    app = materialize_appdef(required, ["--script", "train.py", "--", "--lr", "0.1"])
    assert app.roles[0].entrypoint == "train.py" and app.roles[0].args == ["--lr", "0.1"]
    app2 = materialize_appdef(required, ["--script", "t.py", "a", "b"])
    assert app2.roles[0].args == ["a", "b"]


def test_cmpnt_defaults_and_config() -> None:
    app = materialize_appdef(echo, ["--msg", "cli"], cmpnt_defaults={"n": "7", "msg": "default"})
    assert _args(app)[:2] == ["cli", "7"]
    app2 = materialize_appdef(required, [], cmpnt_defaults={"script": "s.py"})
    assert app2.roles[0].entrypoint == "s.py"
    app3 = materialize_appdef(echo, [], config={"n": 9})
    assert _args(app3)[1] == "9"


def test_dict_args() -> None:
    app = materialize_appdef(echo, {"msg": "x", "n": "4", "tags": ["t"], "env": {"K": "V"}})
    assert _args(app) == ["x", "4", "0.5", "False", "1x2", "t"]
    app2 = materialize_appdef(required, {"script": "s", "script_args": ["--a", "1"]})
    assert app2.roles[0].args == ["--a", "1"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["-n", "x"], "'x' is not a valid int"),
        (["--nope", "1"], "--nope"),
        (["--debug", "maybe"], "'maybe' is not a bool"),
        (["--env", "novalue"], "'novalue'"),
        (["--ratio", "1/2"], "'1/2' is not a valid float"),
    ],
)
def test_bad_argv_raises_typed_error(argv: list[str], needle: str) -> None:
    with pytest.raises(ComponentArgumentError) as e:
        materialize_appdef(echo, argv)
    assert needle in str(e.value)
    assert "Usage:" in str(e.value)


def test_missing_required_argv() -> None:
    with pytest.raises(ComponentArgumentError, match="--script"):
        materialize_appdef(required, [])


@pytest.mark.parametrize(
    "args, needle",
    [
        ({"mgs": "x"}, "Did you mean: 'msg'"),
        ({"n": [1]}, "argument 'n'"),
        ({"n": True}, "is a bool"),
    ],
)
def test_bad_dict_args(args: dict[str, object], needle: str) -> None:
    with pytest.raises(ComponentArgumentError, match=needle):
        materialize_appdef(echo, args)


def test_bad_defaults_name_the_source(caplog: pytest.LogCaptureFixture) -> None:
    # an unknown key is ignored as in TorchX (a .torchxconfig section may outlive a
    # parameter), but never silently
    with caplog.at_level("WARNING", logger="torchx_core.specs.builders"):
        materialize_appdef(echo, [], cmpnt_defaults={"nn": "1"})
    assert "defaults set unknown argument 'nn'; ignored" in caplog.text
    assert "Did you mean: 'n'" in caplog.text
    with pytest.raises(ComponentArgumentError, match="defaults value for 'n'"):
        materialize_appdef(echo, [], cmpnt_defaults={"n": "one"})


def _varargs_fn(foo: str, *args: str) -> AppDef:
    """V

    Args:
        foo: foo
        args: the command
    """
    return AppDef("v", roles=[Role("r", "img", "ep", args=[foo, *args])])


@pytest.mark.parametrize("source", ["cmpnt_defaults", "config"])
def test_configured_varargs_fill_an_empty_command_line(source: str) -> None:
    """Silent incompatibility 2 (issue 25): TorchX fills ``*args`` from configuration (a
    ``.torchxconfig`` string is split on whitespace, ``config=`` may give a list) when the command
    line gives none; the command line wins otherwise."""
    configured = (
        {"args": "echo from-config"}
        if source == "cmpnt_defaults"
        else {"args": ["echo", "from-config"]}
    )
    kw = {source: configured}
    assert parse_args(_varargs_fn, ["--foo", "f"], **kw).args == ["echo", "from-config"]  # type: ignore[arg-type]
    assert parse_args(_varargs_fn, ["--foo", "f", "a1", "a2"], **kw).args == ["a1", "a2"]  # type: ignore[arg-type]
    app = materialize_appdef(_varargs_fn, ["--foo", "f"], **kw)  # type: ignore[arg-type]
    assert app.roles[0].args == ["f", "echo", "from-config"]
    app = materialize_appdef(_varargs_fn, {"foo": "f"}, **kw)  # type: ignore[arg-type]
    assert app.roles[0].args == ["f", "echo", "from-config"]
    app = materialize_appdef(_varargs_fn, {"foo": "f", "args": ["x"]}, **kw)  # type: ignore[arg-type]
    assert app.roles[0].args == ["f", "x"]


def test_argv_must_be_strings() -> None:
    with pytest.raises(ComponentArgumentError):
        materialize_appdef(echo, ["--n", 1])  # type: ignore[list-item]


def test_return_value_must_be_appdef() -> None:
    with pytest.raises(ComponentValidationException, match="not an AppDef"):
        materialize_appdef(not_an_app, ["--x", "1"])


def test_help_text_from_docstring() -> None:
    text = component_help(echo)
    assert "Echoes a message." in text
    assert "the message to echo (continued line) (default: hello)" in text
    # TorchX's help formatter: type names as metavars, "(default: ...)" / "(required)";
    # argparse writes "-n int, --n int" before Python 3.13 and "-n, --n int" from 3.13 on
    assert re.search(r"-n( int)?, --n int", text) and re.search(r"-j( str)?, --j str", text), text


def test_help_flag_prints_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        materialize_appdef(echo, ["--help"])
    assert e.value.code == 0
    assert "Echoes a message." in capsys.readouterr().out


def test_h_parameter_takes_dash_h_and_help_stays_on_dash_dash_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _args(materialize_appdef(with_h, ["-h", "gpu.small", "-m", "x"])) == ["gpu.small", "x"]
    assert _args(materialize_appdef(with_h, ["--h", "cpu.nano"]))[0] == "cpu.nano"
    with pytest.raises(SystemExit):
        materialize_appdef(with_h, ["--help"])
    assert "named resource" in capsys.readouterr().out


def test_component_args_from_str_splits_as_torchx() -> None:
    from torchx_core.specs import AppDef
    from torchx_core.specs.builders import ComponentArgs, component_args_from_str

    def comp(foo: str, n: int, *args: str, bar: dict[str, int] | None = None) -> AppDef:
        """c

        Args:
            foo: f
            n: n
            args: rest
            bar: b
        """
        return AppDef("c")

    got = component_args_from_str(comp, ["--foo=x", "--n", "3", "--bar", "a=1,b=2", "--", "p", "q"])
    assert got == ComponentArgs({"foo": "x", "n": 3}, ["p", "q"], {"bar": {"a": 1, "b": 2}})
    assert component_args_from_str(comp, ["--foo", "x", "--n", "1"], {"n": "5"}).var_args == []


def _pair(point: tuple[str, int] | None = None, size: tuple[int, float] = (1, 2.0)) -> AppDef:
    """Tuple arguments.

    Args:
        point: a name and a count
        size: two numbers
    """
    return AppDef("pair", roles=[Role("r", image="i", args=[repr(point), repr(size)])])


def test_tuple_args_read_comma_separated_values() -> None:
    """TorchX's linter takes ``tuple[T1, T2, ...]`` arguments; here they are read from the
    command line too (``a,b``), with the element count checked."""
    app = materialize_appdef(_pair, ["--point", "a,3", "--size", "4,0.5"])
    assert app.roles[0].args == ["('a', 3)", "(4, 0.5)"]
    assert materialize_appdef(_pair, []).roles[0].args == ["None", "(1, 2.0)"]
    with pytest.raises(
        ComponentArgumentError, match=r"'a,3,4' has 3 value\(s\); tuple\[str, int\] takes 2"
    ):
        materialize_appdef(_pair, ["--point", "a,3,4"])
    with pytest.raises(ComponentArgumentError, match="'x' is not a valid int"):
        materialize_appdef(_pair, ["--point", "a,x"])
