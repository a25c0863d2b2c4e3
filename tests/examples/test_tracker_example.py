"""The tracker example end to end: a real local app records its run through AppRun; the
``torchx tracker`` CLI and Python read it back (trackers configured only in .torchxconfig)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from torchx_core.tracker.api import AppRun
from torchx_core.tracker.backend.fsspec import FsspecTracker

REPO = Path(__file__).resolve().parents[2]
PARENT = "local_cwd://torchx/prepare-data"

pytestmark = [pytest.mark.integration, pytest.mark.local]


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    work, home, root = tmp_path / "work", tmp_path / "home", tmp_path / "tracker-root"
    work.mkdir()
    home.mkdir()
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {root}\n")
    (work / ".torchxconfig").write_text(
        f"[torchx:tracker]\nfsspec = fsspec\n\n[tracker:fsspec]\nconfig = {conf}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHX_", "TORCHXCONFIG"))}
    env.update(
        HOME=str(home),
        NO_COLOR="1",
        TORCHX_LOCAL_ROOT=str(tmp_path / "local-root"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        OMP_NUM_THREADS="1",
    )
    return work, env, root


def _torchx(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_app_records_metadata_read_back_by_cli_and_python(
    project: tuple[Path, dict[str, str], Path],
) -> None:
    work, env, root = project
    run = _torchx(
        work,
        env,
        "run",
        "--scheduler",
        "local_cwd",
        "--wait",
        "--parent_run_id",
        PARENT,
        "utils.python",
        "--script",
        str(REPO / "examples" / "tracker" / "main.py"),
        "--",
        "--epochs",
        "2",
        "--save-model",
        "--tb-log-path",
        str(work / "tb"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    handle = re.search(r"local_cwd://torchx/[\w-]+", run.stdout + run.stderr).group(0)  # type: ignore[union-attr]

    md = _torchx(work, env, "tracker", "list", "metadata", "--json", handle)
    assert md.returncode == 0, md.stderr
    values = {r["key"]: r["value"] for r in map(json.loads, md.stdout.splitlines())}
    assert values["lr"] == 0.1 and values["gamma"] == 0.7 and values["batch_size"] == 64
    assert values["data_path"] == "data" and isinstance(values["final_loss"], float)

    arts = _torchx(work, env, "tracker", "list", "artifacts", handle)
    assert arts.returncode == 0, arts.stderr
    rows = sorted(line.split(None, 2) for line in arts.stdout.splitlines()[2:])
    assert rows == [["model", f"{work}/model.pt", '{"epochs": 2}'], ["tensorboard", f"{work}/tb"]]

    jobs = _torchx(work, env, "tracker", "list", "jobs", "--parent-run-id", PARENT)
    assert jobs.stdout.splitlines()[2:] == [handle]

    # Python: the same run through the backend and through AppRun
    backend = FsspecTracker(fsspec.filesystem("file"), str(root))
    assert backend.metadata(handle)["final_loss"] == values["final_loss"]
    assert backend.artifacts(handle)["model"].metadata == {"epochs": 2}
    assert Path(backend.artifacts(handle)["model"].path).is_file()
    run_ = AppRun(handle, [backend])
    assert [(s.parent.id, s.artifact_name) for s in run_.sources()] == [(PARENT, None)]
    assert [c.id for c in AppRun(PARENT, [backend]).children()] == [handle]


def test_example_runs_untracked_outside_torchx(tmp_path: Path) -> None:
    """Outside torchx the same script runs, its tracker calls are no-ops (as in TorchX)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHX_")}
    p = subprocess.run(
        [sys.executable, str(REPO / "examples" / "tracker" / "main.py"), "--epochs", "1"],
        cwd=tmp_path,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("epoch 1 loss ")


def test_torchx_example_imports_resolve_after_the_rename() -> None:
    """The torchx names TorchX's examples/apps/tracker/main.py imports, renamed to torchx_core."""
    code = (
        "import torchx_core.tracker as tracker\n"
        "r = tracker.app_run_from_env()\n"
        "r.add_metadata(batch_size=64); r.add_metadata(lr=1.0, gamma=0.7)\n"
        "r.add_artifact('tensorboard', '/tmp/tb'); r.add_artifact('model', '/tmp/m.pt')\n"
        "print(r.job_id())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHX_")}
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "<UNDEFINED>"
