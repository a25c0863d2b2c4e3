"""``torchx list [-s SCHEDULER] [--json]``: the apps a scheduler knows, with their states."""

from __future__ import annotations

import argparse
import json

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
        subparser.add_argument("--json", action="store_true", help="print JSON lines")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner

        with get_runner(component_defaults={}) as runner:
            apps = runner.list(args.scheduler)
        if args.json:
            for a in apps:
                row = {"app_handle": a.app_handle, "app_id": a.app_id, "state": str(a.state)}
                print(json.dumps({**row, "name": a.name}))
            return 0
        from torchx_core.cli._term import format_table

        rows = [(a.app_handle, str(a.state), a.name) for a in apps]
        print(format_table((HANDLE_HEADER, STATUS_HEADER, NAME_HEADER), rows))
        return 0
