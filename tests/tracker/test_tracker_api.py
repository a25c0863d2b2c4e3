"""torchx_core.tracker.api: AppRun over backends, trackers built from the job's environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from trackers_fixture import RecordingTracker

from torchx_core import tracker
from torchx_core.specs.errors import TorchXError
from torchx_core.tracker.api import (
    AppRun,
    AppRunTrackableSource,
    Lineage,
    TrackerBase,
    TrackerError,
    build_trackers,
    tracker_config_env_var_name,
    tracker_factory_env_var_name,
    trackers_from_environ,
)
from torchx_core.tracker.backend.fsspec import FsspecTracker


def _fsspec_config(tmp_path: Path) -> Path:
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {tmp_path / 'root'}\n")
    return conf


def test_env_var_names_match_torchx() -> None:
    assert tracker_config_env_var_name("my_tracker") == "TORCHX_TRACKER_MY_TRACKER_CONFIG"
    assert tracker_factory_env_var_name("mlflow") == "TORCHX_TRACKER_MLFLOW_FACTORY"


def test_tracker_base_is_abstract() -> None:
    with pytest.raises(TypeError):
        TrackerBase()  # type: ignore[abstract]
    assert Lineage() == Lineage(run_id="", sources=[], descendants=[])


def test_no_trackers_configured_gives_none() -> None:
    assert list(trackers_from_environ()) == []


def test_builtin_fsspec_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", str(_fsspec_config(tmp_path)))
    (t,) = trackers_from_environ()
    assert isinstance(t, FsspecTracker)
    assert (tmp_path / "root").is_dir()


def test_module_factory_and_factory_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TRACKERS", "trackers_fixture:create,rec")
    monkeypatch.setenv("TORCHX_TRACKER_REC_FACTORY", "trackers_fixture")  # module -> its `create`
    monkeypatch.setenv("TORCHX_TRACKER_REC_CONFIG", "cfg-of-rec")
    first, second = trackers_from_environ()
    assert isinstance(first, RecordingTracker) and first.config is None
    assert isinstance(second, RecordingTracker) and second.config == "cfg-of-rec"


def test_explicit_factories_win_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TRACKER_REC_FACTORY", "no.such.module:create")
    (t,) = build_trackers({"rec": "x"}, factories={"rec": "trackers_fixture:create"})
    assert isinstance(t, RecordingTracker) and t.config == "x"


def test_unknown_factory_is_a_typed_error_with_the_known_entry_points() -> None:
    with pytest.raises(TrackerError) as e:
        build_trackers({"fspec": None})
    msg = str(e.value)
    assert "fspec" in msg and "fsspec" in msg and "[torchx:tracker]" in msg
    assert isinstance(e.value, TorchXError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("trackers_fixture:missing", "has no `missing`"),
        ("trackers_fixture:NOT_CALLABLE", "not a callable factory"),
        ("trackers_fixture:broken", "cannot reach the tracking service at cfg"),
    ],
)
def test_bad_factories_are_typed_errors(factory: str, expected: str) -> None:
    with pytest.raises(TrackerError, match=expected):
        build_trackers({"t": "cfg"}, factories={"t": factory})


def test_bad_tracker_names_in_env_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TRACKERS", "ok,not ok")
    with pytest.raises(TrackerError, match="'not ok'"):
        trackers_from_environ()


def test_run_from_env_outside_torchx_is_a_noop_singleton() -> None:
    run = tracker.app_run_from_env()
    assert run.job_id() == "<UNDEFINED>"
    assert list(run.backends) == []
    run.add_metadata(a=1)  # no backend: nothing happens, nothing fails
    assert list(run.sources()) == [] and list(run.children()) == []
    assert tracker.app_run_from_env() is run


def test_run_from_env_records_parent_and_fans_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_JOB_ID", "local_cwd://s/child")
    monkeypatch.setenv("TORCHX_PARENT_RUN_ID", "local_cwd://s/parent")
    monkeypatch.setenv("TORCHX_TRACKERS", "a,b")
    monkeypatch.setenv("TORCHX_TRACKER_A_FACTORY", "trackers_fixture:create")
    monkeypatch.setenv("TORCHX_TRACKER_B_FACTORY", "trackers_fixture:create")
    run = AppRun.run_from_env()
    a, b = run.backends
    assert a is not b
    run.add_metadata(lr=0.1)
    run.add_metadata(epochs=2, lr=0.2)
    run.add_artifact("model", "/ckpt/model.pt", {"format": "pt"})
    run.add_source("s3://datasets/v1", "dataset")
    for t in (a, b):
        assert t.metadata("local_cwd://s/child") == {"lr": 0.2, "epochs": 2}
        assert t.artifacts("local_cwd://s/child")["model"].metadata == {"format": "pt"}
    srcs = list(run.sources())
    assert all(isinstance(s, AppRunTrackableSource) for s in srcs)
    assert [(s.parent.id, s.artifact_name) for s in srcs] == [
        ("local_cwd://s/parent", None),
        ("s3://datasets/v1", "dataset"),
    ]
    parent = srcs[0].parent
    assert [c.id for c in parent.children()] == ["local_cwd://s/child"]


def test_trackers_registered_as_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trackers registered in the one plugin registry (here: in code) are found by name."""
    from trackers_fixture import create

    from torchx_core import plugins
    from torchx_core.plugins import PluginRegistry, PluginType

    reg = PluginRegistry(plugin_sources=plugins.PluginSource.ENTRYPOINT)
    reg.add(PluginType.TRACKER, "recording", create)
    monkeypatch.setattr(plugins._registry, "_registry", reg)
    monkeypatch.setenv("TORCHX_TRACKERS", "recording,fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_RECORDING_CONFIG", "c")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", "/no/such.conf")
    with pytest.raises(TrackerError, match=r"/no/such\.conf"):  # fsspec still found (entry point)
        trackers_from_environ()
    monkeypatch.setenv("TORCHX_TRACKERS", "recording")
    (t,) = trackers_from_environ()
    assert isinstance(t, RecordingTracker) and t.config == "c"


def test_a_broken_tracker_plugin_reports_its_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from torchx_core import plugins
    from torchx_core.plugins import PluginRegistry

    broken = EntryPoint("shiny", "no_such_pkg.tracking:create", "torchx.tracker")
    reg = PluginRegistry(
        plugin_sources=plugins.PluginSource.ENTRYPOINT,
        entry_points=lambda group: [broken] if group == "torchx.tracker" else [],
    )
    monkeypatch.setattr(plugins._registry, "_registry", reg)
    with pytest.raises(TrackerError, match="plugin `shiny` failed to load: ModuleNotFoundError"):
        build_trackers({"shiny": None})


def test_trackers_are_looked_up_through_the_modules_plugins_and_load_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TorchX users' tests patch ``torchx.tracker.api.plugins`` (the plugin registry) and
    ``torchx.tracker.api.load_module`` (the ``module:factory`` fallback)."""
    from unittest import mock

    from torchx_core.tracker import api

    def make(config: str | None) -> RecordingTracker:
        return RecordingTracker()

    with mock.patch.object(api, "plugins") as plugins_mock:
        plugins_mock.registry.return_value.get.return_value = {"t1": make}
        plugins_mock.registry.return_value.load_errors.return_value = []
        (built,) = build_trackers({"t1": "cfg"})
        assert isinstance(built, RecordingTracker)
        plugins_mock.registry.return_value.get.return_value = {}
        with mock.patch.object(api, "load_module", return_value=make) as load:
            (built,) = build_trackers({"my.mod:make": None})
        load.assert_called_once_with("my.mod:make")
        assert isinstance(built, RecordingTracker)
