"""Resolution of ``Role.overrides``: lazy attribute values, as TorchX HEAD resolves them.

``Role.overrides`` maps an attribute name to a *producer*: a callable (called with no
arguments) or an awaitable (a coroutine, an ``asyncio`` future or task). The first read of the
attribute runs the producer and writes the value back into the same dict, wrapped in a
:class:`ResolvedOverride` (which, called, returns the value), so

* the producer runs once, even with many threads reading at the same time (single flight, with
  a re-entrant lock per overrides dict: a producer may read other overridden attributes of the
  same role; a slow producer on one dict never blocks reads of another);
* every role sharing the dict (a ``macros.Values.apply`` copy and its original) sees the value;
* a producer that raises stays in the dict, so a later read retries.

An awaitable is resolved wherever the read happens: without a running loop in this thread, on
its own loop (or a fresh one for a coroutine); inside a running loop, on a worker thread; a
future bound to the loop running in this thread cannot be waited for synchronously and raises
``RuntimeError`` (``await`` it instead). A value that is neither callable nor awaitable is
returned as it is (TorchX would try to call it).

Private module, imported by ``Role.__getattribute__`` on the first read of an overridden
attribute only: ``import torchx_core.specs`` does not load ``threading`` or ``asyncio`` for it.
"""

from __future__ import annotations

import threading
from typing import Any

#: the reserved key under which an overrides dict keeps its resolution lock
LOCK_KEY = "<overrides resolution lock>"
# LOCK_KEY is not an identifier, so no attribute name collides with it; a copy sharing the
# dict shares the lock

_mint_lock = threading.Lock()


class ResolvedOverride:
    """A resolved value in an overrides dict; calling it returns the value."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __call__(self) -> object:
        return self.value

    def __repr__(self) -> str:
        return f"ResolvedOverride({self.value!r})"


class _LockHolder:
    """The dict entry holding the lock; deep copies share it (a lock cannot be copied)."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock = threading.RLock()

    def __deepcopy__(self, memo: dict[int, object]) -> _LockHolder:
        return self

    def __repr__(self) -> str:
        return "<overrides resolution lock>"


# TorchX's names (``specs.api._OVERRIDES_LOCK_KEY``, ``specs.api._OverridesLock``): the same
# reserved key and the same ``.lock`` holder
_OVERRIDES_LOCK_KEY = LOCK_KEY
_OverridesLock = _LockHolder


def is_internal(value: object) -> bool:
    """True for the lock entry an overrides dict holds (not a user value)."""
    return isinstance(value, _LockHolder)


def _lock_of(overrides: dict[str, Any]) -> Any:
    holder = overrides.get(LOCK_KEY)
    if holder is None:
        with _mint_lock:
            holder = overrides.get(LOCK_KEY)
            if holder is None:
                holder = overrides[LOCK_KEY] = _LockHolder()
    return holder.lock


def resolve(overrides: dict[str, Any], name: str) -> Any:
    """The value of override ``name`` (running its producer once, see the module docstring)."""
    value = overrides[name]
    if isinstance(value, ResolvedOverride):
        return value.value  # no lock once resolved
    is_awaitable = hasattr(value, "__await__")
    if not (is_awaitable or callable(value)):
        return value
    with _lock_of(overrides):
        value = overrides[name]
        if isinstance(value, ResolvedOverride):
            return value.value
        result = _wait_for(name, value) if hasattr(value, "__await__") else value()
        overrides[name] = ResolvedOverride(result)
        return result


def _wait_for(name: str, awaitable: Any) -> Any:
    """Blocks until ``awaitable`` is done, whatever loop runs (or not) in this thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    async def wait() -> Any:
        return await awaitable

    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    get_loop = getattr(awaitable, "get_loop", None)
    bound = get_loop() if get_loop is not None else None
    if bound is not None and bound.is_running() and bound is not here:
        # a future of a loop running in another thread: that loop completes it
        return asyncio.run_coroutine_threadsafe(wait(), bound).result()
    if here is None:
        if bound is not None:
            return bound.run_until_complete(awaitable)
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(awaitable)
        finally:
            loop.close()
    if bound is here:
        raise RuntimeError(
            f"override `{name}` is bound to the event loop currently running in this thread;"
            " `await` it instead of reading the attribute synchronously"
        )
    # inside a running loop: wait on a worker thread (a coroutine on a loop of its own, a
    # future on its idle loop)
    with ThreadPoolExecutor(max_workers=1) as pool:
        if bound is None:
            return pool.submit(asyncio.run, wait()).result()
        return pool.submit(bound.run_until_complete, awaitable).result()
