"""``torchx log [-t] [--regex R] [--streams S] SCHEDULER://[SESSION]/APP_ID[/ROLE[/IDS]]``.

Prints the logs of every replica of an app, of one role, or of some replicas of a role (``IDS``
is a comma separated list of replica indices). Each line is prefixed ``role/replica``.

TorchX's library functions are here too: :func:`get_logs` (what the command prints, to any
file), :func:`validate` and :func:`print_log_lines`, with TorchX's ``GREEN`` ``role/replica``
prefixes; as in TorchX, they log a bad identifier or role and call ``sys.exit(1)`` (use
:func:`parse_identifier` for a typed error instead).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import threading
import time
from queue import Queue
from typing import TYPE_CHECKING, TextIO

from torchx_core.cli._term import ENDC, GREEN
from torchx_core.cli._term import prefix_line as _prefix_line  # TorchX's name
from torchx_core.cli.cmd_base import SubCommand
from torchx_core.runner import get_runner
from torchx_core.specs import is_started
from torchx_core.specs.errors import MalformedAppHandleException

if TYPE_CHECKING:
    from torchx_core.runner import Runner
    from torchx_core.schedulers.api import Stream

__all__ = ["ENDC", "GREEN", "ID_FORMAT", "CmdLog", "get_logs", "print_log_lines", "validate"]

logger: logging.Logger = logging.getLogger(__name__)

ID_FORMAT = "SCHEDULER://[SESSION_NAME]/APP_ID[/ROLE_NAME[/REPLICA_IDS,...]]"
_ID_RE = re.compile(
    r"^(?P<sched>[\w.\-]+)://(?P<sess>[^/]*)/(?P<app>[^/]+)(?:/(?P<role>[^/]+)(?:/(?P<ids>\d+(?:,\d+)*,?))?)?$"
)


def parse_identifier(identifier: str) -> tuple[str, str | None, list[int] | None]:
    """Splits a log identifier into (app handle, role or None, replica ids or None); as in
    TorchX, it does not end with ``/``.

    Raises:
        MalformedAppHandleException: the identifier is not of the form ``ID_FORMAT``.
    """
    m = _ID_RE.match(identifier)
    if m is None:
        raise MalformedAppHandleException(identifier, f"a log selection has the form {ID_FORMAT}")
    handle = f"{m['sched']}://{m['sess']}/{m['app']}"
    ids = [int(i) for i in m["ids"].split(",") if i] if m["ids"] else None
    return handle, m["role"], ids


def validate(job_identifier: str) -> None:
    """Checks that ``job_identifier`` has the form :data:`ID_FORMAT`; if not, logs why and calls
    ``sys.exit(1)``, as TorchX."""
    _parse_or_exit(job_identifier)


def _parse_or_exit(identifier: str) -> tuple[str, str | None, list[int] | None]:
    """:func:`parse_identifier`, logging the error and calling ``sys.exit(1)`` (TorchX)."""
    try:
        return parse_identifier(identifier)
    except MalformedAppHandleException as e:
        logger.error("%s", e)
        sys.exit(1)


def print_log_lines(
    file: TextIO,
    runner: Runner,
    app_handle: str,
    role_name: str,
    replica_id: int,
    regex: str | None,
    should_tail: bool,
    exceptions: Queue[Exception],
    streams: Stream | None,
) -> None:
    """Writes one replica's log lines to ``file``, each prefixed ``GREEN role/replica ENDC``.

    A closed output (``BrokenPipeError``) ends it quietly; any other error is put on
    ``exceptions`` and raised.
    """
    prefix = f"{GREEN}{role_name}/{replica_id}{ENDC} "
    try:
        for line in runner.log_lines(
            app_handle, role_name, replica_id, regex, should_tail=should_tail, streams=streams
        ):
            try:
                print(_prefix_line(prefix, line), file=file, end="", flush=True)
            except BrokenPipeError:
                return
    except Exception as e:
        exceptions.put(e)
        raise


def _wait_for_app_started(runner: Runner, app_handle: str, interval: float = 1.0) -> bool:
    """Waits until the app has started: True then, False (with a warning) if it is unknown."""
    said = False
    while True:
        status = runner.status(app_handle)
        if status is None:
            logger.warning(
                "app `%s` not found: it does not exist or the app id is wrong", app_handle
            )
            return False
        if is_started(status.state):
            return True
        if not said:
            logger.info("Waiting for app state response before fetching logs...")
            said = True
        time.sleep(interval)


def get_logs(
    file: TextIO,
    identifier: str,
    regex: str | None,
    should_tail: bool = False,
    runner: Runner | None = None,
    streams: Stream | None = None,
) -> None:
    """Writes the logs of the replicas ``identifier`` selects (:data:`ID_FORMAT`) to ``file``.

    Without replica ids, waits for the app to start first (returns with a warning if the app is
    unknown) and reads every replica of the role (or of every role). One thread per replica;
    the first error of any replica is raised after all have finished, the others logged.
    ``identifier`` not of the form :data:`ID_FORMAT`, or a role the app does not have: logged,
    then ``sys.exit(1)``, as TorchX.
    """
    from torchx_core.cli._follow import LogSelectionError, role_replicas

    handle, role, ids = _parse_or_exit(identifier)
    runner = runner or get_runner()
    if ids is not None:
        replicas = [(role or "", i) for i in ids]
    else:
        if not _wait_for_app_started(runner, handle):
            return
        try:
            replicas = role_replicas(runner, handle, role)
        except LogSelectionError as bad_role:
            logger.error("%s", bad_role)
            sys.exit(1)
    exceptions: Queue[Exception] = Queue()
    threads = [
        threading.Thread(
            target=print_log_lines,
            args=(file, runner, handle, r, k, regex, should_tail, exceptions, streams),
            daemon=True,
        )
        for r, k in replicas
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [exceptions.get() for _ in range(exceptions.qsize())]
    for e in errors[1:]:
        logger.error("%s", e)
    if errors:
        raise errors[0]


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
