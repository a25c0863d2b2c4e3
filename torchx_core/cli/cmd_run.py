"""``torchx run``: run a component on a scheduler.

::

    torchx run [-s SCHEDULER] [-cfg k=v,...] [--dryrun] [--wait] [--log] [--workspace DIR]
               COMPONENT [COMPONENT_ARGS...]

On the local schedulers the command waits for the app and streams its logs (each line prefixed
``role/replica``); elsewhere it prints the handle and returns unless ``--wait``/``--log``.
Defaults for these options come from the ``[cli:run]`` section of ``.torchxconfig`` (which may
also name the ``component``); scheduler run options from the ``[<scheduler>]`` section.

``torchx run --stdin [--dryrun]`` reads the whole run as a JSON object from stdin instead
(TorchX's :class:`TorchXRunArgs` fields: ``component_name``, ``scheduler``, ``scheduler_args``,
``component_args``...); no other option may be given with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any, NoReturn

from torchx_core.cli.argparse_util import refuse_repeated
from torchx_core.cli.cmd_base import SubCommand
from torchx_core.specs.errors import ComponentArgumentError, TorchXError, did_you_mean
from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_core.cli.cmd_builtins import CmdBuiltins
    from torchx_core.runner import Runner
    from torchx_core.specs import AppDryRunInfo

logger: logging.Logger = logging.getLogger(__name__)

# TorchX's cmd_run exposes CmdBuiltins; loaded on first use (`torchx run` does not need it)
__getattr__, __dir__ = lazy_exports(
    __name__, {"CmdBuiltins": "torchx_core.cli.cmd_builtins"}, globals()
)

__all__ = [
    "LOCAL_SCHEDULER_WARNING_MSG",
    "MISSING_COMPONENT_ERROR_MSG",
    "CmdBuiltins",
    "CmdRun",
    "RunArgsError",
    "TorchXRunArgs",
    "parse_component_and_args",
    "torchx_run_args_from_argparse",
    "torchx_run_args_from_json",
]

DEFAULT_SCHEDULER = "local_cwd"

MISSING_COMPONENT_ERROR_MSG = (
    "missing component name, either provide it from the CLI or in .torchxconfig"
)
LOCAL_SCHEDULER_WARNING_MSG = (
    "the `local` scheduler is an alias of `local_cwd` kept for TorchX 0.7 users; use `local_cwd`"
)


class RunArgsError(TorchXError, ValueError):
    """A ``torchx run --stdin`` JSON object that cannot describe a run.

    ``args[0]`` is TorchX's message (tests compare it); the next args say what is valid.
    """

    def __str__(self) -> str:
        return " ".join(str(a) for a in self.args)


@dataclasses.dataclass
class TorchXRunArgs:
    """Everything ``torchx run`` needs, from the command line or a ``--stdin`` JSON object.

    ``component_args`` (a dict of keyword arguments) is used when ``component_args_str`` (CLI
    style, ``["--msg", "hi"]``) is empty; ``scheduler_args`` is the JSON form of the run options,
    ``scheduler_cfg`` their parsed form.
    """

    component_name: str
    scheduler: str
    scheduler_args: dict[str, Any]
    scheduler_cfg: dict[str, Any] = dataclasses.field(default_factory=dict)
    dryrun: bool = False
    wait: bool = False
    log: bool = False
    workspace: str = ""
    parent_run_id: str | None = None
    tee_logs: bool = False
    component_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    component_args_str: list[str] = dataclasses.field(default_factory=list)


def torchx_run_args_from_json(json_data: dict[str, Any]) -> TorchXRunArgs:
    """The run described by a JSON object (``torchx run --stdin``); an empty ``workspace``
    becomes the current directory, as in TorchX.

    Raises:
        RunArgsError: a required field is missing or a field is not a run field.
    """
    fields = {f.name: f for f in dataclasses.fields(TorchXRunArgs)}
    required = sorted(
        n
        for n, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    missing = [n for n in required if n not in json_data]
    if missing:
        raise RunArgsError(
            f"The following required fields are missing: {', '.join(missing)}",
            f"(the run JSON needs {', '.join(required)})",
        )
    extra = sorted(set(json_data) - set(fields))
    if extra:
        hint = did_you_mean(extra[0], list(fields))
        raise RunArgsError(
            f"The following fields are not part of the run command: {', '.join(extra)}.",
            f"{hint.strip()} Valid fields: {', '.join(fields)}".strip(),
        )
    run_args = TorchXRunArgs(**json_data)
    if run_args.workspace == "":
        run_args.workspace = os.getcwd()
    return run_args


def torchx_run_args_from_argparse(
    args: argparse.Namespace,
    component_name: str,
    component_args: list[str],
    scheduler_cfg: dict[str, Any],
) -> TorchXRunArgs:
    """The run described by ``torchx run``'s parsed command line."""
    return TorchXRunArgs(
        component_name=component_name,
        scheduler=args.scheduler,
        scheduler_args={},
        scheduler_cfg=scheduler_cfg,
        dryrun=args.dryrun,
        wait=args.wait,
        log=args.log,
        workspace=args.workspace,
        parent_run_id=args.parent_run_id,
        tee_logs=getattr(args, "tee_logs", False),
        component_args_str=component_args,
    )


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
        if self.dest in seen:  # `-s a --scheduler b` too
            refuse_repeated(parser, option_string)
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
    # bare dashes (``-``, ``--``, padded with spaces or not) are values, not options
    opts = [
        a.split("=", 1)[0] for a in before_sep if a.startswith("-") and a.strip() not in ("-", "--")
    ]
    repeated = sorted(k for k, n in Counter(opts).items() if n > 1)
    if repeated:
        raise ComponentArgumentError(
            f"component option(s) given more than once: {', '.join(repeated)}"
        )
    return component, args


