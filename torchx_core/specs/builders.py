"""Build an AppDef from a component function and its arguments (CLI argv or a dict).

Each component parameter becomes an option ``--name`` (single-letter names also get ``-n``,
names with ``_`` also accept ``-`` as in ``--nnodes-per``). Values are parsed by the
parameter's annotation:

* ``str``; ``int``; ``float``; ``bool`` (``true/false``, ``1/0``, ``yes/no``, ``on/off``; a
  bare ``--flag`` means true),
* ``list[X]``: ``"a,b,c"``,
* ``dict[K, V]``: ``"k1=v1,k2=v2"`` (the last ``,`` before a ``key=`` separates pairs, so
  values may hold commas),
* ``Optional[X]`` / ``X | None``: like ``X``,
* ``*args: str``: everything after the named options (a leading ``--`` is dropped); when the
  command line gives none, configured ones fill them (``cmpnt_defaults``/``.torchxconfig``: a
  string split on whitespace; ``config``: a list), as in TorchX.

Configured values (``cmpnt_defaults``, then ``config``) override the function's defaults and
lose to the command line; a configured name the function does not take is ignored with a warning.

Bad arguments raise :py:class:`~torchx_core.specs.errors.ComponentArgumentError` (never
``SystemExit``), except ``--help`` which prints the help (built from the docstring) and exits
like any CLI.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, NoReturn

from torchx_core.specs._app import AppDef
from torchx_core.specs._mounts import BindMount, DeviceMount, VolumeMount, parse_mounts
from torchx_core.specs._status import make_app_handle
from torchx_core.specs.errors import (
    ComponentArgumentError,
    ComponentValidationException,
    did_you_mean,
)
from torchx_core.specs.file_linter import TorchXArgumentHelpFormatter, get_fn_docstring
from torchx_core.util.types import decode_optional, to_dict

logger = logging.getLogger(__name__)

__all__ = [
    "BindMount",
    "ComponentArgs",
    "DeviceMount",
    "VolumeMount",
    "component_args_from_str",
    "component_help",
    "make_app_handle",
    "materialize_appdef",
    "parse_args",
    "parse_mounts",
]

_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})


class _ComponentArgParser(argparse.ArgumentParser):
    """An ArgumentParser that raises ComponentArgumentError instead of exiting on bad input."""

    def error(self, message: str) -> NoReturn:
        raise ComponentArgumentError(
            f"{self.prog}: {message}. {self.format_usage().strip().replace('usage:', 'Usage:', 1)}"
            f" (run with --help for details)"
        )


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _to_bool(value: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a bool (use true/false, 1/0, yes/no, on/off)")


def _primitive(tp: Any, value: str) -> Any:
    if tp is bool:
        return _to_bool(value)
    if tp in (int, float):
        try:
            return tp(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a valid {tp.__name__}") from None
    if tp is str or tp is Any:
        return value
    raise ValueError(f"unsupported type {_type_name(tp)}")


def _convert(tp: Any, value: Any) -> Any:
    """Converts a CLI string (or an already typed value) to ``tp``; raises ValueError."""
    tp = decode_optional(tp)
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin is list or tp is list:
        (item_tp,) = typing.get_args(tp) or (str,)
        if isinstance(value, str):
            items = [v for v in value.split(",") if v != ""]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            raise ValueError(f"{value!r} is not a list (write 'a,b,c')")
        return [_primitive(item_tp, v) if isinstance(v, str) else _check(item_tp, v) for v in items]
    if origin is tuple:  # tuple[T1, T2, ...] (the linter refuses tuple[T]): "a,b"
        item_tps = typing.get_args(tp)
        if isinstance(value, str):
            parts: list[Any] = value.split(",")
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            raise ValueError(f"{value!r} is not a tuple (write 'a,b')")
        if len(parts) != len(item_tps):
            raise ValueError(
                f"{value!r} has {len(parts)} value(s); {str(tp).replace('typing.', '')} takes"
                f" {len(item_tps)}, comma-separated"
            )
        return tuple(
            _primitive(t, v) if isinstance(v, str) else _check(t, v)
            for t, v in zip(item_tps, parts, strict=True)
        )
    if origin is dict or tp is dict:
        k_tp, v_tp = typing.get_args(tp) or (str, str)
        if isinstance(value, str):
            raw = to_dict(value)
        elif isinstance(value, Mapping):
            raw = dict(value)
        else:
            raise ValueError(f"{value!r} is not a dict (write 'k1=v1,k2=v2')")
        return {
            (_primitive(k_tp, k) if isinstance(k, str) else _check(k_tp, k)): (
                _primitive(v_tp, v) if isinstance(v, str) else _check(v_tp, v)
            )
            for k, v in raw.items()
        }
    if isinstance(value, str):
        return _primitive(tp, value)
    return _check(tp, value)


def _check(tp: Any, value: Any) -> Any:
    if tp is Any or not isinstance(tp, type):
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, bool):
        raise ValueError(f"{value!r} is a bool, not an int")
    if not isinstance(value, tp):
        # ValueError on purpose: callers turn it into ComponentArgumentError
        raise ValueError(f"{value!r} ({type(value).__name__}) is not a {_type_name(tp)}")
    return value


def _hints(cmpnt_fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cmpnt_fn)
    except Exception as e:
        raise ComponentValidationException(
            f"cannot resolve the type annotations of component {cmpnt_fn.__name__}: {e}"
        ) from e


def _flag_aliases(cmpnt_fn: Callable[..., Any]) -> dict[str, list[str]]:
    """TorchX's extra option names: ``config_name: Annotated[str, "-cn"]`` is also ``-cn``."""
    try:
        hints = typing.get_type_hints(cmpnt_fn, include_extras=True)
    except Exception:  # noqa: BLE001 - `_hints` already reported unresolvable annotations
        return {}
    out: dict[str, list[str]] = {}
    for name, tp in hints.items():
        flags = [m for m in getattr(tp, "__metadata__", ()) if isinstance(m, str)]
        if flags := [m for m in flags if m.startswith("-")]:
            out[name] = flags
    return out


