"""``torchx log [-t] [--regex R] [--streams S] SCHEDULER://[SESSION]/APP_ID[/ROLE[/IDS]]``.

Prints the logs of every replica of an app, of one role, or of some replicas of a role (``IDS``
is a comma separated list of replica indices). Each line is prefixed ``role/replica``.
"""

from __future__ import annotations

import argparse
import re
import sys

from torchx_core.cli.cmd_base import SubCommand
from torchx_core.specs.errors import MalformedAppHandleException

ID_FORMAT = "SCHEDULER://[SESSION_NAME]/APP_ID[/ROLE_NAME[/REPLICA_IDS,...]]"
_ID_RE = re.compile(
    r"^(?P<sched>[\w.\-]+)://(?P<sess>[^/]*)/(?P<app>[^/]+)(?:/(?P<role>[^/]+)(?:/(?P<ids>\d+(?:,\d+)*,?))?)?/?$"
)


def parse_identifier(identifier: str) -> tuple[str, str | None, list[int] | None]:
    """Splits a log identifier into (app handle, role or None, replica ids or None).

    Raises:
        MalformedAppHandleException: the identifier is not of the form ``ID_FORMAT``.
    """
    m = _ID_RE.match(identifier)
    if m is None:
        raise MalformedAppHandleException(identifier, f"a log selection has the form {ID_FORMAT}")
    handle = f"{m['sched']}://{m['sess']}/{m['app']}"
    ids = [int(i) for i in m["ids"].split(",") if i] if m["ids"] else None
    return handle, m["role"], ids


class CmdLog(SubCommand):
    help = "print or follow the logs of an app"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        from torchx_core.schedulers.api import Stream

        subparser.add_argument("--regex", help="only lines matching this regular expression")
        subparser.add_argument(
            "-t", "--tail", action="store_true", help="follow the logs until the app ends"
        )
        subparser.add_argument(
            "--streams",
            choices=[s.value for s in Stream],
            default=None,
            help="which output streams (default: scheduler specific)",
        )
        subparser.add_argument(
            "--raw",
            action="store_true",
            help="write the apps' output as is; by default, on a terminal, control sequences"
            " other than colours (screen clears, window titles, clipboard writes) are shown"
            " escaped instead of obeyed",
        )
        subparser.add_argument("identifier", metavar=ID_FORMAT, help="what to print the logs of")

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.cli._follow import LogSelectionError, print_logs, role_replicas
        from torchx_core.runner import get_runner
        from torchx_core.schedulers.api import Stream

        handle, role, ids = parse_identifier(args.identifier)
        with get_runner(component_defaults={}) as runner:
            replicas = role_replicas(runner, handle, role)
            if ids is not None:
                valid = {k for _, k in replicas}
                bad = [i for i in ids if i not in valid]
                if bad:
                    raise LogSelectionError(
                        f"role {role!r} of {handle} has no replica(s) {bad}; valid: {sorted(valid)}"
                    )
                replicas = [(role, i) for i in ids]  # type: ignore[misc]  # role is set with ids
            print_logs(
                runner,
                handle,
                replicas,
                sys.stdout,
                regex=args.regex,
                should_tail=args.tail,
                streams=Stream(args.streams) if args.streams else None,
                raw=args.raw,
            )
        return 0
