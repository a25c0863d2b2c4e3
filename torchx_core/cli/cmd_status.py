"""``torchx status HANDLE [--roles a,b] [--json]``: the status of an app."""

from __future__ import annotations

import argparse
import json
import logging

from torchx_core.cli.cmd_base import SubCommand
from torchx_core.specs.errors import TorchXError

logger: logging.Logger = logging.getLogger(__name__)


class StatusSelectionError(TorchXError, ValueError):
    """``torchx status --roles`` names a role the app does not have."""


class CmdStatus(SubCommand):
    help = "show the status of an app"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "app_handle", help="the app handle (e.g. local_cwd://torchx/echo-abc123)"
        )
        subparser.add_argument(
            "--roles", default="", help="comma separated roles to show (default: all)"
        )
        subparser.add_argument(
            "--json", action="store_true", help="print the status as JSON"
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.runner import get_runner
        from torchx_core.specs import parse_app_handle

        scheduler, _, app_id = parse_app_handle(args.app_handle)
        roles = [r for r in args.roles.split(",") if r] or None
        with get_runner(component_defaults={}) as runner:
            status = runner.status(args.app_handle)
        if status is None:
            logger.error(
                "app %s does not exist or has been removed from %s", app_id, scheduler
            )
            return 1
        if roles is not None and status.roles:  # (no roles yet: nothing to check against)
            known = [r.role for r in status.roles]
            unknown = [r for r in roles if r not in known]
            if unknown:
                from torchx_core.specs.errors import did_you_mean

                raise StatusSelectionError(
                    f"app {args.app_handle} has no role(s) {', '.join(map(repr, unknown))}."
                    f"{did_you_mean(unknown[0], known)} Its roles: {', '.join(known) or '(none)'}"
                )
        if args.json:
            data = {"app_handle": args.app_handle, **status.to_json()}
            if roles is not None:
                data["roles"] = [r for r in data["roles"] if r["role"] in roles]
            print(json.dumps(data, indent=2))
        else:
            print(status.format(roles))
        return 0