def _arg_type(tp: Any) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        try:
            return _convert(tp, value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = _type_name(decode_optional(tp))
    return parse


def _create_args_parser(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> argparse.ArgumentParser:
    description, args_desc = get_fn_docstring(cmpnt_fn)
    hints = _hints(cmpnt_fn)
    parser = _ComponentArgParser(
        prog=f"torchx run <run args...> {cmpnt_fn.__name__}",
        description=f"App spec: {description}",
        formatter_class=TorchXArgumentHelpFormatter,
        allow_abbrev=False,
        add_help=False,
    )
    params = inspect.signature(cmpnt_fn).parameters
    # components commonly take ``h`` (a named resource): then only --help shows the help
    help_flags = ["--help"] if "h" in params else ["-h", "--help"]
    parser.add_argument(*help_flags, action="help", help="show this help message and exit")
    defaults = _defaults(cmpnt_fn, hints, cmpnt_defaults, config)
    aliases = _flag_aliases(cmpnt_fn)
    for name, param in params.items():
        tp = hints.get(name, str)
        help_text = args_desc.get(name, name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            parser.add_argument(
                name, nargs=argparse.REMAINDER, type=str, help=help_text, default=defaults.get(name)
            )
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        flags = [*aliases.get(name, ()), f"--{name}"]
        if len(name) == 1 and name not in aliases:
            flags.insert(0, f"-{name}")
        if "_" in name:
            flags.append(f"--{name.replace('_', '-')}")
        kwargs: dict[str, Any] = {"dest": name, "type": _arg_type(tp), "help": help_text}
        if decode_optional(tp) is bool:
            kwargs.update(nargs="?", const=True)
        if name in defaults:
            kwargs["default"] = defaults[name]
        else:
            kwargs["required"] = True
        parser.add_argument(*flags, **kwargs)
    return parser


def _defaults(
    cmpnt_fn: Callable[..., AppDef],
    hints: Mapping[str, Any],
    cmpnt_defaults: Mapping[str, str] | None,
    config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    params = inspect.signature(cmpnt_fn).parameters
    out = {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}
    for source, values in (("defaults", cmpnt_defaults), ("config", config)):
        for name, value in (values or {}).items():
            if name not in params or params[name].kind is inspect.Parameter.VAR_KEYWORD:
                # TorchX ignores it (a .torchxconfig section may outlive a parameter): say so
                logger.warning(
                    "component %s: %s set unknown argument %r; ignored.%s Valid arguments: %s",
                    cmpnt_fn.__name__,
                    source,
                    name,
                    did_you_mean(name, params),
                    ", ".join(params),
                )
                continue
            try:
                if params[name].kind is inspect.Parameter.VAR_POSITIONAL:
                    out[name] = _varargs(value)
                else:
                    out[name] = _convert(hints.get(name, str), value)
            except ValueError as e:
                raise ComponentArgumentError(
                    f"component {cmpnt_fn.__name__}: {source} value for {name!r} is invalid: {e}"
                ) from None
    return out


def _varargs(value: Any) -> list[str]:
    """A configured ``*args`` value: a string split on whitespace (as TorchX does) or a list."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise ValueError(f"{value!r} is neither a string nor a list of strings")


def component_help(cmpnt_fn: Callable[..., AppDef]) -> str:
    """Returns the ``--help`` text of a component (built from its docstring and signature)."""
    return _create_args_parser(cmpnt_fn).format_help()


def parse_args(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: list[str],
    cmpnt_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> argparse.Namespace:
    """Parses component CLI arguments into a namespace of typed values.

    Args:
        cmpnt_fn: the component function
        cmpnt_args: the argv, e.g. ``["--nnodes", "2", "--script", "train.py"]``
        cmpnt_defaults: string defaults (e.g. from ``.torchxconfig``) overriding the function's
        config: typed defaults overriding the function's (applied after ``cmpnt_defaults``)

    Raises:
        ComponentArgumentError: unknown, missing or malformed arguments
    """
    if isinstance(cmpnt_args, str) or not all(isinstance(a, str) for a in cmpnt_args):
        raise ComponentArgumentError(
            f"component {cmpnt_fn.__name__}: arguments must be a list of strings,"
            f" got {cmpnt_args!r}"
        )
    parser = _create_args_parser(cmpnt_fn, cmpnt_defaults, config)
    parsed = parser.parse_args(list(cmpnt_args))
    # *args from the command line win; configured ones fill in when the command line has none
    for name, param in inspect.signature(cmpnt_fn).parameters.items():
        if param.kind is inspect.Parameter.VAR_POSITIONAL and not getattr(parsed, name, None):
            configured = parser.get_default(name)
            if configured is not None:
                setattr(parsed, name, list(configured))
    return parsed


class ComponentArgs(NamedTuple):
    """A component function's arguments, parsed and typed, split as the call takes them."""

    positional_args: dict[str, Any]
    var_args: list[str]
    kwargs: dict[str, Any]


def _split(cmpnt_fn: Callable[..., AppDef], values: Mapping[str, Any]) -> ComponentArgs:
    positional: dict[str, Any] = {}
    var_args: list[str] = []
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(cmpnt_fn).parameters.items():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            var_args = list(values.get(name) or [])
            if var_args and var_args[0] == "--":
                var_args = var_args[1:]
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[name] = values[name]
        elif param.kind is not inspect.Parameter.VAR_KEYWORD:
            positional[name] = values[name]
    return ComponentArgs(positional, var_args, kwargs)


def component_args_from_str(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: list[str],
    cmpnt_args_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> ComponentArgs:
    """Parses a component's CLI arguments into typed values, split as the call takes them.

    >>> from torchx_core.specs import AppDef
    >>> def comp(foo: str, *args: str, bar: int = 1) -> AppDef:
    ...     '''c'''
    ...     return AppDef("c")
    >>> component_args_from_str(comp, ["--foo=x", "--bar", "2", "a1", "a2"])
    ComponentArgs(positional_args={'foo': 'x'}, var_args=['a1', 'a2'], kwargs={'bar': 2})

    Args:
        cmpnt_fn: the component function
        cmpnt_args: the argv (``--name value`` or ``--name=value``; trailing ``*args`` last)
        cmpnt_args_defaults: string defaults overriding the function's
        config: typed defaults overriding the function's

    Raises:
        ComponentArgumentError: unknown, missing or malformed arguments
    """
    return _split(cmpnt_fn, vars(parse_args(cmpnt_fn, cmpnt_args, cmpnt_args_defaults, config)))


def _call(cmpnt_fn: Callable[..., AppDef], values: Mapping[str, Any]) -> AppDef:
    args = _split(cmpnt_fn, values)
    app = cmpnt_fn(*args.positional_args.values(), *args.var_args, **args.kwargs)
    if not isinstance(app, AppDef):
        raise ComponentValidationException(
            f"component {cmpnt_fn.__name__} returned {type(app).__name__}, not an AppDef"
        )
    return app


def _values_from_dict(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: Mapping[str, Any],
    cmpnt_defaults: Mapping[str, str] | None,
    config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    hints = _hints(cmpnt_fn)
    params = inspect.signature(cmpnt_fn).parameters
    values = _defaults(cmpnt_fn, hints, cmpnt_defaults, config)
    problems: list[str] = []
    for name, value in cmpnt_args.items():
        if name not in params or params[name].kind is inspect.Parameter.VAR_KEYWORD:
            problems.append(
                f"unknown argument {name!r}.{did_you_mean(str(name), params)}"
                f" Valid arguments: {', '.join(params)}"
            )
            continue
        if params[name].kind is inspect.Parameter.VAR_POSITIONAL:
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                problems.append(f"{name!r} (the *{name} trailing arguments) must be a list of str")
            else:
                values[name] = [str(v) for v in value]
            continue
        try:
            values[name] = _convert(hints.get(name, str), value)
        except ValueError as e:
            problems.append(f"argument {name!r}: {e}")
    for name, param in params.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if name not in values:
            problems.append(f"missing required argument {name!r}")
    if problems:
        raise ComponentArgumentError(f"component {cmpnt_fn.__name__}: " + "; ".join(problems))
    return values


def materialize_appdef(
    cmpnt_fn: Callable[..., AppDef],
    cmpnt_args: list[str] | Mapping[str, Any],
    cmpnt_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> AppDef:
    """Creates an AppDef by calling the component function with the given arguments.

    Args:
        cmpnt_fn: the component function
        cmpnt_args: CLI argv (``["--msg", "hi"]``) or a ``{name: value}`` dict (string values
            are parsed like the CLI; typed values are checked)
        cmpnt_defaults: string defaults (e.g. from ``.torchxconfig``) overriding the function's
        config: typed defaults overriding the function's

    Returns:
        The AppDef returned by the component.

    Raises:
        ComponentArgumentError: unknown, missing or malformed arguments
        ComponentValidationException: the function does not return an AppDef
    """
    if isinstance(cmpnt_args, Mapping):
        values = _values_from_dict(cmpnt_fn, cmpnt_args, cmpnt_defaults, config)
    else:
        values = vars(parse_args(cmpnt_fn, cmpnt_args, cmpnt_defaults, config))
    return _call(cmpnt_fn, values)
