"""``torchx builtins [--print NAME]``: the builtin components (or one's source)."""

from __future__ import annotations

import argparse
from typing import Any

from torchx_core.cli.cmd_base import SubCommand


class CmdBuiltins(SubCommand):
    help = "list the builtin components"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("--print", metavar="NAME", help="print the source of a builtin")

    def _builtins(self) -> dict[str, Any]:
        """The builtin components by name (TorchX's method of this command), as
        ``specs.finder.get_components()`` gives them."""
        from torchx_core.specs import finder

        return finder.get_components()

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.specs import finder

        if args.print:
            print(finder.get_builtin_source(args.print))
            return 0
        names = sorted(self._builtins())
        print(f"Found {len(names)} builtin components:")
        for i, name in enumerate(names, 1):
            print(f" {i:2d}. {name}")
        return 0
