"""The MLflow tracker: each app is one MLflow run of an experiment (extra ``mlflow``).

Configure it on the launcher side (the job needs torchx-suite's ``mlflow`` extra)::

    [torchx:tracker]
    mlflow = mlflow                           # the `mlflow` torchx.tracker entry point

    [tracker:mlflow]
    config = http://mlflow.example:5000       # a tracking URI, or a directory / INI file whose
                                              # [tracker:mlflow] section holds tracking_uri,
                                              # experiment_name, artifact_location (TorchX's way)

How the tracker API maps onto MLflow (one ``MlflowClient``, no global "active run"):

* run: found by the tag ``torchx.run_id`` (the app handle), created on first use with the app
  handle as run name; ``close()`` (or process exit) marks the runs it created FINISHED
* metadata: run tags (strings; non-strings are stored as JSON and read back as values)
* artifacts: a local file or directory is uploaded to the run's artifacts under ``<name>/``;
  any other path (``s3://...``) is recorded as a reference; the tag ``torchx.artifact.<name>``
  keeps the path and the metadata
* sources: the tag ``torchx.sources`` (JSON); a source that is a tracked run of the same
  experiment (and no artifact name) also becomes the run's MLflow parent (``mlflow.parentRunId``),
  so the MLflow UI nests the child under it
* params: :meth:`MLflowTracker.log_params_flat` logs a (nested) config as MLflow params

The experiment is ``$TORCHX_TRACKING_EXPERIMENT_NAME``, else ``experiment_name`` of the config,
else ``default-experiment/<user>/<host>`` (TorchX's default).
"""

from __future__ import annotations

import atexit
import configparser
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchx_core.specs.errors import import_optional
from torchx_core.tracker.api import (
    ENV_TORCHX_JOB_ID,
    Lineage,
    TrackerArtifact,
    TrackerBase,
    TrackerError,
    TrackerSource,
)

if TYPE_CHECKING:
    from mlflow.entities import Experiment, Run
    from mlflow.tracking import MlflowClient

__all__ = ["MLflowTracker", "create_tracker"]

logger: logging.Logger = logging.getLogger(__name__)

TAG_RUN_ID = "torchx.run_id"
TAG_SOURCES = "torchx.sources"
TAG_ARTIFACT_PREFIX = "torchx.artifact."
TAG_PARENT = "mlflow.parentRunId"
ENV_EXPERIMENT_NAME = "TORCHX_TRACKING_EXPERIMENT_NAME"
_RESERVED_PREFIXES = ("mlflow.", "torchx.")
#: seconds a creator waits after creating a run before choosing among the runs it sees: the
#: ranks of a job create at once, and a creation stamped earlier can land a little later
CREATE_SETTLE_S = 0.3


def _default_tracking_uri() -> str:
    import tempfile

    return os.environ.get("MLFLOW_TRACKING_URI") or (
        f"file://{Path(tempfile.gettempdir()) / 'torchx' / 'mlruns'}"
    )


