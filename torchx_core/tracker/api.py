"""The tracker API: :class:`AppRun` (what a job uses) over :class:`TrackerBase` backends.

A job reads its trackers from the environment the runner injected (see :mod:`torchx_core.tracker`):

* ``TORCHX_TRACKERS``: comma-separated tracker names, each a registered tracker plugin
  (a ``torchx.tracker`` entry point or a ``@register.tracker`` function, see
  :mod:`torchx_core.plugins`) or a factory path (``pkg.module:create`` or ``pkg.module``)
* ``TORCHX_TRACKER_<NAME>_CONFIG``: the config string passed to that factory (optional)
* ``TORCHX_TRACKER_<NAME>_FACTORY``: the factory of tracker ``<NAME>`` when the
  ``[torchx:tracker]`` entry names one different from the tracker name (torchx-suite extension)
* ``TORCHX_JOB_ID``: the app handle, the run id of this job
* ``TORCHX_PARENT_RUN_ID``: the run this job derives from (recorded as a source)

A factory is a callable ``(config: str | None) -> TrackerBase``.
"""

from __future__ import annotations

import logging
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import cast

from torchx_core import plugins
from torchx_core.specs.errors import TorchXError, did_you_mean
from torchx_core.util.modules import load_module

__all__ = [
    "ENTRYPOINT_GROUP",
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "AppRun",
    "AppRunTrackableSource",
    "Lineage",
    "TrackerArtifact",
    "TrackerBase",
    "TrackerError",
    "TrackerSource",
    "build_trackers",
    "load_tracker_factory",
    "tracker_config_env_var_name",
    "tracker_factory_env_var_name",
    "trackers_from_environ",
]

logger: logging.Logger = logging.getLogger(__name__)

ENV_TORCHX_TRACKERS = "TORCHX_TRACKERS"
ENV_TORCHX_PARENT_RUN_ID = "TORCHX_PARENT_RUN_ID"
ENV_TORCHX_JOB_ID = "TORCHX_JOB_ID"
ENTRYPOINT_GROUP = "torchx.tracker"
UNDEFINED_JOB_ID = "<UNDEFINED>"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")

TrackerFactory = Callable[[str | None], "TrackerBase"]


class TrackerError(TorchXError, ValueError):
    """A tracker is misconfigured: unknown factory, bad name, or a factory that failed."""


@dataclass
class TrackerSource:
    """A source of a run, as a backend stores it.

    Args:
        source_run_id: the run (another app handle) or external entity this run derives from
        artifact_name: the kind of relationship (which artifact of the source is used), if any
    """

    source_run_id: str
    artifact_name: str | None


@dataclass
class TrackerArtifact:
    """An artifact of a run, as a backend stores it.

    Args:
        name: artifact name (unique within the run)
        path: where the artifact is (a path or URI)
        metadata: anything else recorded about it
    """

    name: str
    path: str
    metadata: Mapping[str, object] | None


@dataclass
class AppRunTrackableSource:
    """A source of an :class:`AppRun`, as the user API returns it.

    Args:
        parent: the run this run derives from
        artifact_name: the kind of relationship, if any
    """

    parent: AppRun
    artifact_name: str | None


@dataclass
class Lineage:
    """Where a run comes from and what derives from it.

    Args:
        run_id: the run
        sources: the runs (or external entities) it derives from
        descendants: the ids of the runs that name it as a source
    """

    run_id: str = ""
    sources: list[TrackerSource] = field(default_factory=list)
    descendants: list[str] = field(default_factory=list)


