"""``torchx configure [-s a,b] [-a] [--print]``: write a ``.torchxconfig`` template.

As TorchX: every registered scheduler unless ``-s`` names some, required run options only
unless ``-a/--all``, and an existing ``./.torchxconfig`` is overwritten (we keep the previous
one as ``.torchxconfig.bak``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from torchx_core.cli.cmd_base import SubCommand

logger: logging.Logger = logging.getLogger(__name__)


class CmdConfigure(SubCommand):
    help = "write a .torchxconfig file"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--schedulers",
            default=None,
            help="comma separated schedulers to write sections for (default: every registered"
            " scheduler)",
        )
        subparser.add_argument(
            "-a",
            "--all",
            action="store_true",
            help="write every run option, not only the required ones",
        )
        subparser.add_argument(
            "--print", action="store_true", help="print the config instead of writing it"
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner.config import CONFIG_FILE, ConfigError, dump

        schedulers = None
        if args.schedulers is not None and args.schedulers != "all":
            schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
        if schedulers is not None:
            from torchx_core.schedulers import get_scheduler_factory

            if not schedulers:
                raise ConfigError(
                    f"-s/--schedulers {args.schedulers!r} names no scheduler; pass e.g."
                    " `-s local_cwd,slurm` or `-s all` (`torchx schedulers` lists them)"
                )
            for name in schedulers:
                get_scheduler_factory(name)  # unknown names fail with the valid ones listed
        if args.print:
            dump(sys.stdout, schedulers, required_only=not args.all)
            return 0
        path = os.path.join(os.getcwd(), CONFIG_FILE)
        if os.path.exists(path):
            os.replace(path, path + ".bak")
            logger.info("kept the previous %s as %s.bak", path, path)
        with open(path, "w", encoding="utf-8") as f:
            dump(f, schedulers, required_only=not args.all)
        logger.info("wrote %s", path)
        return 0
