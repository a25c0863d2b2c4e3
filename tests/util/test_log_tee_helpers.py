"""torchx_core.util.log_tee_helpers.tee_logs: every replica's lines, prefixed, into one stream."""

from __future__ import annotations

import io

import pytest
from support.fake_scheduler import JobTable, make_runner

from torchx_core.specs import AppDef, Role
from torchx_core.util.log_tee_helpers import tee_logs


def _runner_with_logs(table: JobTable) -> tuple[object, str]:
    runner = make_runner(table, steps=10**6)
    app = AppDef(
        "a",
        roles=[Role("w", "img", entrypoint="e", num_replicas=2), Role("m", "img", entrypoint="e")],
    )
    handle = runner.run(app, "fake")
    job = next(iter(table.jobs.values()))
    job.logs = {("w", 0): ["a0\n", "b0\n"], ("w", 1): ["a1\n"], ("m", 0): ["progress\r50%\n"]}
    return runner, handle


@pytest.mark.parametrize("colorize", [False, True])
def test_tee_logs_copies_every_replica_with_its_prefix(colorize: bool) -> None:
    runner, handle = _runner_with_logs(JobTable())
    out = io.StringIO()
    thread = tee_logs(out, handle, regex=None, runner=runner, colorize=colorize)
    thread.start()
    thread.join()
    g, e = ("\033[32m", "\033[0m") if colorize else ("", "")
    assert sorted(out.getvalue().split("\n")[:-1]) == sorted(
        [f"{g}w/0{e} a0", f"{g}w/0{e} b0", f"{g}w/1{e} a1", f"{g}m/0{e} progress\r{g}m/0{e} 50%"]
    )


def test_tee_logs_filters_by_regex() -> None:
    runner, handle = _runner_with_logs(JobTable())
    out = io.StringIO()
    thread = tee_logs(out, handle, regex="^a", runner=runner)
    thread.start()
    thread.join()
    assert sorted(out.getvalue().splitlines()) == ["w/0 a0", "w/1 a1"]
