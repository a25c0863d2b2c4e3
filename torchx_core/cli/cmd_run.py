"""``torchx run``: run a component on a scheduler.

::

    torchx run [-s SCHEDULER] [-cfg k=v,...] [--dryrun] [--wait] [--log] [--workspace DIR]
               COMPONENT [COMPONENT_ARGS...]

On the local schedulers the command waits for the app and streams its logs (each line prefixed
``role/replica``); elsewhere it prints the handle and returns unless ``--wait``/``--log``.
Defaults for these options come from the ``[cli:run]`` section of ``.torchxconfig`` (which may
also name the ``component``); scheduler run options from the ``[<scheduler>]`` section.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from torchx_core.cli.cmd_base import SubCommand
from torchx_core.specs.errors import ComponentArgumentError, did_you_mean

if TYPE_CHECKING:
    from torchx_core.runner import Runner
    from torchx_core.specs import AppDryRunInfo

logger: logging.Logger = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "local_cwd"

# the keys `torchx run` reads from the [cli:run] section of .torchxconfig
_CLI_RUN_KEYS = frozenset({"scheduler", "scheduler_args", "workspace", "component"})


class _Once(argparse.Action):
    """Stores the value; giving the option twice is an error (not a silent override)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        seen: set[str] = getattr(namespace, "_seen_once", set())
        if self.dest in seen:
            parser.error(f"{option_string} is given more than once")
        seen.add(self.dest)
        namespace._seen_once = seen
        setattr(namespace, self.dest, values)


def parse_component_and_args(
    remainder: list[str], default_component: str | None
) -> tuple[str, list[str]]:
    """Splits ``[component, *args]`` (or ``[*args]`` with a configured default component).

    Raises:
        ComponentArgumentError: no component given and none configured, or a component option
            is repeated.
    """
    args = list(remainder)
    if args and args[0] == "--":
        args = args[1:]
    component = default_component
    if args and not args[0].startswith("-"):
        component, args = args[0], args[1:]
    if not component:
        raise ComponentArgumentError(
            "no component given. Usage: `torchx run [options] COMPONENT [ARGS...]`, e.g."
            " `torchx run utils.echo --msg hi`; list the builtins with `torchx builtins`, or set"
            " `component = ...` in the [cli:run] section of .torchxconfig"
        )
    before_sep = args[: args.index("--")] if "--" in args else args
    opts = [a.split("=", 1)[0] for a in before_sep if a.startswith("-") and a not in ("-", "--")]
    repeated = sorted(k for k, n in Counter(opts).items() if n > 1)
    if repeated:
        raise ComponentArgumentError(
            f"component option(s) given more than once: {', '.join(repeated)}"
        )
    return component, args


