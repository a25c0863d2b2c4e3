"""One batched status read, and one list read, shared by every watcher of a scheduler.

A triggerer with hundreds of deferred tasks, or a flow with hundreds of tasks, watches many apps
from one process. Asking the scheduler once per app and poll costs N calls per poll interval (N
``squeue`` runs that each dump the whole queue, N throttled ``DescribeJobs``). A
:class:`StatusWatcher` (one per process by default, :func:`default_watcher`, so every Runner of
the process shares it) joins every watcher of apps on one scheduler configuration (the *key* the
Runner gives: scheduler name, factory and parameters) into one *group*:

* a watcher reads with a ``max_age`` (its poll interval) through
  :meth:`Runner.watch_status <torchx_core.runner.api.Runner.watch_status>`; that registers its
  app with the group until it stops asking for a while (or ``Runner.unwatch``);
* a status read less than ``max_age`` seconds ago is answered from the group's cache;
* otherwise one watcher becomes the reader: it fetches **every** watched app of the group with
  one call of the read function it was given (``Runner.status_many``: one
  ``Scheduler.describe_many``), while the others wait for that read instead of starting their own.

So N watchers polling every ``T`` seconds cost one batched call per ``T``, whatever N is. A read
error reaches every watcher of that read (each decides, e.g. the lifecycle's grace clock).
:meth:`StatusWatcher.astatus` answers async callers from the cache without a thread and runs the
reads in a worker thread, so an event loop never blocks.

Finding an app by name (the lifecycle's reattach check as every task starts) lists the
scheduler's apps; :meth:`StatusWatcher.list` lets callers that ask while a list is being read
share the next one, so a flow starting a hundred tasks lists a couple of times, not a hundred.

This module knows nothing of the Runner: it is given keys and read functions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchx_core.specs import AppHandle, AppStatus

if TYPE_CHECKING:
    import asyncio

    from torchx_core.schedulers.api import ListAppResponse
    from torchx_core.specs import CfgVal

__all__ = ["StatusWatcher", "default_watcher", "reset"]

#: Reads the status of many apps at once (``Runner.status_many``).
ReadMany = Callable[[frozenset[AppHandle]], Mapping[AppHandle, AppStatus | None]]

#: The reader waits ``max_age / 20`` (at most this long) before reading, so that watchers asking
#: at about the same time (a triggerer starting hundreds of triggers) join its read instead of
#: making their own; short for quick polls (``Runner.wait``'s first ones).
_GATHER_MAX_S = 0.25


@dataclass
class _Read:
    """One batched read in flight: its apps, and the event its waiters block on."""

    handles: frozenset[AppHandle] = frozenset()
    done: threading.Event = field(default_factory=threading.Event)
    # set with ``done`` when an async reader read: its loop's waiters await it (no polling)
    adone: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None
    error: BaseException | None = None
    results: Mapping[AppHandle, AppStatus | None] = field(default_factory=dict)


@dataclass
class _Group:
    """The watchers of one scheduler configuration."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    watched: dict[AppHandle, int] = field(default_factory=dict)  # handle -> explicit watchers
    asked: dict[AppHandle, float] = field(default_factory=dict)  # handle -> kept in batches until
    cache: dict[AppHandle, tuple[float, AppStatus | None]] = field(default_factory=dict)
    reading: _Read | None = None
    reads: int = 0  # batched reads made (for benchmarks and tests)


@dataclass
class _List:
    """One list read: its callers wait on ``done``."""

    done: threading.Event = field(default_factory=threading.Event)
    rows: list[ListAppResponse] = field(default_factory=list)
    error: BaseException | None = None


@dataclass
class _Lists:
    """The list reads of one scheduler configuration and run options."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    current: _List | None = None  # being read
    pending: _List | None = None  # to read once ``current`` ends; callers join it
    reads: int = 0


def _loop_of_this_thread() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any (a blocking call made from a coroutine)."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread
        return None


def _forget_after(max_age: float) -> float:
    """How long an app that stopped being asked for stays in its group's batches."""
    return max(30.0, 4 * max_age)


