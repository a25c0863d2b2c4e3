"""Unit tests for torchx_core.specs.file_linter."""

from __future__ import annotations

from pathlib import Path

import pytest
from components_fixture import echo, no_docs, required  # type: ignore[import-not-found]

from torchx_core.specs.file_linter import (
    ComponentFunctionValidator,
    LinterMessage,
    TorchxDocstringValidator,
    get_fn_docstring,
    parse_google_docstring,
    validate,
)

FIXTURE = str(Path(__file__).parent / "components_fixture.py")


def test_valid_components_have_no_messages() -> None:
    assert validate(FIXTURE, "echo") == []
    assert validate(FIXTURE, "required") == []


def test_accepts_old_and_new_style_hints(tmp_path: Path) -> None:
    src = tmp_path / "c.py"
    src.write_text(
        "from typing import Dict, List, Optional, Union\n"
        "def c(a: List[str], b: list[int], c: Dict[str, str], d: dict[str, float],\n"
        "      e: Optional[int] = None, f: 'str | None' = None,"
        " g: Union[bool, None] = None) -> 'AppDef':\n"
        "    '''Doc.\n\n    Args:\n        a: a\n    '''\n"
    )
    assert validate(str(src), "c") == []


def test_bad_component_reports_every_problem() -> None:
    """TorchX's messages: the problem, then the argument as written and the function."""
    msgs = validate(FIXTURE, "no_docs")
    text = " | ".join(m.description for m in msgs)
    assert "Missing type annotation for argument 'a' in function 'no_docs'" in text
    # stricter than TorchX, whose linter takes any class name as a "primitive"
    assert "Unsupported argument type 'object' for argument 'b: object'" in text
    assert "**kw is not supported" in text
    assert "Function: no_docs has incorrect return annotation, supported annotation: AppDef" in text
    assert all(isinstance(m, LinterMessage) and m.line > 0 for m in msgs)


def test_missing_docstring_is_no_linter_message() -> None:
    """TorchX runs a typed component without a docstring (its --help shows a tip): the default
    check reports nothing; the docstring validator, when asked for, warns."""
    assert validate(FIXTURE, "typed_no_docs") == []
    msgs = validate(FIXTURE, "typed_no_docs", [TorchxDocstringValidator()])
    assert [(m.severity, "missing a google-style docstring" in m.description) for m in msgs] == [
        ("warning", True)
    ]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("Dict[int, List[str]]", "Non-primitive value type 'List[str]'"),
        ("dict[list[int], str]", "Non-primitive key type 'list[int]'"),
        ("list[dict[str, str]]", "Non-primitive element type 'dict[str, str]'"),
        ("Optional[Optional[str]]", "Unsupported container type 'Optional'"),
        (
            "dict[str]",
            "Malformed dict type 'dict[str]', expected exactly two type parameters (dict[K, V])",
        ),
        (
            "tuple[str]",
            "Unsupported tuple type 'tuple[str]': single-element tuples are valid typing but not"
            " supported for components; expected element types (tuple[T1, T2, ...])",
        ),
        ("tuple[str, list[str]]", "Non-primitive element type ''list[str]''"),
    ],
)
def test_argument_type_messages_are_torchx(tmp_path: Path, annotation: str, expected: str) -> None:
    src = tmp_path / "c.py"
    src.write_text(f"def c(arg0: {annotation}) -> AppDef:\n    'Doc.'\n")
    (msg,) = validate(str(src), "c")
    assert msg.description == f"{expected} for argument 'arg0: {annotation}' in function 'c'"


def test_annotated_argument_is_read_as_its_type(tmp_path: Path) -> None:
    src = tmp_path / "c.py"
    src.write_text("def c(a: Annotated[int, 'doc'], *rest: str) -> AppDef:\n    'Doc.'\n")
    assert validate(str(src), "c") == []


def test_missing_return_annotation_message(tmp_path: Path) -> None:
    src = tmp_path / "c.py"
    src.write_text("def c(a: int):\n    'Doc.'\n")
    (msg,) = validate(str(src), "c")
    assert msg.description == (
        "Function: c missing return annotation or has unknown annotations."
        " Supported return annotation: AppDef"
    )


