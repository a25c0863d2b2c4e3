"""Base class of the ``torchx`` subcommands."""

from __future__ import annotations

import abc
import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchx_core.runner import Runner


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


def searched(runner: Runner, handle: str) -> str:
    """``" in <where the scheduler looked>"`` for a "does not exist" message ("" if not said)."""
    try:
        scope = runner.lookup_scope(handle)
    except Exception:  # noqa: BLE001 - only a hint
        return ""
    return f" in {scope}" if scope else ""
