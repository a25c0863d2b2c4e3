"""``torchx list [-s SCHEDULER] [-cfg k=v,...] [--json]``: the apps a scheduler knows, with their
states (TorchX's ``-cfg``/``--scheduler_args`` and ``.torchxconfig`` run options select where to
look, e.g. a cluster or namespace)."""

from __future__ import annotations

import argparse
import json

from torchx_core.cli.argparse_util import ArgOnceAction
from torchx_core.cli.cmd_base import SubCommand

HANDLE_HEADER = "APP HANDLE"
STATUS_HEADER = "APP STATUS"
NAME_HEADER = "NAME"


class CmdList(SubCommand):
    help = "list the apps of a scheduler"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--scheduler",
            default="local_cwd",
            help="scheduler whose apps to list (default: %(default)s)",
        )
        subparser.add_argument(
            "-cfg",
            "--scheduler_args",
            action=ArgOnceAction,
            help="the scheduler's run options for the list, e.g. `cluster=foo,user=bar`"
            " (`torchx runopts SCHEDULER` lists them); the [SCHEDULER] section of .torchxconfig"
            " fills the others",
        )
        subparser.add_argument("--json", action="store_true", help="print JSON lines")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import config, get_runner
        from torchx_core.specs import CfgVal

        with get_runner(component_defaults={}) as runner:
            cfg: dict[str, CfgVal] = {}
            scheduler_args = getattr(args, "scheduler_args", None)
            if scheduler_args:
                cfg = dict(runner.scheduler_run_opts(args.scheduler).cfg_from_str(scheduler_args))
            config.apply(scheduler=args.scheduler, cfg=cfg)  # the command line wins
            apps = runner.list(args.scheduler, cfg or None)
        if args.json:
            for a in apps:
                row = {"app_handle": a.app_handle, "app_id": a.app_id, "state": str(a.state)}
                print(json.dumps({**row, "name": a.name}))
            return 0
        from torchx_core.cli._term import format_table

        rows = [(a.app_handle, str(a.state), a.name) for a in apps]
        print(format_table((HANDLE_HEADER, STATUS_HEADER, NAME_HEADER), rows))
        return 0
