"""Resource use of an app's replicas over time, for its page: one sample per status refresh of an
open app page (``Runner.resource_usage``), CPU % from the CPU time between two samples, the last
``keep`` samples of at most ``apps`` apps (the least recently looked at are forgotten)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReplicaSeries", "UsageHistory"]


@dataclass
class ReplicaSeries:
    """One replica's samples: ``(time, CPU %, resident bytes)``, oldest first."""

    points: deque[tuple[float, float, int]]
    last_cpu: float | None = None
    last_at: float | None = None

    def cpu_now(self) -> str:
        """``"87%"`` of the latest sample (``""`` before two samples)."""
        return f"{self.points[-1][1]:.0f}%" if self.points else ""

    def memory_now(self) -> str:
        """``"312 MB"`` of the latest sample."""
        return _bytes(self.points[-1][2]) if self.points else ""

    def sparkline(self, width: int = 120, height: int = 24) -> str:
        """SVG polyline points of CPU % over the samples (100 % at the top)."""
        pts = list(self.points)
        if len(pts) < 2:
            return ""
        top = max(100.0, *(p[1] for p in pts))
        step = width / (len(pts) - 1)
        return " ".join(
            f"{i * step:.1f},{height - height * p[1] / top:.1f}" for i, p in enumerate(pts)
        )


def _bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment] # shown as a float from here on
    return f"{n} B"


@dataclass
class UsageHistory:
    """The samples of the apps whose pages are open (``keep`` per replica, ``apps`` apps)."""

    keep: int = 60
    apps: int = 256
    _series: OrderedDict[str, dict[tuple[str, int], ReplicaSeries]] = field(
        default_factory=OrderedDict
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(
        self, handle: str, usage: Mapping[tuple[str, int], Any] | None, now: float
    ) -> dict[tuple[str, int], ReplicaSeries]:
        """Records ``usage`` (``Runner.resource_usage``) of ``handle`` at ``now``; its series."""
        with self._lock:
            series = self._series.setdefault(handle, {})
            self._series.move_to_end(handle)
            while len(self._series) > self.apps:
                self._series.popitem(last=False)
            for replica, u in (usage or {}).items():
                s = series.setdefault(replica, ReplicaSeries(deque(maxlen=self.keep)))
                if s.last_cpu is not None and s.last_at is not None and now > s.last_at:
                    busy = max(0.0, u.cpu_seconds - s.last_cpu) / (now - s.last_at)
                    s.points.append((now, 100.0 * busy, u.rss_bytes))
                s.last_cpu, s.last_at = u.cpu_seconds, now
            return dict(series)
