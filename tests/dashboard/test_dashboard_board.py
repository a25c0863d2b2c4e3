"""A scheduler in trouble: Slurm's ``errors`` list is an error (a banner naming it, ``torchx list``
exits non-zero), and a scheduler that hangs leaves a page of the others' apps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from support.fake_scheduler import JobTable, make_runner

from torchx_core.dashboard._board import Board
from torchx_core.runner import Runner
from torchx_core.schedulers.slurm.scheduler import create_scheduler as create_slurm
from torchx_core.specs import AppDef, Role

SQUEUE_DOWN = json.dumps(
    {
        "jobs": [],
        "errors": [
            {
                "error": "Unable to contact slurm controller (connect failure)",
                "error_number": 1007,
                "source": "slurm_load_jobs",
            }
        ],
    }
)


def _controller_down(args: list[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
    if args[0] == "squeue":
        return subprocess.CompletedProcess(args, 0, SQUEUE_DOWN, "")
    return subprocess.CompletedProcess(args, 1, "", f"{args[0]}: error: connect failure")


def test_squeue_errors_are_a_banner_naming_slurm() -> None:
    runner = Runner("t", {"slurm": create_slurm}, scheduler_params={"run_cmd": _controller_down})
    with runner:
        rows, errors = Board(runner, ["slurm"]).rows()
    assert rows == []
    assert "Unable to contact slurm controller (connect failure) (error 1007)" in errors["slurm"]


class _Hanging:
    """A runner whose ``hang`` scheduler lists only once released (a stuck ``squeue``)."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.release = threading.Event()

    def shared_list(self, sched: str, cfg: Any = None) -> Any:
        if sched == "hang":
            self.release.wait(120)
            return []
        return self.inner.shared_list(sched, cfg)


def test_a_hanging_scheduler_leaves_a_page_of_the_others() -> None:
    table = JobTable()
    with make_runner(table) as inner:
        inner.run(AppDef("ok", [Role("trainer", "img", entrypoint="python")]), "fake")
        runner = _Hanging(inner)
        board = Board(runner, ["hang", "fake"], timeout=0.2)  # type: ignore[arg-type]
        try:
            rows, errors = board.rows()
            assert [r.name for r in rows] == ["ok"]
            assert "no answer after" in errors["hang"] and "no apps shown yet" in errors["hang"]
        finally:
            runner.release.set()
        board._snaps["hang"].reading.join(60)  # type: ignore[union-attr]
        rows, errors = board.rows()
        assert "hang" not in errors and board.reads("hang") == 1


def test_torchx_list_exits_non_zero_on_squeue_errors(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(f"#!/bin/sh\ncat <<'EOF'\n{SQUEUE_DOWN}\nEOF\n")
    (bin_dir / "sacct").write_text("#!/bin/sh\necho 'sacct: error: connect failure' >&2\nexit 1\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "list", "-s", "slurm"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0, out.stdout
    assert "Unable to contact slurm controller" in out.stderr
