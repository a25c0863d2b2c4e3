"""torchx_core.runtime.tracking: results by key on a local directory and on fsspec's memory fs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchx_core.runtime.tracking import FsspecResultTracker, ResultTracker
from torchx_core.runtime.tracking.api import ResultTrackerError
from torchx_core.specs.errors import TorchXError


@pytest.fixture(params=["dir", "memory"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "results") if request.param == "dir" else f"memory://rt-{tmp_path.name}"


def test_put_get_and_mapping_api(base: str) -> None:
    t = FsspecResultTracker(base)
    assert isinstance(t, ResultTracker)
    assert t.get("never") == {} and t[7] == {}
    t.put("trial/1", accuracy=0.93, epochs=3, note="ok")
    t[7] = {"loss/mean": 0.1, "loss/sem": 0.01}
    again = FsspecResultTracker(base)  # another process would see the same
    assert again["trial/1"] == {"accuracy": 0.93, "epochs": 3, "note": "ok"}
    assert again.get(7)["loss/sem"] == 0.01
    t[7] = {"loss/mean": 0.05}  # a later put replaces
    assert again[7] == {"loss/mean": 0.05}


def test_files_are_human_readable_json(tmp_path: Path) -> None:
    FsspecResultTracker(str(tmp_path))["run"] = {"a": 1}
    text = (tmp_path / "run").read_text()
    assert json.loads(text) == {"a": 1} and "\n" in text


@pytest.mark.parametrize(
    ("key", "results", "expected"),
    [
        ("", {"a": 1}, "not a non-empty int or str"),
        (1.5, {"a": 1}, "not a non-empty int or str"),
        ("k", {"a": [1, 2]}, "values are int, float or str"),
        ("k", {"a": True}, "values are int, float or str"),
        ("k", {"a": float("nan")}, "is not finite"),
        ("k", {"a": "x" * 1025}, "limit is 1024 bytes"),
    ],
)
def test_bad_keys_and_values_are_typed_errors(
    tmp_path: Path, key: object, results: dict[str, object], expected: str
) -> None:
    with pytest.raises(ResultTrackerError, match=expected) as e:
        FsspecResultTracker(str(tmp_path)).put(key, **results)  # type: ignore[arg-type]
    assert isinstance(e.value, TorchXError) and isinstance(e.value, ValueError)
    assert list(tmp_path.iterdir()) == []
