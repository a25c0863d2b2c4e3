"""argparse actions for CLIs built on torchx (``torchx.cli.argparse_util``).

- :class:`torchxconfig` (and :class:`torchxconfig_run`, :class:`torchxconfig_list`): an option
  whose default comes from the ``[cli:<subcommand>]`` section of ``.torchxconfig`` (keyed by the
  option's ``dest``), else from ``add_argument(default=...)``; the command line wins over both,
  and an option found in the file is no longer required on the command line.
- :class:`ArgOnceAction`: an option that may be given at most once per parse.

Both refuse an option given twice in one parse: the usage and the reason on stderr, exit 1 (as
TorchX; argparse's own errors exit 2).
"""

from __future__ import annotations

import argparse
import sys
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn

__all__ = ["ArgOnceAction", "torchxconfig", "torchxconfig_list", "torchxconfig_run"]

# options already given in each parse, by namespace (freed with the namespace)
_seen_by_namespace: dict[int, set[str]] = {}


def _check_once(
    parser: argparse.ArgumentParser, namespace: argparse.Namespace, option_string: str | None
) -> None:
    if option_string is None:
        return
    key = id(namespace)
    seen = _seen_by_namespace.get(key)
    if seen is None:
        seen = _seen_by_namespace[key] = set()
        weakref.finalize(namespace, _seen_by_namespace.pop, key, None)
    if option_string in seen:
        refuse_repeated(parser, option_string)
    seen.add(option_string)


def refuse_repeated(parser: argparse.ArgumentParser, option_string: str | None) -> NoReturn:
    """Ends the parse of an option given twice: usage and reason on stderr, exit 1 (TorchX's
    code for it; argparse's own errors exit 2)."""
    parser.print_usage(sys.stderr)
    parser.exit(
        1, f"{parser.prog}: error: `{option_string}` is given more than once; give it once\n"
    )


class ArgOnceAction(argparse.Action):
    """An option that may be given at most once in one parse (``parser.error`` otherwise)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _check_once(parser, namespace, option_string)
        setattr(namespace, self.dest, values)


class torchxconfig(ArgOnceAction):
    """An option whose default is read from the ``[cli:<subcmd>]`` section of .torchxconfig.

    Args:
        subcmd: the subcommand whose section holds the defaults (``run`` -> ``[cli:run]``)
    """

    # the section of each subcommand, read once per process (TorchX's cache; tests clear it)
    _subcmd_configs: ClassVar[dict[str, dict[str, str]]] = {}

    def __init__(
        self,
        subcmd: str,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        if subcmd not in self._subcmd_configs:
            from torchx_core.runner import config

            self._subcmd_configs[subcmd] = config.get_configs(prefix="cli", name=subcmd)
        default = self._subcmd_configs[subcmd].get(dest, default)
        super().__init__(
            option_strings=option_strings,
            dest=dest,
            default=default,
            required=required and not default,
            **kwargs,
        )


class torchxconfig_run(torchxconfig):
    """:class:`torchxconfig` reading the ``[cli:run]`` section."""

    def __init__(
        self,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("run", dest, option_strings, required, default, **kwargs)


class torchxconfig_list(torchxconfig):
    """:class:`torchxconfig` reading the ``[cli:list]`` section."""

    def __init__(
        self,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("list", dest, option_strings, required, default, **kwargs)
