"""``torchx describe HANDLE``: the app definition of an app (as the scheduler recorded it)."""

from __future__ import annotations

import argparse
import logging
import sys

from torchx_core.cli.cmd_base import SubCommand

logger: logging.Logger = logging.getLogger(__name__)


class CmdDescribe(SubCommand):
    help = "show the app definition of an app"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the app handle to describe")
        subparser.add_argument("--json", action="store_true", help="print the AppDef as JSON")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner

        with get_runner(component_defaults={}) as runner:
            app = runner.describe(args.app_handle)
        if app is None:
            logger.error("app %s does not exist or has been removed", args.app_handle)
            sys.exit(1)  # as TorchX's `run`: a missing app exits 1
        if args.json:
            from torchx_core.specs import appdef_to_json

            print(appdef_to_json(app))
        else:
            import dataclasses
            import pprint

            pprint.pprint(dataclasses.asdict(app), indent=2, width=100)
        return 0
