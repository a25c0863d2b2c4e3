"""torchx_core.tracker.backend.fsspec: a real file system (local dir) and fsspec's memory fs."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

import fsspec
import pytest

from torchx_core.tracker.api import Lineage, TrackerArtifact, TrackerError, TrackerSource
from torchx_core.tracker.backend.fsspec import FsspecTracker, create, generate_filename

RUN = "local_cwd://torchx/trainer-abc"
PARENT = "local_cwd://torchx/prep-123"


@pytest.fixture(params=["file", "memory"])
def tracker(request: pytest.FixtureRequest, tmp_path: Path) -> FsspecTracker:
    if request.param == "file":
        return FsspecTracker(fsspec.filesystem("file"), str(tmp_path / "root"))
    fs = fsspec.filesystem("memory")
    root = f"/tracker-{generate_filename()}"
    return FsspecTracker(fs, root)


def test_metadata_later_values_win(tracker: FsspecTracker) -> None:
    assert tracker.metadata(RUN) == {}
    tracker.add_metadata(RUN, lr=0.1, model="resnet")
    tracker.add_metadata(RUN, lr=0.01, epochs=3)
    assert tracker.metadata(RUN) == {"lr": 0.01, "model": "resnet", "epochs": 3}


def test_artifacts(tracker: FsspecTracker) -> None:
    tracker.add_artifact(RUN, "model", "s3://b/model.pt", {"size": 10})
    tracker.add_artifact(RUN, "tb", "/logs/tb")
    assert tracker.artifacts(RUN) == {
        "model": TrackerArtifact("model", "s3://b/model.pt", {"size": 10}),
        "tb": TrackerArtifact("tb", "/logs/tb", None),
    }


def test_sources_descendants_lineage_and_run_ids(tracker: FsspecTracker) -> None:
    tracker.add_metadata(PARENT, stage="prep")
    tracker.add_source(RUN, PARENT)
    tracker.add_source(RUN, PARENT, "dataset")
    tracker.add_source(RUN, PARENT, "dataset")  # idempotent
    tracker.add_source(RUN, "external://exp/7", "baseline")
    assert sorted(tracker.sources(RUN), key=repr) == sorted(
        [
            TrackerSource("external://exp/7", "baseline"),
            TrackerSource(PARENT, None),
            TrackerSource(PARENT, "dataset"),
        ],
        key=repr,
    )
    assert list(tracker.sources(RUN, "dataset")) == [TrackerSource(PARENT, "dataset")]
    assert tracker.run_ids() == sorted([RUN, PARENT])
    assert tracker.run_ids(parent_run_id=PARENT) == [RUN]
    assert tracker.run_ids(parent_run_id=RUN) == []
    lin = tracker.lineage(PARENT)
    assert isinstance(lin, Lineage) and lin.descendants == [RUN] and lin.sources == []
    assert len(tracker.lineage(RUN).sources) == 3


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """Ranks of one job write metadata at the same moment: every key survives."""
    t = FsspecTracker(fsspec.filesystem("file"), str(tmp_path))
    start = threading.Barrier(8)

    def write(rank: int) -> None:
        start.wait()
        for i in range(10):
            t.add_metadata(RUN, **{f"rank{rank}_{i}": i})

    threads = [threading.Thread(target=write, args=(r,)) for r in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    md = t.metadata(RUN)
    assert len(md) == 80 and md["rank7_9"] == 9


def test_reads_a_torchx_written_layout(tmp_path: Path) -> None:
    """Directories written by TorchX's FsspecTracker (b32 run dirs, bare entries) read back."""
    run_dir = tmp_path / base64.b32encode(RUN.encode()).decode()
    (run_dir / "metadata").mkdir(parents=True)
    (run_dir / "metadata" / "1700000000000000000").write_text(json.dumps({"metadata": {"a": 1}}))
    (run_dir / "sources").mkdir()
    (run_dir / "sources" / base64.b32encode(PARENT.encode()).decode()).write_text("\n")
    t = FsspecTracker(fsspec.filesystem("file"), str(tmp_path))
    assert t.metadata(RUN) == {"a": 1}
    assert list(t.sources(RUN)) == [TrackerSource(PARENT, None)]
    assert t.run_ids(parent_run_id=PARENT) == [RUN]


def test_create_from_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "t.conf"
    conf.write_text(
        f"# tracker\nprotocol = file\nroot_path = {tmp_path / 'data'}\nauto_mkdir = True\n"
    )
    t = create(str(conf))
    assert isinstance(t, FsspecTracker)
    t.add_metadata(RUN, x=1)
    assert create(str(conf)).metadata(RUN) == {"x": 1}
    assert t._path_builder.root_dir == str(tmp_path / "data")  # TorchX's attribute


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("protocol = file\n", "lacks root_path"),
        ("root_path = /tmp/x\n", "lacks protocol"),
        ("protocol file\n", "is not `key = value`"),
        ("protocol = file\nroot_path = /x\na. = 1\n", "is not `name` or `a.b.c`"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, expected: str) -> None:
    conf = tmp_path / "t.conf"
    conf.write_text(text)
    with pytest.raises(TrackerError, match=expected):
        create(str(conf))


def test_missing_or_no_config(tmp_path: Path) -> None:
    with pytest.raises(TrackerError, match="does not exist"):
        create(str(tmp_path / "missing.conf"))
    with pytest.raises(TrackerError, match="needs a config file"):
        create(None)
