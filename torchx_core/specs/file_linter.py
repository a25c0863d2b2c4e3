"""Component linter: checks that a function follows the component standard.

A component is a function that

1. has a google-style docstring (recommended: without one the linter warns, and ``--help``
   shows a tip; TorchX accepts such components too),
2. annotates every parameter with a supported type: ``str``, ``int``, ``float``, ``bool``,
   ``list[X]``/``List[X]``, ``dict[K, V]``/``Dict[K, V]`` of those primitives, ``Optional[X]`` /
   ``X | None`` of the above, and ``*args: str`` for trailing arguments,
3. returns ``AppDef`` (annotated ``-> AppDef`` or ``-> specs.AppDef``).

The check reads the source with :mod:`ast`; the file is never imported.
"""

from __future__ import annotations

import abc
import argparse
import ast
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "ComponentFunctionValidator",
    "LinterMessage",
    "TorchXArgumentHelpFormatter",
    "TorchxFunctionArgsValidator",
    "TorchxFunctionValidator",
    "TorchxReturnValidator",
    "get_fn_docstring",
    "parse_google_docstring",
    "validate",
]

_PRIMITIVES = frozenset({"str", "int", "float", "bool"})
_LISTS = frozenset({"list", "List"})
_DICTS = frozenset({"dict", "Dict"})
_OPTIONALS = frozenset({"Optional"})
_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|"
    r"Examples?|Notes?|Warnings?|See Also|Todo|Attributes|Usage)\s*:\s*$"
)
_ARG_RE = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(?P<desc>.*)$")

TIP = (
    "TIP: improve this help string by adding a google-style docstring to your component"
    " (a description, then an 'Args:' section describing each parameter)"
)


@dataclass
class LinterMessage:
    """One problem found by the linter.

    Args:
        name: name of the validator that found it
        description: what is wrong and how to fix it
        line: line number in the file (1-based)
        char: column
        severity: ``"error"`` or ``"warning"``
    """

    name: str
    description: str
    line: int
    char: int
    severity: str = "error"


def _ann_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _supported(node: ast.expr | None, depth: int = 0) -> bool:
    """True if the annotation AST is a supported component argument type."""
    if node is None or depth > 3:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _supported(ast.parse(node.value, mode="eval").body, depth + 1)
        except SyntaxError:
            return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        non_none = [p for p in parts if not _is_none(p)]
        return len(non_none) == 1 and _supported(non_none[0], depth + 1)
    name = _ann_name(node)
    if name in _PRIMITIVES:
        return True
    if isinstance(node, ast.Subscript):
        base = _ann_name(node.value)
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if base in _LISTS:
            return len(elts) == 1 and _ann_name(elts[0]) in _PRIMITIVES
        if base in _DICTS:
            return len(elts) == 2 and all(_ann_name(e) in _PRIMITIVES for e in elts)
        if base in _OPTIONALS:
            return len(elts) == 1 and _supported(elts[0], depth + 1)
        if base == "Union":
            non_none = [e for e in elts if not _is_none(e)]
            return len(non_none) == 1 and len(elts) == 2 and _supported(non_none[0], depth + 1)
    return False


class ComponentFunctionValidator(abc.ABC):
    """Base class of the checks run by :py:func:`validate` on a component's ``FunctionDef``."""

    @abc.abstractmethod
    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        """Returns the problems found in ``app_specs_func_def``."""

    def _gen_linter_message(
        self, description: str, lineno: int, severity: str = "error"
    ) -> LinterMessage:
        return LinterMessage(
            name=type(self).__name__,
            description=description,
            line=lineno,
            char=0,
            severity=severity,
        )


class TorchxFunctionArgsValidator(ComponentFunctionValidator):
    """Checks that every parameter is annotated with a supported type."""

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        fn = app_specs_func_def
        msgs: list[LinterMessage] = []
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        for arg in args:
            if arg.annotation is None:
                msgs.append(
                    self._gen_linter_message(
                        f"Arg {arg.arg} missing type annotation;"
                        f" annotate it, e.g. `{arg.arg}: str`",
                        arg.lineno,
                    )
                )
            elif not _supported(arg.annotation):
                msgs.append(
                    self._gen_linter_message(
                        f"Arg {arg.arg} has unsupported type {ast.unparse(arg.annotation)!r};"
                        " use str, int, float, bool, list[X], dict[K, V] (of those) or"
                        " Optional of them",
                        arg.lineno,
                    )
                )
        if fn.args.vararg is not None:
            va = fn.args.vararg
            if va.annotation is None or _ann_name(va.annotation) != "str":
                msgs.append(
                    self._gen_linter_message(
                        f"Arg *{va.arg} must be annotated as `*{va.arg}: str`", va.lineno
                    )
                )
        if fn.args.kwarg is not None:
            msgs.append(
                self._gen_linter_message(
                    f"**{fn.args.kwarg.arg} is not supported in components; declare each parameter",
                    fn.args.kwarg.lineno,
                )
            )
        return msgs


class TorchxReturnValidator(ComponentFunctionValidator):
    """Checks that the function is annotated to return ``AppDef``."""

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        ret = app_specs_func_def.returns
        if ret is None:
            return [
                self._gen_linter_message(
                    "Function should have a return annotation: `-> AppDef`",
                    app_specs_func_def.lineno,
                )
            ]
        if isinstance(ret, ast.Constant) and isinstance(ret.value, str):
            ok = ret.value.split(".")[-1] == "AppDef"
        else:
            ok = _ann_name(ret) == "AppDef"
        if not ok:
            return [
                self._gen_linter_message(
                    f"Function must return AppDef, it is annotated `-> {ast.unparse(ret)}`",
                    app_specs_func_def.lineno,
                )
            ]
        return []


