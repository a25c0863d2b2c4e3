"""Cost of runner events per Runner call: no handler attached (the default) vs a handler.

Times ``Runner.status`` on an in-memory scheduler (so the event is most of what is measured)
and a bare ``with log_event(...)`` block, each with no handler on ``torchx-events-null`` and
with one attached; prints microseconds per call (best of several rounds).

    .venv/bin/python benchmarks/bench_runner_events.py [-n CALLS]
"""

from __future__ import annotations

import argparse
import logging
import timeit
from contextlib import nullcontext
from typing import Any

from torchx_core.runner import Runner
from torchx_core.runner.events import log_event
from torchx_core.schedulers.api import DescribeAppResponse, Scheduler
from torchx_core.specs import AppDef, AppDryRunInfo, AppState, runopts


class _MemoryScheduler(Scheduler[None]):
    """Describes every app as RUNNING without doing anything else."""

    def __init__(self, session_name: str, **_: Any) -> None:
        super().__init__("mem", session_name)

    def _run_opts(self) -> runopts:
        return runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Any) -> AppDryRunInfo[None]:
        return AppDryRunInfo(None, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[None]) -> str:
        return "app-0"

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        return DescribeAppResponse(app_id=app_id, state=AppState.RUNNING)

    def list(self, cfg: Any = None) -> list[Any]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass


class _Drop(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        record.getMessage()


def _best_usec(fn: Any, calls: int) -> float:
    return min(timeit.repeat(fn, number=calls, repeat=5)) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--calls", type=int, default=20000, help="calls per round")
    args = parser.parse_args()
    runner = Runner("bench", {"mem": _MemoryScheduler})
    handle = "mem://bench/app-0"

    def block() -> None:
        with log_event("status", "mem", "app-0"):
            pass

    def bare() -> None:
        with nullcontext():
            pass

    logger = logging.getLogger("torchx-events-null")
    rows = [("with nullcontext() (reference)", _best_usec(bare, args.calls))]
    rows.append(("with log_event(...), no handler", _best_usec(block, args.calls)))
    rows.append(
        ("Runner.status, no handler", _best_usec(lambda: runner.status(handle), args.calls))
    )
    handler = _Drop()
    logger.addHandler(handler)
    try:
        rows.append(("with log_event(...), a handler", _best_usec(block, args.calls // 10)))
        rows.append(
            (
                "Runner.status, a handler",
                _best_usec(lambda: runner.status(handle), args.calls // 10),
            )
        )
    finally:
        logger.removeHandler(handler)
    for name, usec in rows:
        print(f"{name:<36} {usec:8.2f} us/call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
