"""The KFP example runs end to end (kfp.local + local scheduler) and compiles."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.local]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "kfp" / "pipeline.py"


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_example_runs_locally(local_apps: Path, tmp_path: Path) -> None:
    env = dict(os.environ)  # local_apps set TORCHX_LOCAL_ROOT
    proc = _run(
        ["run", "--message", "from-test", "--pipeline-root", str(tmp_path / "root")], tmp_path, env
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    last = [line for line in proc.stdout.splitlines() if line.startswith("last app: ")]
    assert len(last) == 1 and last[0].startswith("last app: local_cwd://")
    # both training replicas ran, and the report step echoed the training app's handle
    assert "[trainer/0] replica 0 done: from-test" in proc.stdout
    assert "[trainer/1] replica 1 done: from-test" in proc.stdout
    echoed = [
        line.split("] ", 1)[1]
        for line in proc.stdout.splitlines()
        if line.strip().startswith("[echo/0] ")
    ]
    assert len(echoed) == 1 and echoed[0].startswith("local_cwd://")
    assert re.search(r"/train-[0-9a-f]{10}-", echoed[0])  # named from the step's identity


def test_example_compiles_the_cluster_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.yaml"
    proc = _run(
        [
            "compile",
            "--output",
            str(out),
            "--image",
            "ghcr.io/acme/train:2",
            "--launcher-image",
            "ghcr.io/acme/torchx-kfp:2",
        ],
        tmp_path,
        dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    spec, platform = list(yaml.safe_load_all(out.read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"prepare", "torchx-launcher"}
    assert tasks["prepare"]["retryPolicy"]["maxRetryCount"] == 2
    assert tasks["torchx-launcher"]["dependentTasks"] == ["prepare"]
    executors = spec["deploymentSpec"]["executors"]
    assert executors["exec-prepare"]["container"]["resources"]["resourceMemoryLimit"] == "4096Mi"
    assert executors["exec-torchx-launcher"]["container"]["image"] == "ghcr.io/acme/torchx-kfp:2"
    assert executors["exec-prepare"]["container"]["image"] == "ghcr.io/acme/train:2"
    app = json.loads(
        tasks["torchx-launcher"]["inputs"]["parameters"]["app_json"]["runtimeValue"]["constant"]
    )
    assert app["roles"][0]["image"] == "ghcr.io/acme/train:2"
    shm = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-prepare"]
    assert shm["emptyDirMounts"][0]["mountPath"] == "/dev/shm"
