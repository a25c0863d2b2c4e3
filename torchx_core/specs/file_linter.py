"""Component linter: checks that a function follows the component standard.

A component is a function that

1. has a google-style docstring (recommended: without one ``--help`` shows a tip; the default
   check, like TorchX's, does not require it; :class:`TorchxDocstringValidator` warns),
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
    "ArgTypeValidator",
    "ComponentFunctionValidator",
    "LinterMessage",
    "ReturnTypeValidator",
    "TorchXArgumentHelpFormatter",
    "TorchxDocstringValidator",
    "TorchxFunctionArgsValidator",
    "TorchxFunctionValidator",
    "TorchxReturnValidator",
    "get_fn_docstring",
    "parse_google_docstring",
    "read_conf_file",
    "validate",
]

_PRIMITIVES = frozenset({"str", "int", "float", "bool"})
_LISTS = frozenset({"list", "List"})
_DICTS = frozenset({"dict", "Dict"})
_TUPLES = frozenset({"tuple", "Tuple"})
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
# TorchX's description of a component without a docstring (after its name), word for word
NO_DOCSTRING_TIP = (
    "TIP: improve this help string by adding a docstring\nto your component (see:"
    " https://meta-pytorch.org/torchx/latest/component_best_practices.html)"
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


def _is_primitive(node: ast.expr) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and _ann_name(node) in _PRIMITIVES


def _optional_inner(node: ast.expr) -> ast.expr | None:
    """``X`` of ``Optional[X]``, ``X | None``, ``None | X`` or ``Union[X, None]``, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        if _is_none(node.right):
            return node.left
        if _is_none(node.left):
            return node.right
        return None
    if isinstance(node, ast.Subscript):
        base = _ann_name(node.value)
        if base in _OPTIONALS:
            return node.slice
        if base == "Union" and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
            a, b = node.slice.elts
            return a if _is_none(b) else b if _is_none(a) else None
    return None


def _arg_type_problem(node: ast.expr | None, depth: int = 0) -> str | None:
    """What is wrong with an argument's annotation (TorchX's wording), or None if supported."""
    if node is None:
        return "Missing type annotation"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and depth < 3:
        try:  # a quoted annotation: "Optional[str]"
            return _arg_type_problem(ast.parse(node.value, mode="eval").body, depth + 1)
        except SyntaxError:
            return f"Unsupported argument type {node.value!r}"
    if isinstance(node, ast.Subscript) and _ann_name(node.value) == "Annotated":
        sl = node.slice
        if isinstance(sl, ast.Tuple) and sl.elts:
            node = sl.elts[0]  # Annotated[X, ...] is read as X
    inner = _optional_inner(node)
    if inner is not None:
        node = inner  # once: Optional[Optional[X]] is an unsupported container, as in TorchX
    if _is_primitive(node):
        return None
    if isinstance(node, ast.Subscript):
        return _container_problem(node)
    return f"Unsupported argument type {ast.unparse(node)!r}"


def _container_problem(node: ast.Subscript) -> str | None:
    """What is wrong with a ``dict``/``list``/``tuple`` annotation, or None if supported."""
    base = _ann_name(node.value)
    sl = node.slice
    if base in _DICTS:
        if not isinstance(sl, ast.Tuple) or len(sl.elts) != 2:
            return (
                f"Malformed dict type {ast.unparse(node)!r},"
                " expected exactly two type parameters (dict[K, V])"
            )
        key, value = sl.elts
        if not _is_primitive(key):
            return f"Non-primitive key type {ast.unparse(key)!r}"
        if not _is_primitive(value):
            return f"Non-primitive value type {ast.unparse(value)!r}"
        return None
    if base in _LISTS:
        return None if _is_primitive(sl) else f"Non-primitive element type {ast.unparse(sl)!r}"
    if base in _TUPLES:  # tuple[T1, T2, ...]: "a,b" on the command line (builders)
        if not isinstance(sl, ast.Tuple):
            return (
                f"Unsupported tuple type {ast.unparse(node)!r}: single-element tuples are"
                " valid typing but not supported for components; expected element types"
                " (tuple[T1, T2, ...])"
            )
        for element in sl.elts:
            if not _is_primitive(element):
                return f"Non-primitive element type '{ast.unparse(element)!r}'"
        return None
    return f"Unsupported container type {base or ast.unparse(node.value)!r}"


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


