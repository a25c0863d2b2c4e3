"""The apps the dashboard shows: one snapshot per scheduler, shared by every browser.

A refresh of the apps page (by any number of open browsers) reads each scheduler at most once per
``max_age`` seconds: the first request after the snapshot aged starts a list read of the
scheduler in a thread (through ``Runner.shared_list``; requests that arrive meanwhile share that
one read) and every other request is answered from the snapshot. A request waits at most
``timeout`` seconds for a read: a scheduler that hangs leaves its last rows and an error naming
it, while the other schedulers' rows are shown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.specs import CfgVal

__all__ = ["SORTS", "AppRow", "Board", "Filters", "sort_rows"]

logger: logging.Logger = logging.getLogger(__name__)


_UNFINISHED = ("SUBMITTED", "PENDING", "RUNNING")


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
    ended: float | None = None

    def duration(self, now: float) -> float | None:
        """Seconds from submit to end (to ``now`` while it runs); None if unknown (no submit
        time, or an app that ended at a time its scheduler does not say)."""
        if not self.created or (self.ended is None and self.state not in _UNFINISHED):
            return None
        return max(0.0, (self.ended or now) - self.created)

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
    owner: str = ""

    def keep(self, row: AppRow) -> bool:
        """Whether ``row`` passes (name and owner filters: case-insensitive substrings)."""
        return (
            (not self.scheduler or row.scheduler == self.scheduler)
            and (not self.state or row.state == self.state)
            and (not self.name or self.name.lower() in f"{row.name} {row.app_id}".lower())
            and (not self.owner or self.owner.lower() in (row.owner or "").lower())
        )


def _newest(r: AppRow) -> tuple[float, int, str]:
    # unknown submit times last; then ids by length first (Slurm job 100 is newer than 99)
    return (r.created or 0.0, len(r.app_id), r.app_id)


#: the apps page's sort keys: name -> key of a row (ascending)
SORTS: dict[str, Callable[[AppRow], Any]] = {
    "submitted": _newest,
    "name": lambda r: (r.name.lower(), _newest(r)),
    "state": lambda r: (r.state, _newest(r)),
    "scheduler": lambda r: (r.scheduler, _newest(r)),
    "owner": lambda r: ((r.owner or "").lower(), _newest(r)),
    "ended": lambda r: (r.ended or 0.0, _newest(r)),
    "handle": lambda r: (r.scheduler, len(r.app_id), r.app_id),
}


def sort_rows(rows: list[AppRow], key: str = "submitted", descending: bool = True) -> None:
    """Sorts ``rows`` in place by one of :data:`SORTS` (default: newest first)."""
    rows.sort(key=SORTS[key], reverse=descending)


@dataclass
class _Snapshot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: list[AppRow] = field(default_factory=list)
    error: str = ""
    read_at: float = float("-inf")
    reads: int = 0
    reading: threading.Thread | None = None
    started: float = 0.0


class Board:
    """The apps of ``schedulers``, each listed at most once per ``max_age`` seconds.

    Args:
        runner: the runner whose schedulers are listed
        schedulers: scheduler names, in the order shown
        max_age: how old a scheduler's snapshot may be before a request lists it again
        cfgs: run options per scheduler for its list call (e.g. from ``.torchxconfig``)
        clock: monotonic clock (tests)
        timeout: seconds a request waits for a scheduler's list read
    """

    def __init__(
        self,
        runner: Runner,
        schedulers: Iterable[str],
        max_age: float = 2.0,
        cfgs: Mapping[str, Mapping[str, CfgVal]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = 10.0,
    ) -> None:
        self.runner = runner
        self.schedulers = list(dict.fromkeys(schedulers))
        self.max_age = max_age
        self.timeout = timeout
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
        wanted = [s for s in self.schedulers if not filters.scheduler or s == filters.scheduler]
        readers = [self._start(s) for s in wanted]  # every scheduler read at the same time
        deadline = time.monotonic() + self.timeout
        for reader in readers:
            if reader is not None:
                reader.join(max(0.0, deadline - time.monotonic()))
        for sched in wanted:
            snap_rows, error = self._view(sched)
            rows.extend(r for r in snap_rows if filters.keep(r))
            if error:
                errors[sched] = error
        sort_rows(rows)
        return rows, errors

    def _start(self, sched: str) -> threading.Thread | None:
        """The thread reading ``sched`` (started when its snapshot aged); None: it is fresh."""
        snap = self._snaps[sched]
        with snap.lock:
            if snap.reading is None and self._clock() - snap.read_at >= self.max_age:
                snap.started = time.monotonic()
                snap.reading = threading.Thread(
                    target=self._read, args=(sched,), daemon=True, name=f"dashboard-list-{sched}"
                )
                snap.reading.start()
            return snap.reading

    def _read(self, sched: str) -> None:
        snap = self._snaps[sched]
        rows: list[AppRow] | None = None
        try:
            listed = self.runner.shared_list(sched, self._cfgs.get(sched))
            rows, error = [_row(sched, a) for a in listed], ""
        except Exception as e:  # noqa: BLE001 - shown on the page; other schedulers still list
            error = f"{type(e).__name__}: {e}"
        with snap.lock:
            if error and error != snap.error:
                logger.warning("cannot list the apps of %s: %s", sched, error)
            if rows is not None:
                snap.rows = rows
            snap.error = error
            snap.read_at = self._clock()
            snap.reads += 1
            snap.reading = None

    def _view(self, sched: str) -> tuple[list[AppRow], str]:
        """The rows of ``sched``'s last answer, and what went wrong (``""``: nothing)."""
        snap = self._snaps[sched]
        with snap.lock:
            if snap.reading is None:
                return snap.rows, snap.error
            waited = time.monotonic() - snap.started
            shown = "the apps of its last answer are shown" if snap.reads else "no apps shown yet"
            return snap.rows, (
                f"no answer after {waited:.0f} s (timeout {self.timeout:g} s; still waiting for"
                f" it), {shown}"
            )


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
        ended=getattr(app, "ended", None),
    )
