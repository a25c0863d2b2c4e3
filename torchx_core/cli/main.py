"""``torchx``: the command line entry point.

Subcommands live in one module each (``cmd_<name>.py``) and only the one being run is imported;
``torchx --help`` imports none. Plugins add or replace subcommands through the
``torchx.cli.cmds`` entry point group (``name = "pkg.module:CmdClass"``, a
:class:`~torchx_core.cli.cmd_base.SubCommand` subclass); ``--help`` lists them, and a plugin that
fails to load is reported, never fatal. Running a built-in costs one cheap look at the declared
entry point names, no plugin import.

Errors from torchx-suite (:class:`~torchx_core.specs.TorchXError`) are printed as one clear
message, never as a traceback (``--log_level DEBUG`` shows the traceback). Exit codes: 2 for bad
command-line arguments (argparse's, an unknown scheduler, a bad component argument; as TorchX),
1 for any other error.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from torchx_core.util.entrypoints import load_group

__all__ = ["create_parser", "get_default_sub_cmds", "get_sub_cmds", "main", "run_main"]

logger: logging.Logger = logging.getLogger(__name__)

# name -> (module, class, one-line help). Order is the order shown by --help.
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("cmd_run", "CmdRun", "run a component on a scheduler"),
    "status": ("cmd_status", "CmdStatus", "show the status of an app"),
    "log": ("cmd_log", "CmdLog", "print or follow the logs of an app"),
    "list": ("cmd_list", "CmdList", "list the apps of a scheduler"),
    "describe": ("cmd_describe", "CmdDescribe", "show the app definition of an app"),
    "cancel": ("cmd_cancel", "CmdCancel", "cancel an app"),
    "delete": ("cmd_delete", "CmdDelete", "delete an app and what the scheduler keeps of it"),
    "builtins": ("cmd_builtins", "CmdBuiltins", "list the builtin components"),
    "runopts": ("cmd_runopts", "CmdRunopts", "show the run options of schedulers"),
    "configure": ("cmd_configure", "CmdConfigure", "write a .torchxconfig file"),
    "schedulers": ("cmd_schedulers", "CmdSchedulers", "list the registered schedulers"),
    "tracker": ("cmd_tracker", "CmdTracker", "list the jobs, metadata and artifacts of trackers"),
    "dashboard": (
        "cmd_dashboard",
        "CmdDashboard",
        "serve a web page of every app (apps, logs, cancel)",
    ),
}

#: entry point group of subcommand plugins: ``name = "pkg.module:SubCommandClass"``
CMDS_GROUP = "torchx.cli.cmds"

sub_parser_description = "e.g. `torchx run -s local_cwd utils.echo --msg hi`"

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(value: str) -> str | int:
    """A level name (``DEBUG``) or, as TorchX takes it, a number (``10``)."""
    upper = value.strip().upper()
    if upper in _LOG_LEVELS:
        return upper
    if upper.isdigit():
        return int(upper)
    raise argparse.ArgumentTypeError(
        f"invalid log level {value!r}; choose from {', '.join(_LOG_LEVELS)} or a number"
        " (10 = DEBUG, 20 = INFO, ...)"
    )


def _default_log_level() -> str | int:
    try:
        return _log_level(os.environ.get("LOGLEVEL", "INFO"))
    except argparse.ArgumentTypeError:
        return "INFO"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from torchx_core import __version__

        print(f"torchx-suite {__version__}")
        parser.exit()


def _find_subcommand(argv: Sequence[str]) -> str | None:
    """The first positional token of ``argv`` (skipping top-level options and their values)."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        if tok == "--log_level":
            skip = True
            continue
        if tok.startswith("-"):
            continue
        return tok
    return None


def _load_command(name: str) -> Any | None:
    """Imports and instantiates subcommand ``name`` (plugin or built-in); None if unknown.

    A ``torchx.cli.cmds`` plugin of the same name replaces the built-in. A plugin that fails
    to load is reported; a built-in of that name then runs instead.
    """
    from torchx_core.util.entrypoints import declared_names

    if name in declared_names(CMDS_GROUP):
        plugins, broken = _plugin_commands()
        if name in plugins:
            return plugins[name]()
        logger.warning(
            "the `%s` command plugin failed to load and is skipped: %s", name, broken.get(name)
        )
    entry = SUBCOMMANDS.get(name)
    if entry is None:
        return None
    import importlib

    module = importlib.import_module(f"torchx_core.cli.{entry[0]}")
    return getattr(module, entry[1])()