class TrackerBase(ABC):
    """A tracking backend: stores metadata, artifacts and sources per run id (an app handle)."""

    @abstractmethod
    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Records artifact ``name`` at ``path`` (plus optional ``metadata``) for ``run_id``."""

    @abstractmethod
    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """The artifacts of ``run_id`` by name."""

    @abstractmethod
    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Records metadata key/values for ``run_id`` (later values win per key)."""

    @abstractmethod
    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The metadata of ``run_id``."""

    @abstractmethod
    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        """Records that ``run_id`` derives from ``source_id`` (optionally one of its artifacts)."""

    @abstractmethod
    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        """The sources of ``run_id``, optionally only those of kind ``artifact_name``."""

    @abstractmethod
    def lineage(self, run_id: str) -> Lineage:
        """The sources and descendants of ``run_id``."""

    @abstractmethod
    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """The run ids this backend knows, optionally filtered (``parent_run_id=...``)."""


def tracker_config_env_var_name(entrypoint_key: str) -> str:
    """The env var holding tracker ``entrypoint_key``'s config: ``TORCHX_TRACKER_<NAME>_CONFIG``."""
    return f"TORCHX_TRACKER_{entrypoint_key.upper()}_CONFIG"


def tracker_factory_env_var_name(name: str) -> str:
    """The env var holding tracker ``name``'s factory: ``TORCHX_TRACKER_<NAME>_FACTORY``."""
    return f"TORCHX_TRACKER_{name.upper()}_FACTORY"


def _registered() -> tuple[dict[str, Callable[..., object]], dict[str, str]]:
    """Tracker plugins (``torchx.tracker`` entry points, ``torchx_plugins.tracker`` modules,
    ``@register.tracker``) and the load errors of the broken ones, by name.

    Read through this module's ``plugins`` (TorchX users' tests patch
    ``torchx.tracker.api.plugins`` to give it other trackers).
    """
    reg = plugins.registry()
    found = reg.get(plugins.PluginType.TRACKER)
    errors = {e.name: e.error for e in reg.load_errors(plugins.PluginType.TRACKER) if e.name}
    return dict(found), errors


def load_tracker_factory(name: str, factory: str | None = None) -> TrackerFactory:
    """Finds the factory of tracker ``name``.

    ``factory`` (default ``name``) is looked up as a registered tracker plugin first (a
    ``torchx.tracker`` entry point, a ``@register.tracker`` function of a ``torchx_plugins.tracker``
    module), then as ``module:attr`` or a module path (its ``create`` function).

    Raises:
        TrackerError: nothing of that name exists, it failed to load, or it is not callable.
    """
    target = factory or name
    registered, errors = _registered()
    if target in errors and target not in registered:
        raise TrackerError(
            f"tracker `{name}`: the `{ENTRYPOINT_GROUP}` plugin `{target}` failed to load:"
            f" {errors[target]}"
        )
    obj = registered.get(target) or load_module(target)
    module_name, _, attr = target.partition(":")
    if obj is None and attr and load_module(module_name) is not None:
        raise TrackerError(
            f"tracker `{name}`: module `{module_name}` has no `{attr}`; name an existing factory"
            f" as `{module_name}:<function>`"
        )
    if obj is None:
        known = sorted(registered)
        raise TrackerError(
            f"tracker `{name}`: `{target}` is neither a registered `{ENTRYPOINT_GROUP}` plugin"
            f" (known: {', '.join(known) or 'none'}){did_you_mean(target, known)} nor an"
            " importable `module` or `module:attr` (a module that exists but failed to import"
            " is logged above). Give a plugin name or `package.module:factory` in the"
            " [torchx:tracker] section of .torchxconfig, and install it in the job's environment."
        )
    if isinstance(obj, ModuleType):
        module_name = obj.__name__
        obj = getattr(obj, "create", None)
        if obj is None:
            raise TrackerError(
                f"tracker `{name}`: module `{module_name}` has no `create`; name the factory"
                f" explicitly as `{module_name}:<function>`"
            )
    if not callable(obj):
        raise TrackerError(f"tracker `{name}`: `{target}` is {obj!r}, not a callable factory")
    return cast("TrackerFactory", obj)  # callable, checked above; what it builds is used as one


