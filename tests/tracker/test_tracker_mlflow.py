"""torchx_core.tracker.mlflow against a real MLflow tracking server on loopback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from torchx_core.tracker.api import TrackerError, TrackerSource

pytestmark = [pytest.mark.integration, pytest.mark.mlflow]


def _experiment() -> str:
    return f"torchx-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def tracker(mlflow_server: str):
    from torchx_core.tracker.mlflow import MLflowTracker

    t = MLflowTracker(experiment_name=_experiment(), tracking_uri=mlflow_server)
    yield t
    t.close()


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


RUN = "local_cwd://torchx/train-1"
PARENT = "local_cwd://torchx/prep-0"


def test_metadata_round_trip_as_run_tags(tracker, mlflow_server: str) -> None:
    tracker.add_metadata(RUN, lr=0.1, model="resnet", layers=[1, 2], fused=True)
    tracker.add_metadata(RUN, lr=0.01)
    assert tracker.metadata(RUN) == {"lr": 0.01, "model": "resnet", "layers": [1, 2], "fused": True}
    run = _client(mlflow_server).get_run(tracker.get_run_id(RUN))
    assert run.info.run_name == RUN and run.data.tags["model"] == "resnet"
    assert run.info.experiment_id == tracker.experiment_id
    with pytest.raises(TrackerError, match="reserved prefix"):
        tracker.add_metadata(RUN, **{"mlflow.user": "x"})


def test_reading_an_unknown_run_creates_nothing(tracker, mlflow_server: str) -> None:
    never = "local_cwd://torchx/never-ran"
    assert tracker.metadata(never) == {} and tracker.artifacts(never) == {}
    assert list(tracker.sources(never)) == [] and tracker.lineage(never).sources == []
    assert _client(mlflow_server).search_runs([tracker.experiment_id]) == []


def test_artifacts_upload_local_files_and_keep_references(
    tracker, mlflow_server: str, tmp_path: Path
) -> None:
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    tb = tmp_path / "tb"
    tb.mkdir()
    (tb / "events.1").write_text("e")
    tracker.add_artifact(RUN, "model", str(model), {"epoch": 3})
    tracker.add_artifact(RUN, "tensorboard", str(tb))
    tracker.add_artifact(RUN, "dataset", "s3://bucket/data/v1")
    arts = tracker.artifacts(RUN)
    assert set(arts) == {"model", "tensorboard", "dataset"}
    assert arts["model"].metadata == {"epoch": 3, "source_path": str(model)}
    assert arts["dataset"].path == "s3://bucket/data/v1"
    client = _client(mlflow_server)
    mlflow_run = tracker.get_run_id(RUN)
    assert [f.path for f in client.list_artifacts(mlflow_run, "model")] == ["model/model.pt"]
    assert [f.path for f in client.list_artifacts(mlflow_run, "tensorboard")] == [
        "tensorboard/events.1"
    ]
    local = client.download_artifacts(mlflow_run, "model/model.pt", str(tmp_path / "dl"))
    assert Path(local).read_bytes() == b"weights"
    assert arts["model"].path.endswith("/model")
    with pytest.raises(TrackerError, match="not a relative name"):
        tracker.add_artifact(RUN, "../x", str(model))


def test_parent_child_lineage_nests_runs(tracker, mlflow_server: str) -> None:
    tracker.add_metadata(PARENT, stage="prep")
    tracker.add_source(RUN, PARENT)
    tracker.add_source(RUN, PARENT)  # idempotent
    tracker.add_source(RUN, "s3://bucket/data/v1", "dataset")
    assert list(tracker.sources(RUN)) == [
        TrackerSource(PARENT, None),
        TrackerSource("s3://bucket/data/v1", "dataset"),
    ]
    assert list(tracker.sources(RUN, "dataset")) == [
        TrackerSource("s3://bucket/data/v1", "dataset")
    ]
    child = _client(mlflow_server).get_run(tracker.get_run_id(RUN))
    assert child.data.tags["mlflow.parentRunId"] == tracker.get_run_id(PARENT)
    assert tracker.run_ids() == sorted([RUN, PARENT])
    assert tracker.run_ids(parent_run_id=PARENT) == [RUN]
    lin = tracker.lineage(PARENT)
    assert lin.descendants == [RUN] and lin.sources == []


def test_concurrent_writers_share_one_run(mlflow_server: str) -> None:
    """Ranks of one job that start at once all write to the same MLflow run."""
    from torchx_core.tracker.mlflow import MLflowTracker

    name = _experiment()
    trackers = [MLflowTracker(experiment_name=name, tracking_uri=mlflow_server) for _ in range(4)]
    start = threading.Barrier(4)
    ids: list[str] = []

    def write(i: int) -> None:
        start.wait()
        trackers[i].add_metadata(RUN, **{f"rank{i}": i})
        ids.append(trackers[i].get_run_id(RUN))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1
    assert trackers[0].metadata(RUN) == {"rank0": 0, "rank1": 1, "rank2": 2, "rank3": 3}
    runs = _client(mlflow_server).search_runs([trackers[0].experiment_id])
    assert [r.info.run_id for r in runs] == ids[:1]
    for t in trackers:
        t.close()
    assert _client(mlflow_server).get_run(ids[0]).info.status == "FINISHED"


@dataclass
class _Opt:
    name: str = "sgd"
    lr: float = 0.1


@dataclass
class _Cfg:
    epochs: int = 2
    tags: list[str] = field(default_factory=lambda: ["a", "b"])
    opts: list[_Opt] = field(default_factory=lambda: [_Opt(), _Opt("adam", 0.01)])


def test_log_params_flat(tracker, mlflow_server: str) -> None:
    tracker.log_params_flat(RUN, _Cfg())
    params = _client(mlflow_server).get_run(tracker.get_run_id(RUN)).data.params
    assert params == {
        "epochs": "2",
        "tags": "['a', 'b']",
        "opts._0.name": "sgd",
        "opts._0.lr": "0.1",
        "opts._1.name": "adam",
        "opts._1.lr": "0.01",
    }


def test_create_tracker_from_uri_and_from_an_ini_section(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.tracker.mlflow import create_tracker

    name = _experiment()
    (tmp_path / ".torchxconfig").write_text(
        f"[tracker:mlflow]\nconfig = {tmp_path}\ntracking_uri = {mlflow_server}\n"
        f"experiment_name = {name}\n"
    )
    t = create_tracker(str(tmp_path))  # TorchX's form: a directory holding .torchxconfig
    assert (t.experiment_name, t.tracking_uri) == (name, mlflow_server)
    monkeypatch.setenv("TORCHX_TRACKING_EXPERIMENT_NAME", name + "-env")
    assert create_tracker(mlflow_server).experiment_name == name + "-env"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("/no/such/dir", "neither a tracking URI"),
        ("SECTIONLESS", "has no \\[tracker:mlflow\\] section"),
        ("UNKNOWN", "unknown keys \\['tracking_url'\\]"),
    ],
)
def test_bad_configs_are_typed_errors(tmp_path: Path, config: str, expected: str) -> None:
    from torchx_core.tracker.mlflow import create_tracker

    ini = tmp_path / "t.ini"
    if config == "SECTIONLESS":
        ini.write_text("[other]\na = 1\n")
        config = str(ini)
    elif config == "UNKNOWN":
        ini.write_text("[tracker:mlflow]\ntracking_url = http://x\n")
        config = str(ini)
    with pytest.raises(TrackerError, match=expected):
        create_tracker(config)


def test_a_real_local_app_tracks_to_mlflow(mlflow_server: str, tmp_path: Path) -> None:
    """Launcher config only: the app records through AppRun, `torchx tracker` reads MLflow."""
    name = _experiment()
    work = tmp_path / "work"
    work.mkdir()
    ini = tmp_path / "mlflow.ini"
    ini.write_text(f"[tracker:mlflow]\ntracking_uri = {mlflow_server}\nexperiment_name = {name}\n")
    (work / ".torchxconfig").write_text(
        f"[torchx:tracker]\nmlflow = mlflow\n\n[tracker:mlflow]\nconfig = {ini}\n"
    )
    (work / "model.pt").write_bytes(b"w")
    code = textwrap.dedent(
        """
        from torchx_core.tracker import app_run_from_env
        run = app_run_from_env()
        run.add_metadata(lr=0.5, optimizer="adam")
        run.add_artifact("model", "model.pt", {"step": 7})
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHX_", "MLFLOW_"))}
    env.update(
        HOME=str(tmp_path),
        NO_COLOR="1",
        TORCHX_LOCAL_ROOT=str(tmp_path / "root"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    )

    def torchx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "torchx_core.cli.main", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    run = torchx(
        "run", "-s", "local_cwd", "--wait", "--parent_run_id", PARENT, "utils.python", "-c", code
    )
    assert run.returncode == 0, run.stdout + run.stderr
    handle = re.search(r"local_cwd://torchx/[\w-]+", run.stdout + run.stderr).group(0)  # type: ignore[union-attr]
    md = torchx("tracker", "list", "metadata", "--json", handle)
    assert md.returncode == 0, md.stderr
    assert {r["key"]: r["value"] for r in map(json.loads, md.stdout.splitlines())} == {
        "lr": 0.5,
        "optimizer": "adam",
    }
    arts = torchx("tracker", "list", "artifacts", "--json", handle)
    (art,) = map(json.loads, arts.stdout.splitlines())
    assert art["name"] == "model" and art["metadata"]["step"] == 7
    client = _client(mlflow_server)
    (mlrun,) = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert mlrun.info.run_name == handle and mlrun.info.status == "FINISHED"
    assert json.loads(mlrun.data.tags["torchx.sources"]) == [[PARENT, None]]
    assert [f.path for f in client.list_artifacts(mlrun.info.run_id, "model")] == ["model/model.pt"]
