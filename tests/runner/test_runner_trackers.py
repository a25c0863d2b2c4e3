"""Launcher-side tracker configuration: .torchxconfig -> the tracking variables of every role."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.fake_scheduler import JobTable, make_factory

from torchx_core.runner import Runner, get_runner
from torchx_core.runner.api import get_configured_tracker_factories, get_configured_trackers
from torchx_core.specs import AppDef, Role, resource
from torchx_core.tracker.api import TrackerError

CONFIG = """
[torchx:tracker]
fsspec = fsspec
mlflow = torchx_core.tracker.mlflow:create_tracker

[tracker:fsspec]
config = /etc/tracker/fsspec.conf
"""


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    for key in list(os.environ):
        if key.startswith(("TORCHX_TRACKER", "TORCHX_PARENT_RUN_ID")):
            monkeypatch.delenv(key)
    return work


def _app() -> AppDef:
    return AppDef(
        "train",
        roles=[
            Role("trainer", image="/tmp", entrypoint="python", args=["-c", "pass"]),
            Role("reader", image="/tmp", entrypoint="python", env={"TORCHX_JOB_ID": "mine"}),
        ],
    )


def _runner() -> Runner:
    return Runner("sess", {"fake": make_factory(JobTable())})


def test_configured_trackers_from_torchxconfig(project: Path) -> None:
    (project / ".torchxconfig").write_text(CONFIG)
    assert get_configured_trackers() == {"fsspec": "/etc/tracker/fsspec.conf", "mlflow": None}
    assert get_configured_tracker_factories() == {
        "mlflow": "torchx_core.tracker.mlflow:create_tracker"
    }


def test_launcher_env_overrides_names_and_configs(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".torchxconfig").write_text(CONFIG)
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", "/other.conf")
    assert get_configured_trackers() == {"fsspec": "/other.conf"}


def test_dryrun_injects_the_tracking_variables_into_every_role(project: Path) -> None:
    (project / ".torchxconfig").write_text(CONFIG)
    info = _runner().dryrun(_app(), "fake", parent_run_id="local_cwd://s/prep")
    trainer, reader = info._app.roles  # type: ignore[union-attr]
    assert trainer.env == {
        "TORCHX_JOB_ID": "fake://sess/${app_id}",
        "TORCHX_PARENT_RUN_ID": "local_cwd://s/prep",
        "TORCHX_TRACKERS": "fsspec,mlflow",
        "TORCHX_TRACKER_FSSPEC_CONFIG": "/etc/tracker/fsspec.conf",
        "TORCHX_TRACKER_MLFLOW_FACTORY": "torchx_core.tracker.mlflow:create_tracker",
    }
    assert reader.env["TORCHX_JOB_ID"] == "mine"  # a value already set is kept
    assert reader.env["TORCHX_TRACKERS"] == "fsspec,mlflow"


def test_parent_run_id_from_the_launcher_env(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHX_PARENT_RUN_ID", "local_cwd://s/outer")
    info = _runner().dryrun(_app(), "fake")
    env = info._app.roles[0].env  # type: ignore[union-attr]
    assert env == {
        "TORCHX_JOB_ID": "fake://sess/${app_id}",
        "TORCHX_PARENT_RUN_ID": "local_cwd://s/outer",
    }


def test_only_the_job_id_is_injected_without_trackers(project: Path) -> None:
    """As TorchX 0.7.0: every app gets TORCHX_JOB_ID, trackers configured or not."""
    info = _runner().dryrun(_app(), "fake")
    assert info._app.roles[0].env == {"TORCHX_JOB_ID": "fake://sess/${app_id}"}  # type: ignore[union-attr]


def test_bad_tracker_name_fails_before_submission(project: Path) -> None:
    (project / ".torchxconfig").write_text("[torchx:tracker]\nmy-tracker = pkg:create\n")
    table = JobTable()
    runner = Runner("sess", {"fake": make_factory(table)})
    with pytest.raises(TrackerError, match="my-tracker"):
        runner.run(_app(), "fake")
    assert table.jobs == {}


def test_job_id_macro_is_resolved_by_the_scheduler(project: Path) -> None:
    """A scheduler substitutes ${app_id} in the injected TORCHX_JOB_ID (kubernetes dryrun, pure)."""
    (project / ".torchxconfig").write_text(CONFIG)
    app = _app()
    for role in app.roles:
        role.resource = resource(cpu=1, memMB=512)
    with get_runner() as runner:
        info = runner.dryrun(app, "kubernetes", cfg={"queue": "default"})
    text = str(info)
    assert "TORCHX_TRACKERS" in text
    assert "kubernetes://torchx/train-" in text and "${app_id}" not in text