class ArgTypeValidator(ComponentFunctionValidator):
    """Checks that every parameter is annotated with a supported type (TorchX's messages:
    ``Missing type annotation for argument 'a' in function 'f'``)."""

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        fn = app_specs_func_def
        msgs: list[LinterMessage] = []

        def err(reason: str, arg: ast.arg) -> None:
            msgs.append(
                self._gen_linter_message(
                    f"{reason} for argument {ast.unparse(arg)!r} in function {fn.name!r}",
                    arg.lineno,
                )
            )

        for arg in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
            problem = _arg_type_problem(arg.annotation)
            if problem:
                err(problem, arg)
        if fn.args.vararg is not None:
            va = fn.args.vararg
            if va.annotation is None:
                err("Missing type annotation", va)
            elif not (_is_primitive(va.annotation) and _ann_name(va.annotation) == "str"):
                err(
                    f"Unsupported type {ast.unparse(va.annotation)!r} (trailing arguments are"
                    f" strings: `*{va.arg}: str`)",
                    va,
                )
        if fn.args.kwarg is not None:
            msgs.append(
                self._gen_linter_message(
                    f"**{fn.args.kwarg.arg} is not supported in components; declare each parameter",
                    fn.args.kwarg.lineno,
                )
            )
        return msgs


TorchxFunctionArgsValidator = ArgTypeValidator  # the name in TorchX 0.7


class ReturnTypeValidator(ComponentFunctionValidator):
    """Checks that the function is annotated to return ``supported_return_type`` (``AppDef``).

    Args:
        supported_return_type: the class name the return annotation must end with
    """

    def __init__(self, supported_return_type: str = "AppDef") -> None:
        self._supported_return_type = supported_return_type

    def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
        fn, want = app_specs_func_def, self._supported_return_type
        ret = fn.returns
        if isinstance(ret, ast.Constant) and isinstance(ret.value, str):
            got = ret.value.split(".")[-1]  # a quoted "specs.AppDef"
        else:
            got = _ann_name(ret) if ret is not None else ""
        if not got:
            desc = (
                f"Function: {fn.name} missing return annotation or has unknown annotations."
                f" Supported return annotation: {want}"
            )
        elif got != want:
            desc = (
                f"Function: {fn.name} has incorrect return annotation, supported annotation: {want}"
            )
        else:
            return []
        return [self._gen_linter_message(desc, fn.lineno)]


class TorchxReturnValidator(ReturnTypeValidator):
    """:class:`ReturnTypeValidator` of ``AppDef`` (the name in TorchX 0.7)."""

    def __init__(self) -> None:
        super().__init__("AppDef")


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
    """The default component check (TorchX's): annotated arguments and ``-> AppDef``. A missing
    docstring is no error (``--help`` then shows a tip); add :class:`TorchxDocstringValidator`
    to report it as a warning."""

    def __init__(self) -> None:
        self._validators: list[ComponentFunctionValidator] = [
            ArgTypeValidator(),
            ReturnTypeValidator("AppDef"),
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
    except SyntaxError as e:  # TorchX: the parser's message; where it is: line and char
        return [LinterMessage("TorchXValidator", e.msg, e.lineno or 0, e.offset or 0)]
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
        source = read_conf_file(path)
    except OSError as e:
        return [LinterMessage("TorchxFunctionValidator", f"cannot read {path}: {e}", 0, 0)]
    return validate_source(source, component_function, validators)


def read_conf_file(conf_file: str) -> str:
    """The text of ``conf_file`` (the component file :py:func:`validate` reads), as TorchX."""
    with open(conf_file, encoding="utf-8") as f:
        return f.read()


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

    Without a docstring, the description is the function name plus TorchX's TIP on how to
    improve the help message (pointing at TorchX's component best practices). Arguments
    missing from the docstring are described by ``" "``; the component's ``--help``
    (:class:`TorchXArgumentHelpFormatter`) adds whether each argument is required or its
    default.

    Args:
        fn: Function with or without docstring

    Returns:
        function description, and ``{argument name: description}``
    """
    doc = inspect.getdoc(fn)
    if doc:
        description, args_desc = parse_google_docstring(doc)
    else:
        description, args_desc = f"{getattr(fn, '__name__', 'component')} {NO_DOCSTRING_TIP}", {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    # an argument the docstring does not describe gets " " (argparse drops an empty help); the
    # help formatter adds "(required)" / "(default: ...)", as in TorchX
    out = {name: args_desc.get(name) or " " for name in params}
    return description or getattr(fn, "__name__", ""), out
