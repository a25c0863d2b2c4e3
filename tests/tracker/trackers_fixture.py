"""Tracker factories named by ``module:function`` in the tests (importable by child processes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from torchx_core.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource


class RecordingTracker(TrackerBase):
    """Keeps every call in memory (for unit tests of AppRun's fan-out)."""

    def __init__(self, config: str | None = None) -> None:
        self.config = config
        self.md: dict[str, dict[str, object]] = {}
        self.arts: dict[str, dict[str, TrackerArtifact]] = {}
        self.srcs: dict[str, list[TrackerSource]] = {}

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        self.arts.setdefault(run_id, {})[name] = TrackerArtifact(name, path, metadata)

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return self.arts.get(run_id, {})

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self.md.setdefault(run_id, {}).update(kwargs)

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return self.md.get(run_id, {})

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        self.srcs.setdefault(run_id, []).append(TrackerSource(source_id, artifact_name))

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        return [s for s in self.srcs.get(run_id, []) if artifact_name in (None, s.artifact_name)]

    def lineage(self, run_id: str) -> Lineage:
        return Lineage(run_id, list(self.sources(run_id)), [])

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        parent = kwargs.get("parent_run_id")
        ids = set(self.md) | set(self.arts) | set(self.srcs)
        if parent:
            ids = {i for i in ids if any(s.source_run_id == parent for s in self.srcs.get(i, []))}
        return sorted(ids)


def create(config: str | None) -> RecordingTracker:
    return RecordingTracker(config)


def broken(config: str | None) -> TrackerBase:
    raise RuntimeError(f"cannot reach the tracking service at {config}")


NOT_CALLABLE = 42
