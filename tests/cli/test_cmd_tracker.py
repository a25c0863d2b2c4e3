"""``torchx tracker list ...`` over the fsspec tracker configured in .torchxconfig."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pytest

from torchx_core.cli.main import run_main
from torchx_core.tracker.backend.fsspec import FsspecTracker

RUN = "local_cwd://torchx/train-1"
CHILD = "local_cwd://torchx/eval-2"


@pytest.fixture
def tracker(
    isolated_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FsspecTracker:
    for key in list(os.environ):
        if key.startswith("TORCHX_TRACKER"):
            monkeypatch.delenv(key)
    root = tmp_path / "tracker-root"
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {root}\n")
    (isolated_config / ".torchxconfig").write_text(
        f"[torchx:tracker]\nfs = fsspec\n\n[tracker:fs]\nconfig = {conf}\n"
    )
    t = FsspecTracker(fsspec.filesystem("file"), str(root))
    t.add_metadata(RUN, lr=0.1, model="resnet")
    t.add_artifact(RUN, "model", "/ckpt/m.pt", {"step": 3})
    t.add_artifact(RUN, "tb", "/logs/tb")
    t.add_source(CHILD, RUN, "model")
    return t


def _lines(out: str) -> list[str]:
    return [line.rstrip() for line in out.splitlines()]


def test_list_jobs_and_children(tracker: FsspecTracker, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["tracker", "list", "jobs"]) == 0
    assert _lines(capsys.readouterr().out)[2:] == sorted([CHILD, RUN])
    assert run_main(["tracker", "list", "jobs", "--parent-run-id", RUN]) == 0
    assert _lines(capsys.readouterr().out) == ["JOB ID", "-" * len(CHILD), CHILD]


def test_list_metadata(tracker: FsspecTracker, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["tracker", "list", "metadata", RUN]) == 0
    out = _lines(capsys.readouterr().out)
    assert out[0].split() == ["ID", "VALUE"]
    assert sorted(line.split() for line in out[2:]) == [["lr", "0.1"], ["model", "resnet"]]
    assert run_main(["tracker", "list", "metadata", "--json", RUN]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["key"]: r["value"] for r in rows} == {"lr": 0.1, "model": "resnet"}


def test_list_artifacts_with_filter(
    tracker: FsspecTracker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["tracker", "list", "artifacts", "--json", RUN]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["name"] for r in rows) == ["model", "tb"]
    assert run_main(["tracker", "list", "artifacts", "--artifact", "model", RUN]) == 0
    out = _lines(capsys.readouterr().out)
    assert out[0].split() == ["ARTIFACT", "PATH", "METADATA"]
    assert out[2:] == ['model     /ckpt/m.pt  {"step": 3}']


def test_list_lineage(tracker: FsspecTracker, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["tracker", "list", "lineage", "--json", CHILD]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
        {"relation": "source", "run_id": RUN, "artifact": "model"}
    ]
    assert run_main(["tracker", "list", "lineage", RUN]) == 0
    assert _lines(capsys.readouterr().out)[2].split() == ["descendant", CHILD]


def test_unknown_tracker_name_is_a_clear_error(
    tracker: FsspecTracker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["tracker", "--tracker", "fss", "list", "jobs"]) == 1
    err = capsys.readouterr().err
    assert "--tracker 'fss' is not configured; configured trackers: fs. Did you mean: 'fs'?" in err


def test_no_trackers_configured(isolated_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["tracker", "list", "jobs"]) == 1
    assert "no trackers are configured" in capsys.readouterr().err


def test_tracker_without_subcommand_prints_help(
    isolated_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["tracker"]) == 2
    assert "list" in capsys.readouterr().out


def test_tracker_is_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_main(["--help"])
    assert "tracker" in capsys.readouterr().out
