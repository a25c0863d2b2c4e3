"""``torchx delete HANDLE``: cancel an app if needed and remove what the scheduler keeps of it."""

from __future__ import annotations

import argparse
import logging

from torchx_core.cli.cmd_base import SubCommand

logger: logging.Logger = logging.getLogger(__name__)


class CmdDelete(SubCommand):
    help = "delete an app and what the scheduler keeps of it"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the app handle to delete")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.specs.errors import TorchXError

        with get_runner(component_defaults={}) as runner:
            try:
                known = runner.status(args.app_handle) is not None
            except TorchXError as e:  # e.g. an unreadable status: delete still stops and removes it
                logger.warning("%s", e)
                known = True
            if not known:
                logger.warning(
                    "app %s does not exist (or was already deleted); nothing to delete",
                    args.app_handle,
                )
                return 0
            runner.delete(args.app_handle)
        logger.info("deleted %s", args.app_handle)
        return 0
