"""The README's main job (`python -m examples.main_job`) runs end to end on the local scheduler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.local]


def test_main_job_runs_streams_logs_and_succeeds(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path / "root")}
    p = subprocess.run(
        [sys.executable, "-m", "examples.main_job"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert out.startswith("launched local_cwd://torchx/pi-")
    for rank in range(3):
        assert f"worker/{rank} worker rank={rank}/3" in out
    assert "aggregate/0 aggregate: pi ~= 3.14159265" in out
    assert "State: SUCCEEDED" in out


def test_main_job_fails_loudly_when_a_worker_fails(tmp_path: Path) -> None:
    # a worker that cannot write its part fails the app: the launcher must exit non-zero
    code = (
        "import sys, examples.main_job as m\n"
        "m.tempfile.mkdtemp = lambda prefix='': '/nonexistent/dir'\n"
        "sys.exit(m.main([]))\n"
    )
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path / "root")}
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "State: FAILED" in p.stdout