class TorchxDocstringValidator(ComponentFunctionValidator):
    """Checks that the function has a docstring (a warning: TorchX runs components without)."""

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        if ast.get_docstring(app_specs_func_def):
            return []
        return [
            self._gen_linter_message(
                f"{app_specs_func_def.name} is missing a google-style docstring; {TIP}",
                app_specs_func_def.lineno,
                severity="warning",
            )
        ]


class TorchxFunctionValidator(ComponentFunctionValidator):
    """The default component check: docstring, annotated arguments, ``-> AppDef``."""

    def __init__(self) -> None:
        self._validators: list[ComponentFunctionValidator] = [
            TorchxDocstringValidator(),
            TorchxFunctionArgsValidator(),
            TorchxReturnValidator(),
        ]

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        msgs: list[LinterMessage] = []
        for v in self._validators:
            msgs.extend(v.validate(app_specs_func_def))
        return msgs


def _module_functions(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a module defines, also under module-level ``if``/``try``/``with`` blocks
    (``if sys.version_info >= (3, 10): def comp(...)``), as TorchX finds them."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_functions(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_functions(handler.body)


def validate_source(
    source: str, component_function: str, validators: list[ComponentFunctionValidator] | None = None
) -> list[LinterMessage]:
    """Like :py:func:`validate` but on source text."""
    try:
        module = ast.parse(source)
    except SyntaxError as e:
        return [
            LinterMessage(
                "TorchxFunctionValidator",
                f"cannot parse the source: {e}",
                e.lineno or 0,
                e.offset or 0,
            )
        ]
    functions = list(_module_functions(module.body))
    fn_def = next((n for n in functions if n.name == component_function), None)
    if fn_def is None:
        names = [n.name for n in functions]
        return [
            LinterMessage(
                "TorchxFunctionValidator",
                f"Function {component_function} not found"
                f" (functions defined: {', '.join(names) or 'none'})",
                0,
                0,
            )
        ]
    msgs: list[LinterMessage] = []
    for v in validators if validators is not None else [TorchxFunctionValidator()]:
        msgs.extend(v.validate(fn_def))  # type: ignore[arg-type]  # async defs are linted alike
    return msgs


def validate(
    path: str, component_function: str, validators: list[ComponentFunctionValidator] | None = None
) -> list[LinterMessage]:
    """Validates the function to make sure it complies the component standard.

    Rules: all parameters must be annotated with a supported type and it must return
    ``torchx_core.specs.AppDef`` (errors); it should have google-style docs (a warning).

    Args:
        path: Path to python source file.
        component_function: Name of the function to be validated.
        validators: checks to run (default: :py:class:`TorchxFunctionValidator`)

    Returns:
        The problems found (empty if the component is valid); see ``LinterMessage.severity``.
    """
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        return [LinterMessage("TorchxFunctionValidator", f"cannot read {path}: {e}", 0, 0)]
    return validate_source(source, component_function, validators)


def parse_google_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Splits a google-style docstring into (description, ``{arg: description}``)."""
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        m = _SECTION_RE.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if m:
            section = m.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in (
            "args",
            "arguments",
            "parameters",
            "params",
            "keyword args",
            "keyword arguments",
        ):
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        am = _ARG_RE.match(line.strip())
        if am and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = am.group("name")
            args[current] = am.group("desc").strip()
        elif current is not None:
            args[current] = (args[current] + " " + line.strip()).strip()
    text = "\n".join(description).strip().splitlines()
    if len(text) > 2 and not text[1].strip():
        del text[1]  # short description, then the long one on the next line (as TorchX)
    return "\n".join(text), args


class TorchXArgumentHelpFormatter(
    argparse.RawDescriptionHelpFormatter,
    argparse.ArgumentDefaultsHelpFormatter,
    argparse.MetavarTypeHelpFormatter,
):
    """The help formatter of component arguments (TorchX's): each argument's help ends with
    ``(required)`` or ``(default: VALUE)``; the description keeps its line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS:  # --help
            return text
        return f"{text} (required)" if action.required else f"{text} (default: {action.default})"


def get_fn_docstring(fn: Callable[..., object]) -> tuple[str, dict[str, str]]:
    """Parses the function and arguments description from ``fn``'s google-style docstring.

    Without a docstring, the description is the function name plus a TIP on how to improve
    the help message. Arguments missing from the docstring are described by ``" "``; the
    component's ``--help`` (:class:`TorchXArgumentHelpFormatter`) adds whether each argument is
    required or its default.

    Args:
        fn: Function with or without docstring

    Returns:
        function description, and ``{argument name: description}``
    """
    doc = inspect.getdoc(fn)
    if doc:
        description, args_desc = parse_google_docstring(doc)
    else:
        description, args_desc = f"{getattr(fn, '__name__', 'component')} {TIP}", {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    # an argument the docstring does not describe gets " " (argparse drops an empty help); the
    # help formatter adds "(required)" / "(default: ...)", as in TorchX
    out = {name: args_desc.get(name) or " " for name in params}
    return description or getattr(fn, "__name__", ""), out
