"""``torchx configure [-s a,b] [--all] [--print]``: write a ``.torchxconfig`` template."""

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
            default="local_cwd",
            help="comma separated schedulers to write sections for (default: %(default)s);"
            " `all` for every registered scheduler",
        )
        subparser.add_argument(
            "--all", action="store_true", help="write every run option, not only the required ones"
        )
        subparser.add_argument(
            "--print", action="store_true", help="print the config instead of writing it"
        )
        subparser.add_argument(
            "--force", action="store_true", help="overwrite an existing ./.torchxconfig"
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner.config import CONFIG_FILE, ConfigError, dump

        schedulers = None
        if args.schedulers != "all":
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
        if os.path.exists(path) and not args.force:
            logger.error(
                "%s already exists; pass --force to overwrite it or --print to see the template",
                path,
            )
            return 1
        with open(path, "w", encoding="utf-8") as f:
            dump(f, schedulers, required_only=not args.all)
        logger.info("wrote %s", path)
        return 0