def _plugin_commands() -> tuple[dict[str, Any], dict[str, str]]:
    """The ``torchx.cli.cmds`` plugins: (name -> command class, name -> load error)."""
    from torchx_core.util.entrypoints import entry_points

    found: dict[str, Any] = {}
    broken: dict[str, str] = {}
    for ep in entry_points(CMDS_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the CLI
            broken[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
            logger.warning("CLI plugin `%s = %s` failed to load: %s", ep.name, ep.value, e)
    return found, broken


def _help_of(cls: Any) -> str:
    text = getattr(cls, "help", "") or (getattr(cls, "__doc__", "") or "").strip()
    return text.splitlines()[0] if text else ""


def _listed_commands() -> dict[str, str]:
    """Every subcommand for ``--help``: name -> one-line help (plugins included, and marked)."""
    names = {n: h for n, (_, _, h) in SUBCOMMANDS.items()}
    plugins, broken = _plugin_commands()
    for name, cls in plugins.items():
        verb = "replaces the built-in" if name in names else "plugin"
        names[name] = f"{_help_of(cls)} ({verb})".strip()
    for name, error in broken.items():
        names[name] = f"BROKEN plugin, not available: {error}"
    return names


def get_default_sub_cmds() -> dict[str, Any]:
    """The built-in subcommands, instantiated: name -> SubCommand."""
    import importlib

    return {
        name: getattr(importlib.import_module(f"torchx_core.cli.{mod}"), cls)()
        for name, (mod, cls, _) in SUBCOMMANDS.items()
    }


def get_sub_cmds() -> dict[str, Any]:
    """Built-in subcommands plus ``torchx.cli.cmds`` plugins (a plugin replaces a built-in).

    Plugins are read with this module's ``load_group`` (as in TorchX, whose users' tests patch
    ``torchx.cli.main.load_group``); one that fails to load, or is not a ``SubCommand``, is
    logged and skipped.
    """
    from torchx_core.cli.cmd_base import SubCommand

    cmds = get_default_sub_cmds()
    for name, load in load_group(CMDS_GROUP).items():
        try:
            cmd = load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the CLI
            logger.warning("CLI plugin `%s` failed to load and is skipped: %s", name, e)
            continue
        if not isinstance(cmd, SubCommand):
            logger.warning(
                "CLI plugin `%s` is skipped: it gives %s, not a SubCommand (name a SubCommand"
                " subclass in the `%s` entry point group)",
                name,
                type(cmd).__name__,
                CMDS_GROUP,
            )
            continue
        cmds[name] = cmd
    return cmds


def create_parser(
    selected: str | None = None,
    command: Any | None = None,
    listed: Mapping[str, str] | None = None,
) -> argparse.ArgumentParser:
    """Builds the parser; only subcommand ``selected`` gets its full arguments.

    ``listed`` (name -> one-line help) replaces the subcommands ``--help`` lists (default: the
    built-ins and the plugins).
    """
    parser = argparse.ArgumentParser(
        prog="torchx",
        description="torchx-suite: define, launch and manage jobs on any scheduler",
        epilog="Run `torchx <subcommand> --help` for the options of a subcommand.",
    )
    parser.add_argument(
        "--log_level",
        type=_log_level,
        default=_default_log_level(),
        help="Python logging level: DEBUG, INFO, WARNING, ERROR or a number (10 = DEBUG);"
        " default $LOGLEVEL or INFO",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(
        title="subcommands",
        description=sub_parser_description,
        dest="subcommand",
        metavar="<subcommand>",
    )
    if command is not None and selected is not None:
        # only the subcommand being run needs a parser (its name is already known to be valid)
        names = {selected: _help_of(command) or SUBCOMMANDS.get(selected, ("", "", ""))[2]}
    else:
        names = dict(listed) if listed is not None else _listed_commands()
    for name, help_text in names.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected and command is not None:
            command.add_arguments(sp)
            sp.set_defaults(func=command.run)
    return parser


def _configure_logging(level: str | int) -> tuple[logging.Logger, logging.Handler, bool, int]:
    """Sends torchx-suite's log records to stderr at ``level``; returns what to restore."""
    from torchx_core.cli._term import BLUE, ENDC, GRAY, use_color

    color = use_color(sys.stderr)
    fmt = (
        f"{BLUE}torchx{ENDC} {GRAY}%(asctime)s %(levelname)-8s{ENDC} %(message)s"
        if color
        else "torchx %(asctime)s %(levelname)-8s %(message)s"
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, datefmt="%Y-%m-%d %H:%M:%S"))
    pkg_logger = logging.getLogger("torchx_core")
    saved = (pkg_logger, handler, pkg_logger.propagate, pkg_logger.level)
    pkg_logger.addHandler(handler)
    pkg_logger.setLevel(level)
    pkg_logger.propagate = False
    return saved


def _restore_logging(saved: tuple[logging.Logger, logging.Handler, bool, int]) -> None:
    pkg_logger, handler, propagate, level = saved
    pkg_logger.removeHandler(handler)
    pkg_logger.propagate = propagate
    pkg_logger.setLevel(level)


def run_main(
    subcmds_or_argv: Mapping[str, Any] | Sequence[str] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """Runs the CLI on ``argv`` and returns the exit code (argparse errors still exit).

    ``run_main(argv)``, or TorchX's ``run_main(subcmds, argv)`` for a CLI of one's own: then
    ``subcmds`` (name -> ``SubCommand``, e.g. ``get_sub_cmds()`` plus one's own) are the only
    subcommands.
    """
    subcmds: dict[str, Any] | None = None
    if isinstance(subcmds_or_argv, Mapping):
        subcmds = dict(subcmds_or_argv)
    elif argv is None:
        argv = subcmds_or_argv
    args_list = list(sys.argv[1:] if argv is None else argv)
    selected = _find_subcommand(args_list)
    if subcmds is None:
        command = _load_command(selected) if selected else None
        listed = None
    else:
        command = subcmds.get(selected) if selected else None
        listed = {name: _help_of(type(cmd)) for name, cmd in subcmds.items()}
    parser = create_parser(selected if command is not None else None, command, listed)
    args, unknown = parser.parse_known_args(args_list)
    if unknown:
        hint = ""
        if selected == "run":
            hint = (
                ". Component arguments go after the component name (`torchx run utils.echo"
                " --msg hi`); when the component comes from the [cli:run] section of"
                " .torchxconfig, put `--` before them (`torchx run -- --msg hi`)"
            )
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 1
    saved = _configure_logging(args.log_level)
    try:
        return _dispatch(args)
    finally:
        _restore_logging(saved)


def _dispatch(args: argparse.Namespace) -> int:
    from torchx_core.specs.errors import (
        ComponentArgumentError,
        TorchXError,
        UnknownSchedulerException,
    )

    try:
        rc = args.func(args)
    except (ComponentArgumentError, UnknownSchedulerException) as e:
        # bad command-line arguments: exit 2 like argparse (and TorchX)
        logger.debug("error details", exc_info=True)
        logger.error("%s", e)
        return 2
    except TorchXError as e:
        logger.debug("error details", exc_info=True)
        logger.error("%s", e)
        return 1
    except KeyboardInterrupt:
        logger.error("interrupted")
        return 130
    except SystemExit as e:  # a command that exits (TorchX's do on a missing app): its code
        if isinstance(e.code, str):
            logger.error("%s", e.code)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BrokenPipeError:
        # stdout closed early (e.g. `torchx log ... | head`): not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open as stdout: no error at exit
        return 0
    except (ValueError, TypeError, OSError) as e:
        # bad input surfacing from user code (components) or the file system
        logger.debug("error details", exc_info=True)
        logger.error("%s: %s", type(e).__name__, e)
        return 1
    except Exception as e:  # the CLI reports, it does not dump tracebacks
        logger.debug("error details", exc_info=True)
        logger.error(
            "unexpected error: %s: %s (re-run with `--log_level DEBUG` for the traceback)",
            type(e).__name__,
            e,
        )
        return 1
    return int(rc or 0)


def main(argv: Sequence[str] | None = None) -> None:
    """Console script ``torchx``: returns when the command succeeds (as TorchX's ``main``),
    exits with the command's code otherwise."""
    rc = run_main(argv)
    if rc:
        sys.exit(rc)


if __name__ == "__main__":
    main()
