"""A tracker backend on any fsspec file system (local directory, S3, GCS, memory...).

Layout under ``root_dir`` (one directory per run, named by the base32 of the run id, the same
layout as TorchX's ``FsspecTracker``)::

    <b32(run_id)>/metadata/<entry>.json      {"metadata": {...}}  later entries win per key
    <b32(run_id)>/artifacts/<entry>.json     {"name": ..., "path": ..., "metadata": ...}
    <b32(run_id)>/sources/<b32(source_id)>   one artifact name per line ("" = the run itself)
    <b32(run_id)>/descendants/<b32(child)>   written into a source that is a tracked run

Entries are written under a hidden name and renamed, so a reader never sees half a file.

Configured with a small ``key = value`` file (``create(config_file)``)::

    protocol = file            # any fsspec protocol
    root_path = /data/tracker  # created if missing
    # any other key is passed to fsspec.filesystem(); dotted keys nest (client_kwargs.region = x)
"""

from __future__ import annotations

import json
import secrets
import time
from base64 import b32decode, b32encode
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

from torchx_core.tracker.api import (
    Lineage,
    TrackerArtifact,
    TrackerBase,
    TrackerError,
    TrackerSource,
)

__all__ = ["FsspecTracker", "create", "generate_filename"]

_METADATA = "metadata"
_ARTIFACTS = "artifacts"
_SOURCES = "sources"
_DESCENDANTS = "descendants"


def generate_filename() -> str:
    """A new entry name: sortable by time, unique across processes writing at once."""
    return f"{time.time_ns():020d}-{secrets.token_hex(4)}"


def _encode_torchx_run_id(run_id: str) -> str:
    return b32encode(run_id.encode("utf-8")).decode("ascii")


def _decode_torchx_run_id(name: str) -> str:
    return b32decode(name.encode("ascii")).decode("utf-8")


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class _PathBuilder:
    """TorchX's ``FsspecTracker._path_builder``, for its ``root_dir`` (the paths themselves come
    from :meth:`FsspecTracker._run_dir`)."""

    root_dir: str


