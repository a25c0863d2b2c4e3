"""The service scripts' shared helpers (scripts/services/common.sh)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "scripts" / "services"
SHARED_DAEMONS = [
    "docker/start.sh",
    "docker/registry-start.sh",
    "slurm/start.sh",
    "ray/start.sh",
    "mlflow/start.sh",
    "moto/start.sh",
]


def test_shared_daemon_env_drops_every_torchx_variable_and_keeps_the_rest(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TORCHX_LOCAL_ROOT": "/some/test/root",
        "TORCHX_X": "1",
        "KEEP_ME": "yes",
        "CI_RUN_DIR": str(tmp_path / "run"),
        "CI_STATE_DIR": str(tmp_path / "state"),
    }
    out = subprocess.run(
        ["bash", "-c", f'. "{SERVICES}/common.sh"; shared_daemon_env; env'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert not {n for n in names if n.startswith("TORCHX_")}
    assert "KEEP_ME" in names


@pytest.mark.parametrize("script", SHARED_DAEMONS)
def test_every_shared_daemon_starts_without_the_callers_torchx_env(script: str) -> None:
    # a daemon started from inside a test (or a user's shell) with TORCHX_LOCAL_ROOT set would
    # carry that root for its whole life and look like one of that root's replicas
    lines = (SERVICES / script).read_text().splitlines()
    sourced = lines.index('. "$HERE/../common.sh"')
    assert lines[sourced + 1] == "shared_daemon_env"
