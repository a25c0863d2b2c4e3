"""The apps the dashboard shows: one snapshot per scheduler, shared by every browser.

A refresh of the apps page (by any number of open browsers) reads each scheduler at most once per
``max_age`` seconds: the first request after the snapshot aged lists the scheduler (through
``Runner.shared_list``, so requests that arrive meanwhile share that
one read) and every other request is answered from the snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.specs import CfgVal

__all__ = ["AppRow", "Board", "Filters"]


@dataclass(frozen=True)
class AppRow:
    """One app on the apps page."""

    handle: str
    scheduler: str
    app_id: str
    name: str
    state: str
    created: float | None
    owner: str | None
    replicas: Mapping[str, int] | None

    def replicas_text(self) -> str:
        """``"2 RUNNING, 1 SUCCEEDED"`` (``""`` when the scheduler does not say)."""
        if not self.replicas:
            return ""
        return ", ".join(f"{n} {s}" for s, n in sorted(self.replicas.items()))


@dataclass(frozen=True)
class Filters:
    """What the apps page is filtered by (empty: everything)."""

    scheduler: str = ""
    state: str = ""
    name: str = ""

    def keep(self, row: AppRow) -> bool:
        """Whether ``row`` passes (the name filter is a case-insensitive substring)."""
        return (
            (not self.scheduler or row.scheduler == self.scheduler)
            and (not self.state or row.state == self.state)
            and (not self.name or self.name.lower() in f"{row.name} {row.app_id}".lower())
        )


@dataclass
class _Snapshot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: list[AppRow] = field(default_factory=list)
    error: str = ""
    read_at: float = float("-inf")
    reads: int = 0


class Board:
    """The apps of ``schedulers``, each listed at most once per ``max_age`` seconds.

    Args:
        runner: the runner whose schedulers are listed
        schedulers: scheduler names, in the order shown
        max_age: how old a scheduler's snapshot may be before a request lists it again
        cfgs: run options per scheduler for its list call (e.g. from ``.torchxconfig``)
        clock: monotonic clock (tests)
    """

    def __init__(
        self,
        runner: Runner,
        schedulers: Iterable[str],
        max_age: float = 2.0,
        cfgs: Mapping[str, Mapping[str, CfgVal]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runner = runner
        self.schedulers = list(dict.fromkeys(schedulers))
        self.max_age = max_age
        self._cfgs = dict(cfgs or {})
        self._clock = clock
        self._snaps = {s: _Snapshot() for s in self.schedulers}

    def reads(self, scheduler: str) -> int:
        """How many list reads of ``scheduler`` this board made."""
        return self._snaps[scheduler].reads

    def rows(self, filters: Filters = Filters()) -> tuple[list[AppRow], dict[str, str]]:
        """The apps passing ``filters``, newest first; ``{scheduler: error}`` of failed reads."""
        rows: list[AppRow] = []
        errors: dict[str, str] = {}
        for sched in self.schedulers:
            if filters.scheduler and sched != filters.scheduler:
                continue
            snap = self._fresh(sched)
            rows.extend(r for r in snap.rows if filters.keep(r))
            if snap.error:
                errors[sched] = snap.error
        # unknown submit times last; then ids by length first (Slurm job 100 is newer than 99)
        rows.sort(key=lambda r: (r.created or 0.0, len(r.app_id), r.app_id), reverse=True)
        return rows, errors

    def _fresh(self, sched: str) -> _Snapshot:
        snap = self._snaps[sched]
        with snap.lock:  # one reader per scheduler; the others wait and share its rows
            if self._clock() - snap.read_at < self.max_age:
                return snap
            try:
                listed = self.runner.shared_list(sched, self._cfgs.get(sched))
                snap.rows, snap.error = [_row(sched, a) for a in listed], ""
            except Exception as e:  # noqa: BLE001 - shown on the page; other schedulers still list
                snap.error = f"{type(e).__name__}: {e}"
            snap.read_at = self._clock()
            snap.reads += 1
            return snap


def _row(sched: str, app: Any) -> AppRow:
    """A row from one of ``Runner.list``'s answers (a ``ListAppResponse``)."""
    return AppRow(
        handle=app.app_handle,
        scheduler=sched,
        app_id=app.app_id,
        name=app.name,
        state=app.state.name,
        created=app.created,
        owner=app.owner,
        replicas=app.replicas,
    )
