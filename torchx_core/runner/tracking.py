"""What an app recorded through its tracker, read back on the launcher side by app handle.

Engine adapters (and users) show it where their users look::

    from torchx_core.runner import tracker_results

    results = tracker_results(app_handle)       # None: no tracker configured / nothing recorded
    if results:
        results.metadata                         # {"lr": 0.1, "final_loss": 0.02, ...}
        results.metrics()                        # the numeric ones: {"lr": 0.1, "final_loss": 0.02}
        results.artifacts                        # {"model": TrackerArtifact(...)}

The tracker is the first one configured on this side (``[torchx:tracker]`` in ``.torchxconfig``
or ``$TORCHX_TRACKERS``), the same configuration the runner injected into the app.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported only when results are read: `import torchx_core.runner` stays lean
    from torchx_core.tracker.api import TrackerArtifact

__all__ = ["TrackerResults", "tracker_results"]

logger: logging.Logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackerResults:
    """The metadata and artifacts one app recorded in one tracker.

    Args:
        app_handle: the app (its tracker run id)
        tracker: the name of the tracker they were read from
        metadata: the run's metadata
        artifacts: the run's artifacts by name
    """

    app_handle: str
    tracker: str
    metadata: Mapping[str, object] = field(default_factory=dict)
    artifacts: Mapping[str, TrackerArtifact] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """The finite numeric metadata values (booleans excluded), as floats."""
        return {
            k: float(v)
            for k, v in self.metadata.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }

    def rows(self) -> list[tuple[str, str, str]]:
        """``(kind, name, value)`` rows for a table: metadata, then artifacts (path)."""
        out = [("metadata", k, _text(v)) for k, v in self.metadata.items()]
        out += [("artifact", a.name, a.path) for a in self.artifacts.values()]
        return out

    def to_json(self) -> dict[str, object]:
        """A JSON-serializable dict (for XComs, task results, files)."""
        import json

        data: dict[str, object] = json.loads(
            json.dumps(
                {
                    "app_handle": self.app_handle,
                    "tracker": self.tracker,
                    "metadata": dict(self.metadata),
                    "artifacts": {
                        n: {"path": a.path, "metadata": a.metadata}
                        for n, a in self.artifacts.items()
                    },
                },
                default=str,
            )
        )
        return data


def _text(value: object) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, default=str)


def tracker_results(app_handle: str, tracker: str | None = None) -> TrackerResults | None:
    """Reads what app ``app_handle`` recorded through ``AppRun`` (best effort).

    Args:
        app_handle: the app
        tracker: the configured tracker to read (default: the first configured)

    Returns:
        The results, or None when no tracker is configured, the app recorded nothing, or the
        tracker could not be read (logged as a warning: showing results never fails a step).
    """
    from torchx_core.runner.api import get_configured_tracker_factories, get_configured_trackers
    from torchx_core.tracker.api import build_trackers

    try:
        configured = get_configured_trackers()
        if not configured:
            return None
        name = tracker or next(iter(configured))
        if name not in configured:
            logger.warning(
                "tracker %r is not configured (configured: %s); no tracker results for %s",
                name,
                ", ".join(configured),
                app_handle,
            )
            return None
        (backend,) = build_trackers(
            {name: configured[name]}, factories=get_configured_tracker_factories()
        )
        metadata = dict(backend.metadata(app_handle))
        artifacts = dict(backend.artifacts(app_handle))
    except Exception as e:  # noqa: BLE001 - best effort by contract (any backend's client error)
        logger.warning("could not read tracker results of %s: %s", app_handle, e)
        return None
    if not metadata and not artifacts:
        return None
    return TrackerResults(app_handle, name, metadata, artifacts)