def _list_key(key: Hashable, cfg: Mapping[str, CfgVal] | None) -> Hashable:
    return (key, repr(sorted((cfg or {}).items())))


class StatusWatcher:
    """The shared status cache and reads of the watchers of many apps (see the module doc).

    Args:
        clock: a monotonic clock (tests inject one)
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[Hashable, _Group] = {}
        self._lists: dict[Hashable, _Lists] = {}

    def _group(self, key: Hashable) -> _Group:
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group()
            return group

    def watch(self, key: Hashable, handle: AppHandle) -> None:
        """Registers a watcher of ``handle``: every batched read of group ``key`` includes it."""
        group = self._group(key)
        with group.lock:
            group.watched[handle] = group.watched.get(handle, 0) + 1

    def unwatch(self, key: Hashable, handle: AppHandle) -> None:
        """Removes one watcher of ``handle`` (the app leaves the batches with its last watcher)."""
        group = self._group(key)
        with group.lock:
            left = group.watched.get(handle, 0) - 1
            if left > 0:
                group.watched[handle] = left
            else:
                group.watched.pop(handle, None)
                group.asked.pop(handle, None)
                group.cache.pop(handle, None)

    def reads_made(self, key: Hashable) -> int:
        """How many batched reads group ``key`` made so far."""
        return self._group(key).reads

    def _fresh(
        self, group: _Group, handle: AppHandle, max_age: float
    ) -> tuple[bool, AppStatus | None]:
        entry = group.cache.get(handle)
        if entry is not None and self._clock() - entry[0] <= max_age:
            return True, entry[1]
        return False, None

    def _batch(self, group: _Group, handle: AppHandle) -> frozenset[AppHandle]:
        """The apps of the next read: the explicitly watched, the recently asked, and ``handle``."""
        now = self._clock()
        for h in [h for h, until in group.asked.items() if until < now]:
            del group.asked[h]
            if h not in group.watched:
                group.cache.pop(h, None)
        return frozenset(group.watched) | frozenset(group.asked) | {handle}

    def _read(self, group: _Group, read: _Read, read_many: ReadMany) -> None:
        try:
            statuses = read.results = read_many(read.handles)
            now = self._clock()
            with group.lock:
                for h, s in statuses.items():
                    group.cache[h] = (now, s)
        except BaseException as e:  # noqa: BLE001 - handed to every waiter of this read
            read.error = e
        finally:
            with group.lock:
                group.reads += 1
                group.reading = None
            read.done.set()

    @staticmethod
    def _hand_back(group: _Group, read: _Read) -> None:
        """Ends a read its leader gave up before reading (interrupted while it gathered), empty:
        its waiters read again. Left in flight, it would hold every later caller of the group."""
        with group.lock:
            group.reading = None
        read.done.set()
        if read.adone is not None:
            read.adone.set()

    def status(
        self, key: Hashable, handle: AppHandle, max_age: float, read_many: ReadMany
    ) -> AppStatus | None:
        """The status of ``handle``, at most ``max_age`` seconds old, read in one batch per group.

        Raises what the batched read raised (the scheduler could not be asked).
        """
        group = self._group(key)
        while True:
            with group.lock:
                hit, status = self._fresh(group, handle, max_age)
                if hit:
                    return status
                group.asked[handle] = self._clock() + _forget_after(max_age)
                read = group.reading
                lead = read is None
                if read is None:  # nobody reads: this watcher reads for the whole group
                    read = group.reading = _Read()
            if lead:
                try:
                    time.sleep(min(_GATHER_MAX_S, max_age / 20))  # let watchers asking now join
                except BaseException:  # e.g. Airflow's execution_timeout raised in the sleep
                    self._hand_back(group, read)
                    raise
                with group.lock:
                    read.handles = self._batch(group, handle)
                self._read(group, read, read_many)
            elif read.loop is not None and read.loop is _loop_of_this_thread():
                # the reader is a coroutine of the event loop this thread runs: waiting for it
                # here would block that loop, and the read would never end (a deadlock)
                return read_many(frozenset({handle}))[handle]
            else:
                read.done.wait()
            if handle in read.handles:
                if read.error is not None:
                    raise read.error
                return read.results[handle]
            # the read in flight did not include this app: loop and read (or join the next read)

    async def astatus(
        self, key: Hashable, handle: AppHandle, max_age: float, read_many: ReadMany
    ) -> AppStatus | None:
        """:meth:`status` for async callers (triggers): the event loop never blocks, and waiting
        for another watcher's read holds no worker thread (hundreds of watchers wait on one read
        while only the reader uses a thread)."""
        import asyncio

        group = self._group(key)
        while True:
            with group.lock:  # held only for dict updates
                group.asked[handle] = self._clock() + _forget_after(max_age)
                hit, status = self._fresh(group, handle, max_age)
                if hit:
                    return status
                read = group.reading
                lead = read is None
                if read is None:
                    adone = asyncio.Event()
                    read = group.reading = _Read(adone=adone, loop=asyncio.get_running_loop())
            if lead:
                try:
                    await asyncio.sleep(min(_GATHER_MAX_S, max_age / 20))  # let others join
                except BaseException:  # cancelled before reading
                    self._hand_back(group, read)
                    raise
                with group.lock:
                    read.handles = self._batch(group, handle)
                try:
                    await asyncio.to_thread(self._read, group, read, read_many)
                finally:
                    adone.set()
            elif read.adone is not None and read.loop is asyncio.get_running_loop():
                await read.adone.wait()
            else:  # a thread (or another loop) reads: check now and then, holding no thread
                while not read.done.is_set():
                    await asyncio.sleep(0.05)
            if handle in read.handles:
                if read.error is not None:
                    raise read.error
                return read.results[handle]

    def list(
        self,
        key: Hashable,
        cfg: Mapping[str, CfgVal] | None,
        read_list: Callable[[], list[ListAppResponse]],
    ) -> list[ListAppResponse]:
        """``read_list()`` (the apps of group ``key`` listed with ``cfg``), shared by the callers
        that ask while a list is read.

        The result is never older than the call: a read already in flight may have begun before
        this caller's app was submitted, so the caller waits for it to end and then shares the
        next read with everyone else who asked meanwhile (one of them reads). With no read in
        flight the caller reads at once. Raises what the read raised, to every caller that shared
        it.
        """
        with self._lock:
            state = self._lists.setdefault(_list_key(key, cfg), _Lists())
        with state.lock:
            before = state.current
            if before is None:
                read = state.current = _List()
                lead = True
            else:
                pending = state.pending
                lead = pending is None
                if pending is None:
                    pending = state.pending = _List()
                read = pending
        if before is not None:
            before.done.wait()  # the list in flight was asked for before this call
        if lead:
            try:
                read.rows = read_list()
            except BaseException as e:  # noqa: BLE001 - handed to every caller of this read
                read.error = e
            finally:
                with state.lock:
                    state.reads += 1
                    if state.current is read:  # the callers who asked meanwhile read next
                        state.current, state.pending = state.pending, None
                read.done.set()
        else:
            read.done.wait()
        if read.error is not None:
            raise read.error
        return list(read.rows)

    def lists_made(self, key: Hashable, cfg: Mapping[str, CfgVal] | None = None) -> int:
        """How many shared list reads were made for group ``key`` and ``cfg`` so far."""
        with self._lock:
            state = self._lists.get(_list_key(key, cfg))
        return state.reads if state is not None else 0

    def clear(self) -> None:
        """Forgets every group, cached status and list read."""
        with self._lock:
            self._groups.clear()
            self._lists.clear()


_DEFAULT = StatusWatcher()


def default_watcher() -> StatusWatcher:
    """The process-wide watcher every Runner uses unless given its own: the Runners of one
    process (one per trigger, the dashboard's) share reads through it."""
    return _DEFAULT


def reset() -> None:
    """Forgets everything the process-wide watcher knows (for tests that reuse app ids)."""
    _DEFAULT.clear()
