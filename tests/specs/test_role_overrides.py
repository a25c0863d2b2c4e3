"""Role.overrides resolution as TorchX HEAD does it (torchx_core/specs/_overrides.py).

TorchX HEAD (meta-pytorch/torchx @ cafea3f3): a callable override is called, an awaitable is
awaited wherever the read happens, once (single flight), the value written back into the dict
(a callable wrapper), a failing producer kept for a retry; ``macros.Values.apply`` shares the dict.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from torchx_core.specs import Role, macros


def test_callable_runs_once_and_is_written_back() -> None:
    calls: list[int] = []

    def produce() -> str:
        calls.append(1)
        return "base"

    role = Role("r", "img", overrides={"image": produce, "entrypoint": lambda: "main.py"})
    assert (role.image, role.image, role.entrypoint) == ("base", "base", "main.py")
    assert calls == [1]
    assert role.overrides["image"]() == "base"  # the entry stays callable
    assert copy.deepcopy(role).image == "base"  # the lock entry survives a deep copy


def test_plain_values_are_returned_as_they_are() -> None:
    # (TorchX would call them and fail: listed in the README's differences)
    assert Role("r", "img", overrides={"entrypoint": "b.py"}).entrypoint == "b.py"


def test_single_flight_across_threads_and_roles_sharing_the_dict() -> None:
    calls: list[int] = []
    started = threading.Event()
    release = threading.Event()

    def produce() -> str:
        calls.append(1)
        started.set()
        assert release.wait(30)
        return "base"

    shared: dict[str, object] = {"image": produce}
    roles = [Role("a", "i", overrides=shared), Role("b", "i", overrides=shared)]
    other = Role("c", "i", overrides={"image": lambda: "fast"})
    with ThreadPoolExecutor(max_workers=8) as pool:
        reads = [pool.submit(lambda k=k: roles[k % 2].image) for k in range(6)]
        assert started.wait(30)
        # a slow producer of one dict does not block another dict's reads
        assert pool.submit(lambda: other.image).result(timeout=30) == "fast"
        release.set()
        assert [r.result(timeout=30) for r in reads] == ["base"] * 6
    assert calls == [1]


def test_a_producer_may_read_another_override_of_its_role() -> None:
    ov: dict[str, object] = {"entrypoint": lambda: "main"}
    role = Role("r", "img", overrides=ov)
    ov["image"] = lambda: f"{role.entrypoint}-img"
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(role.image), daemon=True)
    t.start()
    t.join(30)
    assert out == ["main-img"]


def test_failing_producer_stays_for_a_retry() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        return "ok"

    role = Role("r", "img", overrides={"image": flaky})
    with pytest.raises(RuntimeError, match="boom"):
        _ = role.image
    assert role.overrides["image"] is flaky
    assert role.image == "ok"


def test_awaitables_resolve_in_every_context() -> None:
    async def value(v: str) -> str:
        await asyncio.sleep(0)
        return v

    # no loop running here: a coroutine runs on a fresh loop
    assert Role("r", "i", overrides={"image": value("a")}).image == "a"

    # inside a running loop: on a worker thread
    async def inside() -> str:
        return Role("r", "i", overrides={"image": value("b")}).image

    assert asyncio.run(inside()) == "b"

    # a future of a loop running in another thread: that loop completes it
    owner = asyncio.new_event_loop()
    t = threading.Thread(target=owner.run_forever, daemon=True)
    t.start()
    try:

        async def make() -> asyncio.Future[str]:
            fut = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.01, fut.set_result, "c")
            return fut

        fut = asyncio.run_coroutine_threadsafe(make(), owner).result()
        assert Role("r", "i", overrides={"image": fut}).image == "c"
        fut2 = asyncio.run_coroutine_threadsafe(make(), owner).result()

        async def inside_other() -> str:
            return Role("r", "i", overrides={"image": fut2}).image

        assert asyncio.run(inside_other()) == "c"
    finally:
        owner.call_soon_threadsafe(owner.stop)
        t.join(5)
        owner.close()


def test_future_of_the_running_loop_must_be_awaited() -> None:
    async def read() -> None:
        fut = asyncio.get_running_loop().create_future()
        role = Role("r", "i", overrides={"image": fut})
        with pytest.raises(RuntimeError, match="currently running in this thread"):
            _ = role.image
        assert role.overrides["image"] is fut

    asyncio.run(read())


def test_macros_apply_shares_the_overrides_dict() -> None:
    ov = {"entrypoint": lambda: "lazy.py"}
    role = Role("r", "img", args=[macros.img_root], overrides=ov)
    values = macros.Values(img_root="root", app_id="id", replica_id="0", rank0_env="R")
    copied = values.apply(role)
    assert role.overrides is ov and copied.overrides is ov
    assert copied.entrypoint == "lazy.py" and role.entrypoint == "lazy.py"
    assert copied.args == ["root"]
    plain = Role("r", "img")
    assert values.apply(plain).overrides is not plain.overrides


def test_torchx_lock_entry_names_and_no_lock_once_resolved() -> None:
    """TorchX's ``specs.api._OVERRIDES_LOCK_KEY``/``_OverridesLock``: the dict entry holding the
    resolution lock (``.lock``), which a resolved read does not take; a dict holding only that
    entry has no overrides (``macros.Values.apply`` gives the copy its own dict)."""
    from torchx_core.specs.api import _OVERRIDES_LOCK_KEY, _OverridesLock

    role = Role("r", "img", overrides={"image": lambda: "base"})
    assert role.image == "base"
    holder = role.overrides[_OVERRIDES_LOCK_KEY]
    assert isinstance(holder, _OverridesLock)

    class NoLock:
        def __enter__(self) -> None:
            raise AssertionError("a resolved read took the resolution lock")

        def __exit__(self, *exc: object) -> None:
            pass

    holder.lock = NoLock()
    assert role.image == "base"
    values = macros.Values(img_root="i", app_id="a", replica_id="0", rank0_env="R")
    locked = Role("r", "img")
    locked.overrides[_OVERRIDES_LOCK_KEY] = _OverridesLock()
    assert values.apply(locked).overrides is not locked.overrides
