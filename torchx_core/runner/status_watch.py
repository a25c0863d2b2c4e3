"""One batched status read shared by every watcher of a scheduler in this process.

A triggerer with hundreds of deferred tasks, or a flow with hundreds of tasks, watches many apps
from one process. Asking the scheduler once per app and poll costs N calls per poll interval (N
``squeue`` runs that each dump the whole queue, N throttled ``DescribeJobs``). Here every watcher
of apps on one scheduler (same scheduler name, factory and parameters) joins one *group*:

* a watcher reads through :func:`shared_status` with a ``max_age`` (its poll interval); that
  registers its app with the group until it stops asking for a while (or :func:`unwatch`);
* a status read less than ``max_age`` seconds ago is answered from the group's cache;
* otherwise one watcher becomes the reader: it fetches **every** watched app of the group with one
  :meth:`Runner.status_many <torchx_core.runner.api.Runner.status_many>` call (one
  ``Scheduler.describe_many``), while the others wait for that read instead of starting their own.

So N watchers polling every ``T`` seconds cost one batched call per ``T``, whatever N is. A read
error reaches every watcher of that read (each decides, e.g. the lifecycle's grace clock).
Async callers use :func:`ashared_status`, which answers from the cache without a thread and runs
the reads in a worker thread, so an event loop never blocks.

Finding an app by name (the lifecycle's reattach check as every task starts) lists the
scheduler's apps; :func:`shared_list` lets callers that ask while a list is being read share the
next one, so a flow starting a hundred tasks lists a couple of times, not a hundred.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchx_core.specs import AppHandle, AppStatus, parse_app_handle

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.schedulers.api import ListAppResponse
    from torchx_core.specs import CfgVal

__all__ = ["ashared_status", "reset", "shared_list", "shared_status", "unwatch", "watch"]

_Clock = Callable[[], float]


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
    results: dict[AppHandle, AppStatus | None] = field(default_factory=dict)


@dataclass
class _Group:
    """The watchers of one scheduler configuration."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    watched: dict[AppHandle, int] = field(default_factory=dict)  # handle -> explicit watchers
    asked: dict[AppHandle, float] = field(default_factory=dict)  # handle -> kept in batches until
    cache: dict[AppHandle, tuple[float, AppStatus | None]] = field(default_factory=dict)
    reading: _Read | None = None
    reads: int = 0  # batched reads made (for benchmarks and tests)


_groups: dict[Hashable, _Group] = {}
_groups_lock = threading.Lock()
_clock: _Clock = time.monotonic


def _key(runner: Runner, handle: AppHandle) -> Hashable:
    return _backend_key(runner, parse_app_handle(handle).scheduler_backend)


def _backend_key(runner: Runner, backend: str) -> Hashable:
    factory = runner._scheduler_factories.get(backend)
    params = repr(sorted(runner._scheduler_params.items()))
    return (backend, factory, params)


def _group(runner: Runner, handle: AppHandle) -> _Group:
    key = _key(runner, handle)
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = _Group()
        return group


def watch(runner: Runner, handle: AppHandle) -> None:
    """Registers a watcher of ``handle``: every batched read of its group includes the app."""
    group = _group(runner, handle)
    with group.lock:
        group.watched[handle] = group.watched.get(handle, 0) + 1


def unwatch(runner: Runner, handle: AppHandle) -> None:
    """Removes one watcher of ``handle`` (the app leaves the batches with its last watcher)."""
    group = _group(runner, handle)
    with group.lock:
        left = group.watched.get(handle, 0) - 1
        if left > 0:
            group.watched[handle] = left
        else:
            group.watched.pop(handle, None)
            group.asked.pop(handle, None)
            group.cache.pop(handle, None)


def reads_made(runner: Runner, handle: AppHandle) -> int:
    """How many batched reads the group of ``handle`` made so far."""
    return _group(runner, handle).reads


def _fresh(group: _Group, handle: AppHandle, max_age: float) -> tuple[bool, AppStatus | None]:
    entry = group.cache.get(handle)
    if entry is not None and _clock() - entry[0] <= max_age:
        return True, entry[1]
    return False, None


