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
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "State: FAILED" in p.stdout


def test_ctrl_c_cancels_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import time

    # workers that integrate for minutes: the app is surely running when Ctrl-C arrives
    # (SIGINT handler set explicitly: a shell runs background jobs with SIGINT ignored, and
    # children inherit that, whatever started the test run)
    code = (
        "import signal, sys, examples.main_job as m\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        # the launcher says when it enters its wait: Ctrl-C is sent then, not after a guessed delay
        "_wait = m.Runner.wait\n"
        "def wait(self, *a, **k):\n"
        "    print('test: launcher waits', flush=True)\n"
        "    return _wait(self, *a, **k)\n"
        "m.Runner.wait = wait\n"
        "m.STEPS = 10**12\nsys.exit(m.main([]))\n"
    )
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))  # this process queries it too
    env = dict(os.environ)
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        first = p.stdout.readline()
        assert first.startswith("launched local_cwd://torchx/pi-"), first
        handle = first.split()[1]
        from torchx_core.runner import get_runner

        with get_runner(component_defaults={}) as runner:
            deadline = time.monotonic() + 60
            while (st := runner.status(handle)) is None or st.state.name != "RUNNING":
                assert time.monotonic() < deadline, st
                time.sleep(0.05)
            # the launcher's own output, in order: once it waits, Ctrl-C must cancel the app
            seen = [first]
            while "test: launcher waits\n" not in seen:
                line = p.stdout.readline()
                assert line, "the launcher ended before waiting: " + "".join(seen)
                seen.append(line)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
            out = "".join(seen) + out
            assert p.returncode == 1, out + err
            assert f"interrupted: cancelling {handle}" in out
            assert "State: CANCELLED" in out
            final = runner.status(handle)
            assert final is not None and final.state.name == "CANCELLED"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