def _parse_component_name_and_args(
    component_name_and_args: list[str],
    subparser: argparse.ArgumentParser,
    dirs: list[str] | None = None,
) -> tuple[str, list[str]]:
    """TorchX's form of :func:`parse_component_and_args`: the default component is the
    ``component`` of the ``[cli:run]`` section of ``.torchxconfig`` (looked up in ``dirs``, by
    default the usual places), and a problem ends the process through ``subparser.error``
    (exit 2, the message on stderr)."""
    from torchx_core.runner.config import get_config

    default = get_config("cli", "run", "component", dirs)
    try:
        return parse_component_and_args(component_name_and_args, default)
    except ComponentArgumentError as e:
        subparser.error(str(e))


class CmdRun(SubCommand):
    help = "run a component on a scheduler"

    def __init__(self) -> None:
        self._subparser: argparse.ArgumentParser | None = None

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        from torchx_core.runner.config import get_configs

        self._subparser = subparser
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
            "--tee_logs",
            action="store_true",
            help="prefix each streamed log line with its role/replica (TorchX's flag; the lines"
            " streamed here always carry that prefix)",
        )
        subparser.add_argument(
            "--stdin",
            action="store_true",
            help="read the run as a JSON object from stdin (component_name, scheduler,"
            " scheduler_args, component_args, ...); only --dryrun may be given with it",
        )
        subparser.add_argument(
            "component_name_and_args",
            nargs=argparse.REMAINDER,
            help="the component (builtin like `utils.echo`, `file.py:fn` or `module:fn`) and its"
            " arguments (`torchx run COMPONENT --help` shows them)",
        )

    def verify_no_extra_args(self, args: argparse.Namespace) -> None:
        """With ``--stdin``, refuses every other option given (``--dryrun`` aside): the JSON
        object describes the whole run (``parser.error``: exit 2, naming them)."""
        if not getattr(args, "stdin", False) or self._subparser is None:
            return
        given = [
            a.option_strings[-1] if a.option_strings else a.dest
            for a in self._subparser._actions
            if a.dest not in ("stdin", "help", "dryrun")
            and getattr(args, a.dest, None) not in (a.default, [])
        ]
        if given:
            self._subparser.error(
                f"cannot give {', '.join(given)} with --stdin: the JSON object on stdin describes"
                " the whole run"
            )

    def torchx_json_from_stdin(self, args: argparse.Namespace | None = None) -> dict[str, Any]:
        """The JSON object on stdin (``dryrun`` set when ``--dryrun`` was given).

        A bad input ends the command with ``parser.error`` (exit 2, saying why).
        """
        try:
            data = json.load(sys.stdin)
        except (json.JSONDecodeError, EOFError) as e:
            self._fail(f"--stdin: stdin is not valid JSON ({e}); give one JSON object")
        if not isinstance(data, dict):
            self._fail(
                f'--stdin: expected a JSON object ({{"component_name": ..., "scheduler":'
                f' ..., "scheduler_args": {{}}}}), got {type(data).__name__}'
            )
        if args is not None and args.dryrun:
            data["dryrun"] = True
        return data

    def _fail(self, message: str) -> NoReturn:
        if self._subparser is not None:
            self._subparser.error(message)
        raise RunArgsError(message)

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.specs import TORCHX_CONTEXT_NAME

        # as TorchX: the calling context, stamped into the metadata of what is launched
        os.environ[TORCHX_CONTEXT_NAME] = os.environ.get(TORCHX_CONTEXT_NAME, "cli_run")
        if getattr(args, "stdin", False):
            self.verify_no_extra_args(args)
            return self._run_args(self._from_stdin(args), raw=False)
        for key in getattr(self, "_unknown_config_keys", []):
            logger.warning(
                "`%s` in the [cli:run] section of .torchxconfig is not a `torchx run` option and"
                " is ignored.%s Valid keys: %s",
                key,
                did_you_mean(key, sorted(_CLI_RUN_KEYS)),
                ", ".join(sorted(_CLI_RUN_KEYS)),
            )
        try:
            component, component_args = parse_component_and_args(
                args.component_name_and_args, getattr(self, "_default_component", None)
            )
        except ComponentArgumentError as e:
            self._fail(str(e))
        own_args = component_args
        if "--" in component_args:
            own_args = component_args[: component_args.index("--")]
        if "--help" in own_args:
            from torchx_core.runner import get_runner

            with get_runner() as runner:
                runner.materialize_component(component, ["--help"])  # prints the help and exits
        run_args = torchx_run_args_from_argparse(args, component, component_args, {})
        return self._run_args(run_args, raw=args.raw, cfg_str=args.scheduler_args)

    def _from_stdin(self, args: argparse.Namespace) -> TorchXRunArgs:
        try:
            return torchx_run_args_from_json(self.torchx_json_from_stdin(args))
        except RunArgsError as e:
            self._fail(str(e))

    def _run_args(self, run: TorchXRunArgs, raw: bool, cfg_str: str | None = None) -> int:
        """Resolves the run options and runs (or dry-runs) ``run``; TorchX's errors for an
        unknown or invalid component and invalid run options end the command with exit 1."""
        from torchx_core.specs import InvalidRunConfigException
        from torchx_core.specs.errors import (
            ComponentNotFoundException,
            ComponentValidationException,
        )

        if run.scheduler == "local":
            logger.warning(LOCAL_SCHEDULER_WARNING_MSG)
        try:
            return self._launch(run, raw, cfg_str)
        except (ComponentNotFoundException, ComponentValidationException) as e:
            logger.error("cannot run component `%s`: %s", run.component_name, e)
            sys.exit(1)
        except InvalidRunConfigException as e:
            logger.error(
                "invalid run options: %s. Give them with `-cfg key1=value1,key2=value2` or in the"
                " [%s] section of .torchxconfig; `torchx runopts %s` lists them",
                e,
                run.scheduler,
                run.scheduler,
            )
            sys.exit(1)

    def _launch(self, run: TorchXRunArgs, raw: bool, cfg_str: str | None) -> int:
        """Runs ``run``; its run options come from ``cfg_str`` (``-cfg k=v,...``), else from
        ``run.scheduler_args`` (JSON), else ``run.scheduler_cfg``, completed by .torchxconfig."""
        from torchx_core.runner import get_runner
        from torchx_core.runner.config import apply

        component = run.component_name
        component_args: list[str] | dict[str, Any] = run.component_args_str or run.component_args
        with get_runner() as runner:
            scheduler = run.scheduler
            run_opts = runner.scheduler_run_opts(scheduler)
            if cfg_str:
                cfg = run_opts.cfg_from_str(cfg_str, strict=not run_opts.free_form)
            elif run.scheduler_args:
                cfg = run_opts.cfg_from_json_repr(json.dumps(run.scheduler_args))
            else:
                cfg = dict(run.scheduler_cfg)
            apply(scheduler, cfg, run_opts=run_opts)
            # `--workspace ""` means none; no --workspace at all: the current directory where
            # the scheduler builds images from a workspace
            workspace: str | None = run.workspace
            if (
                workspace is None
                and scheduler not in ("local_cwd", "local")
                and runner.supports_workspaces(scheduler)
            ):
                workspace = os.getcwd()
            workspace = workspace or None
            submit: dict[str, Any] = {
                "cfg": cfg,
                "workspace": workspace,
                "parent_run_id": run.parent_run_id,
            }
            if run.dryrun:
                _print_dryrun(
                    runner.dryrun_component(component, component_args, scheduler, **submit)
                )
                return 0
            app_handle = runner.run_component(component, component_args, scheduler, **submit)
            print(app_handle, flush=True)
            is_local = scheduler.startswith("local")
            if not (is_local or run.wait or run.log):
                logger.info("Launched app: %s", app_handle)
                return 0
            try:
                return self._wait(
                    runner, app_handle, log=is_local or run.log, local=is_local, raw=raw
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