def shared_status(runner: Runner, handle: AppHandle, max_age: float) -> AppStatus | None:
    """The status of ``handle``, at most ``max_age`` seconds old, read in one batch per group.

    Raises what the batched read raised (the scheduler could not be asked).
    """
    group = _group(runner, handle)
    while True:
        with group.lock:
            hit, status = _fresh(group, handle, max_age)
            if hit:
                return status
            group.asked[handle] = _clock() + _forget_after(max_age)
            read = group.reading
            lead = read is None
            if read is None:  # nobody reads: this watcher reads for the whole group
                read = group.reading = _Read()
        if lead:
            time.sleep(min(_GATHER_MAX_S, max_age / 20))  # let watchers asking now join it
            with group.lock:
                read.handles = _batch(group, handle)
            _read(runner, group, read)
        else:
            read.done.wait()
        if handle in read.handles:
            if read.error is not None:
                raise read.error
            return read.results[handle]
        # the read in flight did not include this app: loop and read (or join the next read)


def _forget_after(max_age: float) -> float:
    """How long an app that stopped being asked for stays in its group's batches."""
    return max(30.0, 4 * max_age)


def _batch(group: _Group, handle: AppHandle) -> frozenset[AppHandle]:
    """The apps of the next read: the explicitly watched, the recently asked, and ``handle``."""
    now = _clock()
    for h in [h for h, until in group.asked.items() if until < now]:
        del group.asked[h]
        if h not in group.watched:
            group.cache.pop(h, None)
    return frozenset(group.watched) | frozenset(group.asked) | {handle}


def _read(runner: Runner, group: _Group, read: _Read) -> None:
    try:
        statuses = read.results = runner.status_many(read.handles)
        now = _clock()
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


async def ashared_status(runner: Runner, handle: AppHandle, max_age: float) -> AppStatus | None:
    """:func:`shared_status` for async callers (triggers): the event loop never blocks, and
    waiting for another watcher's read holds no worker thread (hundreds of watchers wait on one
    read while only the reader uses a thread)."""
    group = _group(runner, handle)
    while True:
        with group.lock:  # held only for dict updates
            group.asked[handle] = _clock() + _forget_after(max_age)
            hit, status = _fresh(group, handle, max_age)
            if hit:
                return status
            read = group.reading
            lead = read is None
            if read is None:
                adone = asyncio.Event()
                read = group.reading = _Read(adone=adone, loop=asyncio.get_running_loop())
        if lead:
            await asyncio.sleep(min(_GATHER_MAX_S, max_age / 20))  # let others join this read
            with group.lock:
                read.handles = _batch(group, handle)
            try:
                await asyncio.to_thread(_read, runner, group, read)
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


_lists: dict[Hashable, _Lists] = {}


def _list_key(runner: Runner, scheduler: str, cfg: Mapping[str, CfgVal] | None) -> Hashable:
    return (_backend_key(runner, scheduler), repr(sorted((cfg or {}).items())))


def shared_list(
    runner: Runner, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
) -> list[ListAppResponse]:
    """``runner.list(scheduler, cfg)``, shared by the callers that ask while a list is read.

    The result is never older than the call: a read already in flight may have begun before
    this caller's app was submitted, so the caller waits for it to end and then shares the next
    read with everyone else who asked meanwhile (one of them reads). With no read in flight the
    caller reads at once. Raises what the read raised, to every caller that shared it.
    """
    with _groups_lock:
        state = _lists.setdefault(_list_key(runner, scheduler, cfg), _Lists())
    with state.lock:
        before = state.current
        if before is None:
            read = state.current = _List()
            lead = True
        else:
            lead = state.pending is None
            if lead:
                state.pending = _List()
            read = state.pending
    if before is not None:
        before.done.wait()  # the list in flight was asked for before this call
    if lead:
        try:
            read.rows = runner.list(scheduler, cfg)
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


def lists_made(runner: Runner, scheduler: str, cfg: Mapping[str, CfgVal] | None = None) -> int:
    """How many shared list reads were made for ``scheduler`` and ``cfg`` so far."""
    with _groups_lock:
        state = _lists.get(_list_key(runner, scheduler, cfg))
    return state.reads if state is not None else 0


def reset() -> None:
    """Forgets every group, cached status and list read (for tests that reuse app ids)."""
    with _groups_lock:
        _groups.clear()
        _lists.clear()
