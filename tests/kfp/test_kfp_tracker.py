"""Tracker results on the launcher step (kfp.local): an app records through AppRun, the step
shows it as its ``tracker_metrics`` (dsl.Metrics) and ``tracker_artifacts`` outputs."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
from kfp import dsl

from torchx_core import specs
from torchx_kfp import launch

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.local]

RECORD = textwrap.dedent(
    """
    from torchx_core.tracker import app_run_from_env
    run = app_run_from_env()
    run.add_metadata(accuracy=0.9, epochs=2, model="mlp", converged=True)
    run.add_artifact("model", "/ckpt/model.pt", {"step": 7})
    """
)


def _app(name: str) -> specs.AppDef:
    return specs.AppDef(
        name,
        roles=[specs.Role("trainer", image="/", entrypoint=sys.executable, args=["-c", RECORD])],
    )


@pytest.fixture
def fsspec_tracker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The launcher side's tracker configuration, through the environment of the step."""
    for key in list(os.environ):
        if key.startswith(("TORCHX_TRACKER", "TORCHX_PARENT_RUN_ID")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "tracker-root"
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {root}\n")
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", str(conf))
    return root


def test_launcher_step_outputs_the_apps_tracker_results(
    kfp_local: Path, fsspec_tracker: Path
) -> None:
    class Outputs(NamedTuple):
        metrics: dsl.Metrics
        artifacts: dsl.Artifact
        handle: str

    @dsl.pipeline(name="kfp-tracker")
    def pipeline() -> Outputs:
        step = launch(_app("tracked"), wait_interval=0.1)
        return Outputs(
            step.outputs["tracker_metrics"],
            step.outputs["tracker_artifacts"],
            step.outputs["app_handle"],
        )

    out = pipeline().outputs
    assert out["metrics"].metadata == {"accuracy": 0.9, "epochs": 2.0}
    listing = {"model": {"path": "/ckpt/model.pt", "metadata": {"step": 7}}}
    assert out["artifacts"].metadata == {"app_handle": out["handle"], "artifacts": listing}
    assert json.loads(Path(out["artifacts"].path).read_text()) == listing


def test_without_a_tracker_the_outputs_are_empty(
    kfp_local: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith("TORCHX_TRACKER"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))

    @dsl.pipeline(name="kfp-untracked")
    def pipeline() -> dsl.Metrics:
        return launch(_app("untracked"), wait_interval=0.1).outputs["tracker_metrics"]

    assert pipeline().output.metadata == {}
