"""``torchx tracker list {jobs,metadata,artifacts,lineage}``: read what apps recorded in trackers.

The tracker is the first one configured in ``.torchxconfig`` (``[torchx:tracker]``), or the one
named with ``--tracker``::

    torchx tracker list jobs [--parent-run-id RUN_ID]
    torchx tracker list metadata RUN_ID
    torchx tracker list artifacts [--artifact NAME] RUN_ID
    torchx tracker list lineage RUN_ID

``--json`` prints one JSON object per line instead of a table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from torchx_core.cli.cmd_base import SubCommand
from torchx_core.runner.api import get_configured_tracker_factories, get_configured_trackers
from torchx_core.tracker.api import TrackerError, build_trackers

if TYPE_CHECKING:
    from torchx_core.tracker.api import TrackerBase


class NoTrackerError(TrackerError, RuntimeError):
    """No tracker is configured to query (a ``RuntimeError``, as TorchX raises)."""


class CmdTracker(SubCommand):
    """Queries the data apps recorded through :class:`~torchx_core.tracker.api.AppRun`."""

    help = "list the jobs, metadata and artifacts recorded by trackers"

    def __init__(self) -> None:
        self._tracker_name: str | None = None
        self._parser: argparse.ArgumentParser | None = None

    @property
    def tracker(self) -> TrackerBase:
        """The tracker to query: ``--tracker NAME`` or the first configured one.

        Raises:
            NoTrackerError: no tracker is configured.
            TrackerError: ``--tracker`` names an unconfigured one, or it cannot be built.
        """
        from torchx_core.specs.errors import did_you_mean

        configured = get_configured_trackers()
        name = self._tracker_name or next(iter(configured), None)
        if name is not None and name not in configured:
            raise TrackerError(
                f"--tracker {name!r} is not configured; configured trackers:"
                f" {', '.join(configured) or 'none'}.{did_you_mean(name, configured)}"
            )
        factories = get_configured_tracker_factories()
        built = list(build_trackers({name: configured[name]}, factories=factories)) if name else []
        if not built:
            raise NoTrackerError(
                "no trackers are configured: add a [torchx:tracker] section to .torchxconfig"
                " (e.g. `fsspec = fsspec` and a [tracker:fsspec] section with `config = <file>`)"
                " or set TORCHX_TRACKERS"
            )
        return built[0]

    def _use(self, args: argparse.Namespace) -> None:
        self._tracker_name = getattr(args, "tracker", None)

    def add_list_job_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("--parent-run-id", help="only the runs derived from this run")

    def list_jobs_command(self, args: argparse.Namespace) -> None:
        self._use(args)
        kwargs = {"parent_run_id": args.parent_run_id} if args.parent_run_id else {}
        ids = list(self.tracker.run_ids(**kwargs))
        _print(args, ["JOB ID"], [[i] for i in ids], [{"run_id": i} for i in ids])

    def add_metadata_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("RUN_ID", help="the run (app handle)")

    def list_metadata_command(self, args: argparse.Namespace) -> None:
        self._use(args)
        md = self.tracker.metadata(args.RUN_ID)
        rows = [[str(k), _text(v)] for k, v in md.items()]
        _print(args, ["ID", "VALUE"], rows, [{"key": k, "value": v} for k, v in md.items()])

    def add_artifacts_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("--artifact", help="only the artifact of this name")
        subparser.add_argument("RUN_ID", help="the run (app handle)")

    def list_artifacts_command(self, args: argparse.Namespace) -> None:
        self._use(args)
        arts = [
            a
            for a in self.tracker.artifacts(args.RUN_ID).values()
            if not args.artifact or a.name == args.artifact
        ]
        rows = [[a.name, a.path, _text(a.metadata)] for a in arts]
        objs = [{"name": a.name, "path": a.path, "metadata": a.metadata} for a in arts]
        _print(args, ["ARTIFACT", "PATH", "METADATA"], rows, objs)

    def list_lineage_command(self, args: argparse.Namespace) -> None:
        self._use(args)
        lin = self.tracker.lineage(args.RUN_ID)
        rows = [["source", s.source_run_id, s.artifact_name or ""] for s in lin.sources]
        rows += [["descendant", d, ""] for d in lin.descendants]
        objs = [{"relation": r, "run_id": i, "artifact": a or None} for r, i, a in rows]
        _print(args, ["RELATION", "RUN ID", "ARTIFACT"], rows, objs)

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        self._parser = subparser
        subparser.add_argument(
            "--tracker", help="the configured tracker to query (default: the first configured)"
        )
        commands = subparser.add_subparsers(title="tracker subcommands", metavar="list")
        lister = commands.add_parser("list", help="list jobs, metadata, artifacts or lineage")
        kinds = lister.add_subparsers(
            title="what to list", metavar="{jobs,metadata,artifacts,lineage}"
        )
        table: dict[str, tuple[Callable[..., None], Callable[..., None] | None, str]] = {
            "jobs": (self.list_jobs_command, self.add_list_job_arguments, "the tracked runs"),
            "metadata": (
                self.list_metadata_command,
                self.add_metadata_arguments,
                "a run's metadata",
            ),
            "artifacts": (
                self.list_artifacts_command,
                self.add_artifacts_arguments,
                "a run's artifacts",
            ),
            "lineage": (self.list_lineage_command, self.add_metadata_arguments, "a run's lineage"),
        }
        for kind, (handler, add_args, help_text) in table.items():
            p = kinds.add_parser(kind, help=help_text, description=help_text)
            p.add_argument("--json", action="store_true", help="print JSON lines")
            if add_args is not None:
                add_args(p)
            # `func` as TorchX sets it (a parser of one's own calls `args.func(args)`)
            p.set_defaults(func=handler, tracker_func=handler)

    def run(self, args: argparse.Namespace) -> int:
        handler = getattr(args, "tracker_func", None)
        if handler is None:
            if self._parser is not None:
                self._parser.print_help()
            return 2
        handler(args)
        return 0


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _print(
    args: argparse.Namespace,
    headers: list[str],
    rows: list[list[str]],
    objs: Sequence[Mapping[str, object]],
) -> None:
    if args.json:
        for obj in objs:
            print(json.dumps(obj, default=str))
        return
    from torchx_core.cli._term import format_table

    print(format_table(headers, rows))