class CmdRun(SubCommand):
    help = "run a component on a scheduler"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        from torchx_core.runner.config import get_configs

        defaults = get_configs("cli", "run")
        self._default_component = defaults.get("component")
        self._unknown_config_keys = sorted(set(defaults) - _CLI_RUN_KEYS)
        subparser.add_argument(
            "-s",
            "--scheduler",
            action=_Once,
            default=defaults.get("scheduler", DEFAULT_SCHEDULER),
            help="scheduler to run on (default: %(default)s; `torchx schedulers` lists them)",
        )
        subparser.add_argument(
            "-cfg",
            "--scheduler_args",
            action=_Once,
            default=defaults.get("scheduler_args"),
            help="scheduler run options as `k1=v1,k2=v2` (`torchx runopts SCHEDULER` lists them)",
        )
        subparser.add_argument(
            "--dryrun",
            action="store_true",
            help="print the app and the scheduler request without submitting",
        )
        subparser.add_argument("--wait", action="store_true", help="wait for the app to finish")
        subparser.add_argument(
            "--log", action="store_true", help="stream the app's logs while waiting"
        )
        subparser.add_argument(
            "--raw",
            action="store_true",
            help="stream the app's output as is; by default, on a terminal, control sequences"
            " other than colours are shown escaped instead of obeyed",
        )
        subparser.add_argument(
            "--workspace",
            action=_Once,
            default=defaults.get("workspace"),
            help="local project directory to mirror into the job; on schedulers that build"
            " images from a workspace (local_docker, kubernetes, ...) it defaults to the current"
            " directory, as in TorchX",
        )
        subparser.add_argument(
            "--parent_run_id",
            action=_Once,
            default=None,
            help="optional parent run id (groups runs for experiment tracking)",
        )
        subparser.add_argument(
            "component_name_and_args",
            nargs=argparse.REMAINDER,
            help="the component (builtin like `utils.echo`, `file.py:fn` or `module:fn`) and its"
            " arguments (`torchx run COMPONENT --help` shows them)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.runner.config import apply

        for key in getattr(self, "_unknown_config_keys", []):
            logger.warning(
                "`%s` in the [cli:run] section of .torchxconfig is not a `torchx run` option and"
                " is ignored.%s Valid keys: %s",
                key,
                did_you_mean(key, sorted(_CLI_RUN_KEYS)),
                ", ".join(sorted(_CLI_RUN_KEYS)),
            )
        component, component_args = parse_component_and_args(
            args.component_name_and_args, getattr(self, "_default_component", None)
        )
        with get_runner() as runner:
            scheduler = args.scheduler
            own_args = component_args
            if "--" in component_args:
                own_args = component_args[: component_args.index("--")]
            if "--help" in own_args:
                runner.materialize_component(component, ["--help"])  # prints the help and exits
            run_opts = runner.scheduler_run_opts(scheduler)
            cfg = (
                run_opts.cfg_from_str(args.scheduler_args, strict=not run_opts.free_form)
                if args.scheduler_args
                else {}
            )
            apply(scheduler, cfg, run_opts=run_opts)
            if (
                args.workspace is None
                and scheduler not in ("local_cwd", "local")
                and runner.supports_workspaces(scheduler)
            ):
                args.workspace = os.getcwd()
            submit: dict[str, Any] = {
                "cfg": cfg,
                "workspace": args.workspace,
                "parent_run_id": args.parent_run_id,
            }
            if args.dryrun:
                _print_dryrun(
                    runner.dryrun_component(component, component_args, scheduler, **submit)
                )
                return 0
            app_handle = runner.run_component(component, component_args, scheduler, **submit)
            print(app_handle, flush=True)
            is_local = scheduler.startswith("local")
            if not (is_local or args.wait or args.log):
                logger.info("Launched app: %s", app_handle)
                return 0
            try:
                return self._wait(
                    runner, app_handle, log=is_local or args.log, local=is_local, raw=args.raw
                )
            except KeyboardInterrupt:
                if is_local:
                    # a local app started in the foreground ends with its launcher's Ctrl-C
                    logger.warning("interrupted: cancelling %s", app_handle)
                    runner.cancel(app_handle)
                else:
                    logger.warning(
                        "interrupted: %s keeps running; `torchx cancel %s` stops it",
                        app_handle,
                        app_handle,
                    )
                return 130

    def _wait(
        self, runner: Runner, app_handle: str, log: bool, local: bool, raw: bool = False
    ) -> int:
        from torchx_core.cli._follow import exit_code, wait_with_logs

        logger.info("Waiting for the app to finish...")
        status = wait_with_logs(
            runner,
            app_handle,
            sys.stderr,
            log=log,
            raw=raw,
            quick_budget=0.3 if local else 0.0,
        )
        if status is None:
            logger.error("app %s disappeared from the scheduler while waiting", app_handle)
            return 1
        logger.info("Job finished: %s", status.state)
        rc = exit_code(status)
        if rc:
            logger.error("%s", status.format())
        return rc


def _print_dryrun(info: AppDryRunInfo[Any]) -> None:
    """Prints the app and the scheduler request of a dry run (as TorchX does)."""
    from dataclasses import asdict
    from pprint import pformat

    app = info.app
    if app is not None:
        print("\n=== APPLICATION ===\n" + pformat(asdict(app), indent=2, width=100))
    print("\n=== SCHEDULER REQUEST ===\n" + str(info))
