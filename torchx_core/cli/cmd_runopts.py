"""``torchx runopts [SCHEDULER...]``: the run options (``-cfg`` keys) of schedulers."""

from __future__ import annotations

import argparse

from torchx_core.cli.cmd_base import SubCommand


class CmdRunopts(SubCommand):
    help = "show the run options of schedulers"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "scheduler", nargs="*", help="scheduler name(s) (default: every registered one)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.specs.errors import TorchXError

        with get_runner(component_defaults={}) as runner:
            names = args.scheduler or runner.scheduler_backends()
            single = len(names) == 1
            for name in names:
                if single:
                    # a single explicit scheduler: errors go to the top level (exit 1)
                    print(f"{name}:\n{runner.scheduler_run_opts(name)!r}\n")
                    continue
                try:
                    print(f"{name}:\n{runner.scheduler_run_opts(name)!r}\n")
                except (TorchXError, ImportError) as e:
                    print(f"{name}: unavailable ({e})\n")
        return 0
