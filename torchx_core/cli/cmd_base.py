"""Base class of the ``torchx`` subcommands."""

from __future__ import annotations

import abc
import argparse


class SubCommand(abc.ABC):
    """One ``torchx`` subcommand: declares its arguments and runs.

    ``run`` returns the process exit code (``None`` means 0).
    """

    help: str = ""

    @abc.abstractmethod
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """Adds the subcommand's arguments to ``subparser``."""

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> int | None:
        """Runs the subcommand."""