class FsspecTracker(TrackerBase):
    """Stores runs as small JSON files under ``root_dir`` of file system ``fs``.

    Args:
        fs: the fsspec file system
        root_dir: the tracker's root directory on ``fs`` (created if missing)
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, root_dir: str) -> None:
        self.fs = fs
        self.root_dir = root_dir.rstrip("/") or "/"
        self._path_builder = _PathBuilder(self.root_dir)
        self.fs.makedirs(self.root_dir, exist_ok=True)

    def _run_dir(self, run_id: str, *parts: str) -> str:
        return "/".join([self.root_dir, _encode_torchx_run_id(run_id), *parts])

    def _write(self, path: str, text: str) -> None:
        """Writes ``path`` whole: a hidden temporary file renamed into place."""
        parent, name = path.rsplit("/", 1)
        tmp = f"{parent}/.{name}.tmp"
        with self.fs.open(tmp, "w") as f:
            f.write(text)
        self.fs.mv(tmp, path)

    def _persist(self, run_id: str, category: str, content: Mapping[str, object]) -> None:
        folder = self._run_dir(run_id, category)
        self.fs.makedirs(folder, exist_ok=True)
        self._write(f"{folder}/{generate_filename()}.json", json.dumps(content, default=str))

    def _entries(self, folder: str) -> list[str]:
        """Visible entry paths of ``folder``, in name (write time) order; [] if missing."""
        if not self.fs.exists(folder):
            return []
        names = self.fs.ls(folder, detail=False)
        return sorted(p for p in names if not _basename(p).startswith("."))

    def _load(self, run_id: str, category: str) -> list[dict[str, Any]]:
        out = []
        for path in self._entries(self._run_dir(run_id, category)):
            with self.fs.open(path, "r") as f:
                out.append(json.load(f))
        return out

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        self._persist(run_id, _ARTIFACTS, {"name": name, "path": path, "metadata": metadata})

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return {
            str(e["name"]): TrackerArtifact(str(e["name"]), str(e["path"]), e.get("metadata"))
            for e in self._load(run_id, _ARTIFACTS)
        }

    def add_metadata(self, run_id: str, **metadata: object) -> None:
        self._persist(run_id, _METADATA, {"metadata": metadata})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        merged: dict[str, object] = {}
        for entry in self._load(run_id, _METADATA):
            merged.update(entry.get("metadata") or {})
        return merged

    def _append_line(self, path: str, line: str) -> None:
        lines = self._read_lines(path) if self.fs.exists(path) else []
        if line in lines:
            return
        self._write(path, "".join(f"{x}\n" for x in [*lines, line]))

    def _read_lines(self, path: str) -> list[str]:
        with self.fs.open(path, "r") as f:
            return [x.rstrip("\n") for x in f]

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        folder = self._run_dir(run_id, _SOURCES)
        self.fs.makedirs(folder, exist_ok=True)
        self._append_line(f"{folder}/{_encode_torchx_run_id(source_id)}", artifact_name or "")
        if self.fs.exists(self._run_dir(source_id)):
            desc = self._run_dir(source_id, _DESCENDANTS)
            self.fs.makedirs(desc, exist_ok=True)
            self._append_line(f"{desc}/{_encode_torchx_run_id(run_id)}", artifact_name or "")

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        out: list[TrackerSource] = []
        for path in self._entries(self._run_dir(run_id, _SOURCES)):
            source_id = _decode_torchx_run_id(_basename(path))
            for kind in self._read_lines(path) or [""]:
                if artifact_name is None or kind == artifact_name:
                    out.append(TrackerSource(source_id, kind or None))
        return out

    def run_ids(self, parent_run_id: str | None = None) -> Iterable[str]:  # type: ignore[override]
        if not self.fs.exists(self.root_dir):
            return []
        out = []
        for info in self.fs.ls(self.root_dir, detail=True):
            name = _basename(info["name"])
            if info.get("type") != "directory" or name.startswith("."):
                continue
            if parent_run_id is not None and not self.fs.exists(
                f"{info['name'].rstrip('/')}/{_SOURCES}/{_encode_torchx_run_id(parent_run_id)}"
            ):
                continue
            try:
                out.append(_decode_torchx_run_id(name))
            except ValueError:  # not a run directory
                continue
        return sorted(out)

    def lineage(self, run_id: str) -> Lineage:
        desc = [
            _decode_torchx_run_id(_basename(p))
            for p in self._entries(self._run_dir(run_id, _DESCENDANTS))
        ]
        return Lineage(run_id=run_id, sources=list(self.sources(run_id)), descendants=desc)

    def __repr__(self) -> str:
        return f"FsspecTracker(root_dir={self.root_dir!r})"


def _put(config: dict[str, Any], key: str, value: str, source: str) -> None:
    head, dot, rest = key.partition(".")
    if not head or (dot and not rest):
        raise TrackerError(f"{source}: config key {key!r} is not `name` or `a.b.c`")
    if not dot:
        config[head] = value
        return
    nested = config.setdefault(head, {})
    if not isinstance(nested, dict):
        raise TrackerError(f"{source}: config key {key!r} nests under {head!r}, which has a value")
    _put(nested, rest, value, source)


def _read_config(config_file: str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    try:
        with fsspec.open(config_file, "rt") as f:
            for lineno, raw in enumerate(f, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                key, sep, value = line.partition("=")
                if not sep:
                    raise TrackerError(f"{config_file}:{lineno}: {line!r} is not `key = value`")
                _put(config, key.strip(), value.strip(), f"{config_file}:{lineno}")
    except FileNotFoundError as e:
        raise TrackerError(
            f"fsspec tracker config file {config_file!r} does not exist; set `config` in the"
            " [tracker:<name>] section of .torchxconfig to a file with `protocol` and `root_path`"
        ) from e
    return config


def create(config_file: str | None) -> TrackerBase:
    """The ``torchx.tracker`` factory of the fsspec tracker: reads ``config_file`` (see module doc).

    Raises:
        TrackerError: no config file, or it lacks ``protocol`` or ``root_path``.
    """
    if not config_file:
        raise TrackerError(
            "the fsspec tracker needs a config file: set `config = /path/to/file` in the"
            " [tracker:<name>] section of .torchxconfig (the file holds `protocol = file` and"
            " `root_path = /some/dir`)"
        )
    config = _read_config(config_file)
    missing = [k for k in ("protocol", "root_path") if k not in config]
    if missing:
        raise TrackerError(
            f"fsspec tracker config {config_file!r} lacks {', '.join(missing)}; it needs"
            " `protocol = <fsspec protocol, e.g. file>` and `root_path = <directory>`"
        )
    protocol = config.pop("protocol")
    root = config.pop("root_path")
    return FsspecTracker(fsspec.filesystem(protocol, **config), root)