def build_trackers(
    factory_and_config: Mapping[str, str | None],
    *,
    factories: Mapping[str, str] | None = None,
) -> Iterable[TrackerBase]:
    """Builds one tracker per ``{name: config}`` entry (see :func:`load_tracker_factory`).

    The factory of each name is ``factories[name]``, else ``$TORCHX_TRACKER_<NAME>_FACTORY``,
    else the name itself.

    Raises:
        TrackerError: a factory is unknown, or it raised while building its tracker.
    """
    trackers: list[TrackerBase] = []
    for name, config in factory_and_config.items():
        target = (factories or {}).get(name) or os.environ.get(tracker_factory_env_var_name(name))
        factory = load_tracker_factory(name, target)
        try:
            tracker = factory(config)
        except TorchXError:
            raise
        except Exception as e:
            raise TrackerError(
                f"tracker `{name}` failed to build from config {config!r}: {type(e).__name__}: {e}"
            ) from e
        logger.debug("tracker `%s` built: %r", name, tracker)
        trackers.append(tracker)
    return trackers


def _names_and_configs_from_environ() -> dict[str, str | None]:
    value = os.environ.get(ENV_TORCHX_TRACKERS, "")
    names = [n.strip() for n in value.split(",") if n.strip()]
    for n in names:
        if not _NAME_RE.match(n):
            raise TrackerError(
                f"{ENV_TORCHX_TRACKERS}={value!r}: tracker name {n!r} has characters other than"
                " letters, digits and `_.:-`"
            )
    return {n: os.environ.get(tracker_config_env_var_name(n)) for n in names}


# TorchX's name: ``{tracker name: config or None}`` from ``$TORCHX_TRACKERS`` (empty when unset)
_extract_tracker_name_and_config_from_environ = _names_and_configs_from_environ


def trackers_from_environ() -> Iterable[TrackerBase]:
    """Builds the trackers named by ``$TORCHX_TRACKERS`` (none when it is unset)."""
    configs = _names_and_configs_from_environ()
    if not configs:
        logger.debug("no trackers configured (%s is unset)", ENV_TORCHX_TRACKERS)
        return []
    return build_trackers(configs)


@dataclass
class AppRun:
    """The tracking API of one run (one app); writes go to every backend, reads to the first.

    Args:
        id: the run id (the app handle when launched by torchx)
        backends: the trackers to write to
    """

    id: str
    backends: Iterable[TrackerBase]

    @staticmethod
    @lru_cache(maxsize=1)
    def run_from_env() -> AppRun:
        """The run of this process, from the environment the runner injected (a singleton).

        Outside a torchx-launched job the id is ``<UNDEFINED>`` and there are no backends, so
        writes are no-ops. A ``$TORCHX_PARENT_RUN_ID`` is recorded as a source of the run.
        """
        job_id = os.environ.get(ENV_TORCHX_JOB_ID, UNDEFINED_JOB_ID)
        trackers = list(trackers_from_environ())
        parent = os.environ.get(ENV_TORCHX_PARENT_RUN_ID)
        if parent:
            for tracker in trackers:
                tracker.add_source(job_id, parent, artifact_name=None)
        return AppRun(id=job_id, backends=trackers)

    def add_metadata(self, **kwargs: object) -> None:
        """Records metadata for this run in every backend."""
        for backend in self.backends:
            backend.add_metadata(self.id, **kwargs)

    def add_artifact(
        self, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Records artifact ``name`` stored at ``path`` in every backend."""
        for backend in self.backends:
            backend.add_artifact(self.id, name, path, metadata)

    def job_id(self) -> str:
        """The run id."""
        return self.id

    def add_source(self, source_id: str, artifact_name: str | None = None) -> None:
        """Records that this run derives from ``source_id`` (another run or an external id)."""
        for backend in self.backends:
            backend.add_source(self.id, source_id, artifact_name)

    def _first(self) -> TrackerBase | None:
        return next(iter(self.backends), None)

    def sources(self) -> Iterable[AppRunTrackableSource]:
        """The runs this run derives from (read from the first backend)."""
        backend = self._first()
        if backend is None:
            return []
        return [
            AppRunTrackableSource(AppRun(s.source_run_id, self.backends), s.artifact_name)
            for s in backend.sources(self.id)
        ]

    def children(self) -> Iterable[AppRun]:
        """The runs that name this run as their parent (read from the first backend)."""
        backend = self._first()
        if backend is None:
            return []
        return [AppRun(r, self.backends) for r in backend.run_ids(parent_run_id=self.id)]
