"""``torchx status HANDLE [HANDLE ...] [--roles a,b] [--json]``: the status of apps."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING

from torchx_core.cli.cmd_base import SubCommand, searched
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from torchx_core.specs import AppStatus

logger: logging.Logger = logging.getLogger(__name__)


class StatusSelectionError(TorchXError, ValueError):
    """``torchx status --roles`` names a role the app does not have."""


class CmdStatus(SubCommand):
    help = "show the status of apps (several handles: one batched call per scheduler)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "app_handle", help="app handle (e.g. local_cwd://torchx/echo-abc123)"
        )
        subparser.add_argument(
            "more_handles",
            nargs="*",
            metavar="app_handle",
            help="more app handles (their statuses are read with one batched call per scheduler)",
        )
        subparser.add_argument(
            "--roles", default="", help="comma separated roles to show (default: all)"
        )
        subparser.add_argument(
            "--json",
            action="store_true",
            help="print the status as JSON, one line as TorchX prints it (several handles: a"
            " list of them, each with its app_handle)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.specs import parse_app_handle

        handles: list[str] = list(
            dict.fromkeys([args.app_handle, *getattr(args, "more_handles", [])])
        )
        for handle in handles:
            parse_app_handle(handle)  # a malformed handle fails before any scheduler is asked
        roles = [r for r in args.roles.split(",") if r] or None
        with get_runner(component_defaults={}) as runner:
            if len(handles) == 1:  # one handle: TorchX's call, `Runner.status`
                statuses = {handles[0]: runner.status(handles[0])}
            else:
                statuses = runner.status_many(handles)
            missing = [h for h, s in statuses.items() if s is None]
            for handle in missing:
                scheduler, _, app_id = parse_app_handle(handle)
                logger.error(
                    "app %s does not exist or has been removed from %s%s",
                    app_id,
                    scheduler,
                    searched(runner, handle),
                )
        found = {h: s for h, s in statuses.items() if s is not None}
        for handle, status in found.items():
            _check_roles(handle, status, roles)
        if args.json:
            if len(handles) == 1:  # TorchX's output: one line, AppStatus.to_json()
                for status in found.values():
                    print(json.dumps(status.to_json(roles)))
            elif found:
                print(json.dumps([{"app_handle": h, **s.to_json(roles)} for h, s in found.items()]))
        else:
            for i, (handle, status) in enumerate(found.items()):
                if len(handles) > 1:
                    print(("\n" if i else "") + f"== {handle}")
                print(status.format(roles))
        if missing:
            sys.exit(1)  # as TorchX's `run`: a missing app exits 1
        return 0


def _check_roles(handle: str, status: AppStatus, roles: list[str] | None) -> None:
    if roles is None or not status.roles:  # (no roles yet: nothing to check against)
        return
    known = [r.role for r in status.roles]
    unknown = [r for r in roles if r not in known]
    if unknown:
        from torchx_core.specs.errors import did_you_mean

        raise StatusSelectionError(
            f"app {handle} has no role(s) {', '.join(map(repr, unknown))}."
            f"{did_you_mean(unknown[0], known)} Its roles: {', '.join(known) or '(none)'}"
        )
