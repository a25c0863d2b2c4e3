"""``torchx schedulers``: the registered schedulers (built-ins and plugins)."""

from __future__ import annotations

import argparse

from torchx_core.cli.cmd_base import SubCommand


class CmdSchedulers(SubCommand):
    help = "list the registered schedulers"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.schedulers.registry import DEFAULT_SCHEDULER, default_registry

        registry = default_registry()
        builtins = set(registry.builtin_names())
        overridden = set(registry.overridden())
        for name in registry.names():
            tags = ["builtin" if name in builtins else "plugin"]
            if name in overridden:
                tags = ["plugin, overrides the builtin"]
            if name == DEFAULT_SCHEDULER:
                tags.append("default")
            print(f"{name:20s} ({', '.join(tags)})")
        for name, err in sorted(registry.plugin_errors().items()):
            print(f"{name:20s} (plugin, BROKEN: {err})")
        return 0