def _encode(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _decode(text: str) -> object:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return text if isinstance(value, str) else value


def _quoted(value: str) -> str | None:
    """``value`` as a search-filter literal, or None when it cannot be one (has a quote)."""
    return None if "'" in value or "\\" in value else f"'{value}'"


class MLflowTracker(TrackerBase):
    """A tracker on an MLflow tracking server (or a local ``file://`` / ``sqlite://`` store).

    Args:
        experiment_name: the experiment holding the runs (created if missing)
        tracking_uri: the MLflow tracking URI (default ``$MLFLOW_TRACKING_URI`` or a local
            ``file://<tmp>/torchx/mlruns`` store)
        artifact_location: where a newly created experiment stores artifacts
        client: an ``MlflowClient`` to use instead of one built from ``tracking_uri``
    """

    def __init__(
        self,
        experiment_name: str | None = None,
        tracking_uri: str | None = None,
        artifact_location: str | None = None,
        client: MlflowClient | None = None,
    ) -> None:
        tracking = import_optional("mlflow.tracking", "mlflow", "the MLflow tracker")
        self.tracking_uri = tracking_uri or _default_tracking_uri()
        self._client: MlflowClient = client or tracking.MlflowClient(self.tracking_uri)
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()
        self._runs: dict[str, str] = {}  # torchx run id -> mlflow run id
        self._created: set[str] = set()
        name = experiment_name or self.default_experiment_name()
        from torchx_core.distributed import on_rank0_first

        with on_rank0_first():  # one rank creates the experiment (and this job's run) first
            self.experiment: Experiment = self._experiment(name, artifact_location)
            job_id = os.environ.get(ENV_TORCHX_JOB_ID)
            if job_id:
                self.get_run_id(job_id)
        atexit.register(self.close)

    @staticmethod
    def default_experiment_name() -> str:
        """TorchX's default experiment: ``default-experiment/<user>/<host>``."""
        import getpass
        import socket

        return f"default-experiment/{getpass.getuser()}/{socket.getfqdn()}"

    @property
    def experiment_id(self) -> str:
        """The MLflow id of the experiment."""
        return str(self.experiment.experiment_id)

    @property
    def experiment_name(self) -> str:
        """The experiment's name."""
        return str(self.experiment.name)

    @property
    def artifact_location(self) -> str:
        """Where the experiment stores artifacts."""
        return str(self.experiment.artifact_location)

    def _experiment(self, name: str, artifact_location: str | None) -> Experiment:
        from mlflow.exceptions import MlflowException

        found = self._client.get_experiment_by_name(name)
        if found is not None:
            return found
        try:
            exp_id = self._client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException:  # created by another process meanwhile
            found = self._client.get_experiment_by_name(name)
            if found is None:
                raise
            return found
        logger.info("created MLflow experiment %r (id %s) at %s", name, exp_id, self.tracking_uri)
        return self._client.get_experiment(exp_id)

    # -- runs ---------------------------------------------------------------------------------

    def _search(self, filter_string: str = "") -> list[Run]:
        runs: list[Run] = []
        token = None
        while True:
            page = self._client.search_runs(
                [self.experiment_id], filter_string, max_results=1000, page_token=token
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def _find(self, run_id: str) -> list[Run]:
        literal = _quoted(run_id)
        if literal is None:
            runs = self._search()
        else:
            runs = self._search(f"tags.`{TAG_RUN_ID}` = {literal}")
        return sorted(
            (r for r in runs if r.data.tags.get(TAG_RUN_ID) == run_id),
            key=lambda r: (r.info.start_time, r.info.run_id),
        )

    def _lookup(self, run_name: str) -> str | None:
        """The MLflow run id of ``run_name`` if the run exists (never creates it)."""
        with self._lock:
            cached = self._runs.get(run_name)
        if cached:
            return cached
        found = self._find(run_name)
        if not found:
            return None
        with self._lock:
            return self._runs.setdefault(run_name, found[0].info.run_id)

    def get_run_id(self, run_name: str) -> str:
        """The MLflow run id of torchx run ``run_name`` (an app handle); created on first use.

        Writers creating the same run at once (the ranks of one job) converge on one run: each
        looks again once the others' creations have had time to land (``CREATE_SETTLE_S``) and
        keeps the oldest run by start time (run id on a tie); the others are deleted before
        anything was written to them.
        """
        with self._create_lock:  # one creation at a time in this tracker
            existing = self._lookup(run_name)
            if existing:
                return existing
            mine = self._client.create_run(
                self.experiment_id, tags={TAG_RUN_ID: run_name}, run_name=run_name
            ).info.run_id
            # a creation that started before ours may land after it: look once it has landed
            time.sleep(CREATE_SETTLE_S)
            found = self._find(run_name)
            winner = found[0].info.run_id if found else mine
            if winner != mine:
                self._client.delete_run(mine)  # lost a creation race
            else:
                with self._lock:
                    self._created.add(mine)
            with self._lock:
                return self._runs.setdefault(run_name, winner)

    def get_run(self, run_name: str) -> Run:
        """The MLflow ``Run`` of torchx run ``run_name`` (created on first use)."""
        return self._client.get_run(self.get_run_id(run_name))

    def _existing(self, run_name: str) -> Run | None:
        mlflow_run_id = self._lookup(run_name)
        return None if mlflow_run_id is None else self._client.get_run(mlflow_run_id)

    def close(self) -> None:
        """Marks the runs this tracker created FINISHED (also done at process exit)."""
        with self._lock:
            created, self._created = self._created, set()
        for mlflow_run_id in created:
            try:
                self._client.set_terminated(mlflow_run_id, "FINISHED")
            except Exception as e:  # noqa: BLE001 - at exit the server may be gone already
                logger.warning("could not mark MLflow run %s FINISHED: %s", mlflow_run_id, e)

    def _set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag
        from mlflow.exceptions import MlflowException

        try:
            self._client.log_batch(
                self.get_run_id(run_id), tags=[RunTag(k, v) for k, v in tags.items()]
            )
        except MlflowException as e:
            raise TrackerError(f"MLflow refused tags {sorted(tags)} of run {run_id}: {e}") from e

    # -- TrackerBase --------------------------------------------------------------------------

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        reserved = [k for k in kwargs if k.startswith(_RESERVED_PREFIXES)]
        if reserved:
            raise TrackerError(
                f"metadata keys {reserved} use a reserved prefix ({', '.join(_RESERVED_PREFIXES)})"
            )
        self._set_tags(run_id, {k: _encode(v) for k, v in kwargs.items()})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        run = self._existing(run_id)
        if run is None:
            return {}
        tags = run.data.tags
        return {k: _decode(v) for k, v in tags.items() if not k.startswith(_RESERVED_PREFIXES)}

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise TrackerError(f"artifact name {name!r} is not a relative name like `model`")
        local_path = path.removeprefix("file://")
        local = Path(local_path)
        uploaded = "://" not in local_path and local.exists()
        mlflow_run = self.get_run_id(run_id)
        if uploaded and local.is_dir():
            self._client.log_artifacts(mlflow_run, str(local), artifact_path=name)
        elif uploaded:
            self._client.log_artifact(mlflow_run, str(local), artifact_path=name)
        record = {"path": path, "uploaded": uploaded, "metadata": metadata}
        self._set_tags(run_id, {f"{TAG_ARTIFACT_PREFIX}{name}": json.dumps(record, default=str)})

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        run = self._existing(run_id)
        out: dict[str, TrackerArtifact] = {}
        if run is None:
            return out
        for key, value in run.data.tags.items():
            if not key.startswith(TAG_ARTIFACT_PREFIX):
                continue
            name = key[len(TAG_ARTIFACT_PREFIX) :]
            record = json.loads(value)
            path = f"{run.info.artifact_uri}/{name}" if record["uploaded"] else record["path"]
            md = dict(record.get("metadata") or {})
            md.setdefault("source_path", record["path"])
            out[name] = TrackerArtifact(name, path, md)
        return out

    def _sources(self, run: Run | None) -> list[list[str | None]]:
        if run is None:
            return []
        return json.loads(run.data.tags.get(TAG_SOURCES, "[]"))  # type: ignore[no-any-return]

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        run = self.get_run(run_id)
        sources = self._sources(run)
        if [source_id, artifact_name] in sources:
            return
        tags = {TAG_SOURCES: json.dumps([*sources, [source_id, artifact_name]])}
        if artifact_name is None and TAG_PARENT not in run.data.tags:
            parent = self._lookup(source_id)
            if parent:
                tags[TAG_PARENT] = parent
        self._set_tags(run_id, tags)

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        return [
            TrackerSource(str(src), kind)
            for src, kind in self._sources(self._existing(run_id))
            if artifact_name is None or kind == artifact_name
        ]

    def run_ids(self, parent_run_id: str | None = None) -> Iterable[str]:  # type: ignore[override]
        if parent_run_id is None:
            runs = self._search(f"tags.`{TAG_RUN_ID}` LIKE '%'")
        else:
            literal = _quoted(f"%{parent_run_id}%")
            runs = self._search(f"tags.`{TAG_SOURCES}` LIKE {literal}" if literal else "")
            runs = [r for r in runs if any(s[0] == parent_run_id for s in self._sources(r))]
        return sorted({r.data.tags[TAG_RUN_ID] for r in runs if TAG_RUN_ID in r.data.tags})

    def lineage(self, run_id: str) -> Lineage:
        return Lineage(
            run_id=run_id,
            sources=list(self.sources(run_id)),
            descendants=list(self.run_ids(parent_run_id=run_id)),
        )

    # -- params -------------------------------------------------------------------------------

    def log_params_flat(self, run_name: str, cfg: Any, key: str = "") -> None:
        """Logs ``cfg`` (dataclass, mapping or sequence, nested) as MLflow params.

        Nested fields are joined with ``.``; elements of a sequence of non-primitives get
        ``_<index>``; a sequence of primitives is one param (``l = ['a', 'b']``), as in TorchX.
        """
        from mlflow.entities import Param

        params: list[Param] = []
        _flatten(cfg, key, params, Param)
        if params:
            self._client.log_batch(self.get_run_id(run_name), params=params)

    def __repr__(self) -> str:
        return (
            f"MLflowTracker(experiment={self.experiment_name!r},"
            f" tracking_uri={self.tracking_uri!r})"
        )


def _primitive(v: object) -> bool:
    return isinstance(v, (str, int, float, bool))


def _flatten(cfg: Any, key: str, out: list[Any], param: Any) -> None:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = dataclasses.asdict(cfg)
    prefix = f"{key}." if key else ""
    if _primitive(cfg) or not cfg:
        if key:
            out.append(param(key, str(cfg)))
    elif isinstance(cfg, Mapping):
        for k, v in cfg.items():
            _flatten(v, f"{prefix}{k}", out, param)
    elif isinstance(cfg, (Sequence, set, frozenset)):
        items = list(cfg)
        if all(_primitive(e) for e in items):
            out.append(param(key, str(items)))
        else:
            for i, e in enumerate(items):
                _flatten(e, f"{prefix}_{i}", out, param)
    else:
        raise TrackerError(f"param {key or '<root>'}: cannot log a {type(cfg).__name__}")


_URI_SCHEMES = ("http://", "https://", "file:", "sqlite:", "postgresql", "mysql", "databricks")


def _read_section(path: Path) -> dict[str, str]:
    file = path / ".torchxconfig" if path.is_dir() else path
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(file)
    except configparser.Error as e:
        raise TrackerError(f"MLflow tracker config {file}: {e}") from e
    if not parser.has_section("tracker:mlflow"):
        raise TrackerError(f"MLflow tracker config {file} has no [tracker:mlflow] section")
    return dict(parser.items("tracker:mlflow"))


_KEYS = ("tracking_uri", "experiment_name", "artifact_location")


def create_tracker(config: str | None) -> MLflowTracker:
    """The ``torchx.tracker`` factory of the MLflow tracker.

    Args:
        config: a tracking URI (``http://host:5000``, ``file:///...``, ``sqlite:///...``,
            ``databricks``); or a directory holding a ``.torchxconfig`` / an INI file whose
            ``[tracker:mlflow]`` section gives ``tracking_uri``, ``experiment_name``,
            ``artifact_location``; or None for ``$MLFLOW_TRACKING_URI`` / a local store.

    Raises:
        TrackerError: ``config`` is none of these, or its section has unknown keys.
    """
    kwargs: dict[str, str] = {}
    if config and config.startswith(_URI_SCHEMES):
        kwargs["tracking_uri"] = config
    elif config:
        path = Path(config)
        if not path.exists():
            raise TrackerError(
                f"MLflow tracker config {config!r} is neither a tracking URI"
                f" ({', '.join(_URI_SCHEMES)}...) nor an existing file or directory"
            )
        kwargs = {k: v for k, v in _read_section(path).items() if k != "config"}
        unknown = sorted(set(kwargs) - set(_KEYS))
        if unknown:
            raise TrackerError(
                f"MLflow tracker config {config}: unknown keys {unknown}; valid: {', '.join(_KEYS)}"
            )
    experiment = os.environ.get(ENV_EXPERIMENT_NAME) or kwargs.get("experiment_name")
    return MLflowTracker(
        experiment_name=experiment,
        tracking_uri=kwargs.get("tracking_uri"),
        artifact_location=kwargs.get("artifact_location"),
    )
