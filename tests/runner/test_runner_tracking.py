"""torchx_core.runner.tracking: an app's tracker results read back by handle (launcher side)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import fsspec
import pytest

from torchx_core.runner import TrackerResults, tracker_results
from torchx_core.tracker.backend.fsspec import FsspecTracker

APP = "local_cwd://torchx/train-7"


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("TORCHX_TRACKER"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    return tmp_path


def _configure(project: Path) -> FsspecTracker:
    conf = project / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {project / 'root'}\n")
    (project / ".torchxconfig").write_text(
        f"[torchx:tracker]\nfs = fsspec\n\n[tracker:fs]\nconfig = {conf}\n"
    )
    return FsspecTracker(fsspec.filesystem("file"), str(project / "root"))


def test_none_without_trackers() -> None:
    assert tracker_results(APP) is None


def test_none_when_the_app_recorded_nothing(project: Path) -> None:
    _configure(project)
    assert tracker_results(APP) is None


def test_results_of_an_app(project: Path) -> None:
    backend = _configure(project)
    backend.add_metadata(APP, lr=0.1, epochs=3, fused=True, model="resnet", nan=float("nan"))
    backend.add_artifact(APP, "model", "/ckpt/m.pt", {"step": 3})
    res = tracker_results(APP)
    assert isinstance(res, TrackerResults)
    assert (res.app_handle, res.tracker) == (APP, "fs")
    assert res.metrics() == {"lr": 0.1, "epochs": 3.0}
    assert res.rows()[:2] == [("metadata", "lr", "0.1"), ("metadata", "epochs", "3")]
    assert res.rows()[-1] == ("artifact", "model", "/ckpt/m.pt")
    assert res.to_json()["artifacts"] == {"model": {"path": "/ckpt/m.pt", "metadata": {"step": 3}}}
    assert res.to_json()["metadata"]["model"] == "resnet"  # type: ignore[index]


def test_unreadable_tracker_is_a_warning_not_an_error(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (project / ".torchxconfig").write_text(
        "[torchx:tracker]\nfs = fsspec\n\n[tracker:fs]\nconfig = /no/such/file.conf\n"
    )
    with caplog.at_level(logging.WARNING, logger="torchx_core.runner.tracking"):
        assert tracker_results(APP) is None
    assert "could not read tracker results of local_cwd://torchx/train-7" in caplog.text
    assert "/no/such/file.conf" in caplog.text


def test_unknown_tracker_name(project: Path, caplog: pytest.LogCaptureFixture) -> None:
    _configure(project)
    with caplog.at_level(logging.WARNING, logger="torchx_core.runner.tracking"):
        assert tracker_results(APP, tracker="mlf") is None
    assert "tracker 'mlf' is not configured (configured: fs)" in caplog.text