def test_missing_function_and_file() -> None:
    (msg,) = validate(FIXTURE, "nope")
    assert "nope not found" in msg.description and "echo" in msg.description
    (msg2,) = validate("/no/such/file.py", "f")
    assert "/no/such/file.py" in msg2.description


def test_syntax_error_is_reported(tmp_path: Path) -> None:
    src = tmp_path / "broken.py"
    src.write_text("def f(:\n")
    (msg,) = validate(str(src), "f")
    assert (msg.description, msg.line) == ("invalid syntax", 1)  # TorchX: the parser's message


def test_validate_reads_the_file_through_read_conf_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchX's tests (and users') patch ``file_linter.read_conf_file``."""
    from torchx_core.specs import file_linter

    monkeypatch.setattr(file_linter, "read_conf_file", lambda path: "def f(:\n")
    (msg,) = validate("/any/path.py", "f")
    assert msg.description == "invalid syntax"


def test_custom_validators() -> None:
    class NameValidator(ComponentFunctionValidator):
        def validate(self, app_specs_func_def):  # type: ignore[no-untyped-def]
            if not app_specs_func_def.name.startswith("x_"):
                return [
                    self._gen_linter_message("names must start with x_", app_specs_func_def.lineno)
                ]
            return []

    (msg,) = validate(FIXTURE, "echo", validators=[NameValidator()])
    assert msg.description == "names must start with x_" and msg.name == "NameValidator"


def test_get_fn_docstring() -> None:
    description, args = get_fn_docstring(echo)
    assert description.startswith("Echoes a message.")
    # as TorchX: the docstring's text; " " for an argument it does not describe (the help
    # formatter adds "(required)" / "(default: ...)")
    assert args["msg"] == "the message to echo (continued line)"
    assert args["n"] == "number of times"
    assert args["ratio"] == " "  # not in the docstring
    _, req_args = get_fn_docstring(required)
    assert req_args["script"] == "the script"


def test_get_fn_docstring_without_docstring() -> None:
    description, args = get_fn_docstring(no_docs)
    assert description == (  # TorchX's text, word for word
        "no_docs TIP: improve this help string by adding a docstring\nto your component (see:"
        " https://meta-pytorch.org/torchx/latest/component_best_practices.html)"
    )
    assert args["a"] == " "


def test_parse_google_docstring_sections() -> None:
    desc, args = parse_google_docstring(
        "Summary.\n\nMore.\n\n"
        "Args:\n    x (int): the x\n    y: the y\n        more y\n\n"
        "Raises:\n    ValueError: bad\n"
    )
    assert desc == "Summary.\nMore."  # short then long description, as TorchX joins them
    assert args == {"x": "the x", "y": "the y more y"}


def test_torchx_argument_help_formatter() -> None:
    """TorchX HEAD's file_linter.TorchXArgumentHelpFormatter: help ends with "(required)" or
    "(default: X)"; --help (default SUPPRESS) is left alone."""
    import argparse

    from torchx_core.specs.file_linter import TorchXArgumentHelpFormatter

    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--foo", type=int, required=True, help="foo")
    parser.add_argument("--bar", type=int, default=1, help="bar")
    fmt = TorchXArgumentHelpFormatter(prog="p")
    assert [fmt._get_help_string(a) for a in parser._actions] == [
        "show this help message and exit",
        "foo (required)",
        "bar (default: 1)",
    ]
    parser.formatter_class = TorchXArgumentHelpFormatter
    assert "--foo int   foo (required)\n  --bar int   bar (default: 1)" in parser.format_help()


def test_components_under_module_level_blocks_are_found(tmp_path: Path) -> None:
    """As TorchX: a component defined under a module-level ``if`` (version guards) is linted."""
    path = tmp_path / "comps.py"
    path.write_text(
        "import sys\nfrom torchx_core.specs import AppDef\n"
        "if sys.version_info >= (3, 10):\n"
        "    def comp(x: int | None = None) -> AppDef:\n"
        '        """C.\n\n        Args:\n            x: x\n        """\n'
        "        return AppDef('c')\n"
        "else:\n    pass\n"
    )
    assert validate(str(path), "comp") == []
    assert "not found" in validate(str(path), "other")[0].description
