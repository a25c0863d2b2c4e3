"""``torchx cancel HANDLE``: cancel an app (no-op if it already ended; exit 1 if it is unknown).

An app whose status cannot be read (a garbled local status file) is cancelled anyway, as
``Runner.cancel`` does: the scheduler stops its processes.
"""

from __future__ import annotations

import argparse
import logging

from torchx_core.cli.cmd_base import SubCommand, searched

logger: logging.Logger = logging.getLogger(__name__)


class CmdCancel(SubCommand):
    help = "cancel an app"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the app handle to cancel")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.specs.errors import TorchXError

        with get_runner(component_defaults={}) as runner:
            try:
                status = runner.status(args.app_handle)
            except TorchXError:
                # e.g. an unreadable status file: Runner.cancel (TorchX's call, handle only)
                # stops the app anyway, saying why; an unknown scheduler raises there
                runner.cancel(args.app_handle)
                logger.info("cancel requested for %s", args.app_handle)
                return 0
            if status is None:
                logger.error(
                    "app %s does not exist%s (or was deleted); nothing to cancel."
                    " `torchx list -s SCHEDULER` shows the known apps",
                    args.app_handle,
                    searched(runner, args.app_handle),
                )
                return 1
            if status.is_terminal():
                logger.info(
                    "app %s already ended (%s); nothing to cancel", args.app_handle, status.state
                )
                return 0
            runner.cancel(args.app_handle)
        logger.info("cancel requested for %s", args.app_handle)
        return 0
