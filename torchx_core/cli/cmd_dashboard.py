"""``torchx dashboard [-s sched1,sched2] [--host 127.0.0.1] [--port N] [--token T]``: a web page
for every app of those schedulers (apps, one app, logs followed live, cancel/delete).

The web stack is imported here, inside :meth:`CmdDashboard.run`, never when another command runs.
"""

from __future__ import annotations

import argparse
import configparser
import os
import sys

from torchx_core.cli.cmd_base import SubCommand
from torchx_core.specs.errors import TorchXError

#: not 8265, the Ray dashboard's
DEFAULT_PORT = 8288


class DashboardArgumentError(TorchXError, ValueError):
    """A bad ``torchx dashboard`` argument."""

    permanent = True


def _engine_urls(values: list[str]) -> dict[str, str]:
    from torchx_core.dashboard import ENGINES

    out: dict[str, str] = {}
    for v in values:
        engine, sep, url = v.partition("=")
        if not sep or engine not in ENGINES or not url.startswith(("http://", "https://")):
            raise DashboardArgumentError(
                f"--engine-url {v!r} must be ENGINE=http(s)://... with ENGINE one of"
                f" {', '.join(ENGINES)}, e.g. --engine-url airflow=http://localhost:8080"
            )
        out[engine] = url.rstrip("/")
    return out


def configured_schedulers(known: list[str]) -> list[str]:
    """``local_cwd`` plus every scheduler with a section in the ``.torchxconfig`` files."""
    from torchx_core.runner.config import find_configs

    found = ["local_cwd"]
    for path in find_configs():
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        found += [s for s in parser.sections() if s in known]
    return list(dict.fromkeys(found))


class CmdDashboard(SubCommand):
    help = "serve a web page of every app on the schedulers (apps, logs, cancel)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--schedulers",
            default="",
            help="comma-separated schedulers to show (default: local_cwd plus those with a"
            " .torchxconfig section)",
        )
        subparser.add_argument(
            "--host",
            default="127.0.0.1",
            help=(
                "address to bind (default: %(default)s); any non-loopback address requires a token"
            ),
        )
        subparser.add_argument(
            "--port",
            type=int,
            default=DEFAULT_PORT,
            help="port (default: %(default)s; 0: any free port)",
        )
        subparser.add_argument(
            "--token",
            default=os.environ.get("TORCHX_DASHBOARD_TOKEN") or None,
            help="the token every request must carry (default $TORCHX_DASHBOARD_TOKEN; on a"
            " non-loopback --host one is generated and printed when not given)",
        )
        subparser.add_argument(
            "--refresh",
            type=float,
            default=2.0,
            help="seconds between two reads of a scheduler (default: %(default)s)",
        )
        subparser.add_argument(
            "--engine-url",
            action="append",
            default=[],
            metavar="ENGINE=URL",
            help="base URL of an engine UI for owner links: airflow=..., prefect=..., kfp=..."
            " (repeatable)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from torchx_core.dashboard import Settings, is_loopback, new_token, serve
        from torchx_core.runner import config, get_runner
        from torchx_core.specs import CfgVal

        if args.refresh <= 0:
            raise DashboardArgumentError(f"--refresh must be > 0 seconds, got {args.refresh}")
        loopback = is_loopback(args.host)
        token = args.token or (None if loopback else new_token())
        with get_runner(component_defaults={}) as runner:
            known = runner.scheduler_backends()
            wanted = [s.strip() for s in args.schedulers.split(",") if s.strip()]
            unknown = [s for s in wanted if s not in known]
            if unknown:
                raise DashboardArgumentError(
                    f"unknown scheduler(s) {', '.join(unknown)}; registered: {', '.join(known)}"
                )
            schedulers = wanted or configured_schedulers(known)
            cfgs = {}
            for s in schedulers:
                cfg: dict[str, CfgVal] = {}
                config.apply(s, cfg)
                cfgs[s] = cfg
            settings = Settings(
                schedulers=schedulers,
                token=token,
                loopback=loopback,
                refresh=args.refresh,
                engine_urls=_engine_urls(args.engine_url),
                cfgs=cfgs,
            )

            def ready(url: str) -> None:
                shown = f"{url}/?token={token}" if token else f"{url}/"
                print(f"torchx dashboard of {', '.join(schedulers)}: {shown}", flush=True)
                if token and not args.token:
                    print(f"token (generated): {token}", flush=True)
                sys.stdout.flush()

            serve(runner, settings, args.host, args.port, on_ready=ready)
        return 0
