"""The public names TorchX users import from the tracking/runtime modules exist (as torchx_core)."""

from __future__ import annotations

import importlib
import inspect

import pytest

NAMES = {
    "torchx_core.tracker": ["app_run_from_env", "AppRun"],
    "torchx_core.tracker.api": [
        "TrackerSource",
        "TrackerArtifact",
        "AppRunTrackableSource",
        "Lineage",
        "TrackerBase",
        "tracker_config_env_var_name",
        "build_trackers",
        "trackers_from_environ",
        "AppRun",
        "ENV_TORCHX_TRACKERS",
        "ENV_TORCHX_PARENT_RUN_ID",
        "ENV_TORCHX_JOB_ID",
    ],
    "torchx_core.tracker.backend.fsspec": ["generate_filename", "FsspecTracker", "create"],
    "torchx_core.tracker.mlflow": ["MLflowTracker", "create_tracker"],
    "torchx_core.runtime.tracking": ["ResultTracker", "FsspecResultTracker"],
    "torchx_core.runtime.tracking.api": [
        "KeyType",
        "ResultType",
        "ResultTracker",
        "FsspecResultTracker",
    ],
    "torchx_core.distributed": [
        "local_rank",
        "local_cuda_device",
        "local_device",
        "rank",
        "world_size",
        "is_rank0",
        "is_local_rank0",
        "Backend",
        "init_pg",
        "on_rank0_first",
        "on_local_rank0_first",
    ],
    "torchx_core.cli.cmd_tracker": ["CmdTracker"],
    "torchx_core.runner.api": ["get_configured_trackers"],
}


@pytest.mark.parametrize("module", sorted(NAMES))
def test_names_exist(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in NAMES[module] if not hasattr(mod, n)]
    assert missing == []


def test_signatures_take_torchx_arguments() -> None:
    from torchx_core.tracker.api import AppRun, TrackerBase
    from torchx_core.tracker.backend.fsspec import FsspecTracker

    assert list(inspect.signature(TrackerBase.add_artifact).parameters) == [
        "self",
        "run_id",
        "name",
        "path",
        "metadata",
    ]
    assert list(inspect.signature(TrackerBase.sources).parameters) == [
        "self",
        "run_id",
        "artifact_name",
    ]
    assert list(inspect.signature(FsspecTracker.__init__).parameters) == ["self", "fs", "root_dir"]
    assert list(inspect.signature(AppRun.add_source).parameters) == [
        "self",
        "source_id",
        "artifact_name",
    ]
    assert list(AppRun.__dataclass_fields__) == ["id", "backends"]


def test_tracker_names_and_configs_from_environ_under_torchx_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TorchX's ``_extract_tracker_name_and_config_from_environ``: ``{name: config or None}``."""
    from torchx_core.tracker.api import _extract_tracker_name_and_config_from_environ as extract

    monkeypatch.delenv("TORCHX_TRACKERS", raising=False)
    assert extract() == {}
    monkeypatch.setenv("TORCHX_TRACKERS", "tracker1,tracker2")
    monkeypatch.setenv("TORCHX_TRACKER_TRACKER1_CONFIG", "myconfig.txt")
    monkeypatch.delenv("TORCHX_TRACKER_TRACKER2_CONFIG", raising=False)
    assert extract() == {"tracker1": "myconfig.txt", "tracker2": None}


def test_fsspec_run_dir_names_are_torchx_encoding() -> None:
    """TorchX's run directory name is the base32 of the run id (``_encode_torchx_run_id``)."""
    from torchx_core.tracker.backend.fsspec import _decode_torchx_run_id, _encode_torchx_run_id

    run_id = "kubernetes://session_id/app_id"
    assert _encode_torchx_run_id(run_id) == "NN2WEZLSNZSXIZLTHIXS643FONZWS33OL5UWIL3BOBYF62LE"
    assert _decode_torchx_run_id(_encode_torchx_run_id(run_id)) == run_id
