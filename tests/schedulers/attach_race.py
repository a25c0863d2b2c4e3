"""Two attempts of one identity calling ``AppLifecycle.attach`` at the same moment.

Each attempt is a process of its own (as a retried Airflow task racing its predecessor is),
released by one ``multiprocessing.Barrier`` per trial; the caller checks that every trial ended
with exactly one live app of the identity, watched by both attempts.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from collections import defaultdict
from typing import Any

from torchx_core import specs
from torchx_core.runner import AppLifecycle, get_runner
from torchx_core.runner.lifecycle import app_name
from torchx_core.specs import is_terminal


def _attempt(
    scheduler: str,
    cfg: dict[str, Any],
    app: specs.AppDef,
    run: str,
    owner: str,
    trials: int,
    barrier: Any,
    out: Any,
) -> None:
    with get_runner("race") as runner:
        life = AppLifecycle(runner, scheduler, owner=owner, cfg=cfg)
        for t in range(trials):
            barrier.wait(timeout=120)
            try:
                att = life.attach(app, (run, t))
                out.put((t, owner, att.how, att.app_handle))
            except Exception as e:  # noqa: BLE001 - reported to the parent
                out.put((t, owner, "error", repr(e)))


def race(
    scheduler: str, cfg: dict[str, Any], app: specs.AppDef, trials: int = 20
) -> dict[str, Any]:
    """Runs ``trials`` races of two attempts; returns per trial the attachments and the live
    apps of the identity (after both attaches returned). Cancels every app it made."""
    ctx = mp.get_context("spawn")
    run = uuid.uuid4().hex[:8]
    barrier = ctx.Barrier(2)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_attempt, args=(scheduler, cfg, app, run, f"try={i}", trials, barrier, out)
        )
        for i in (1, 2)
    ]
    for p in procs:
        p.start()
    got: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    try:
        for _ in range(2 * trials):
            t, owner, how, handle = out.get(timeout=300)
            got[t].append((owner, how, handle))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    names = {app_name(app.name, (run, t)): t for t in range(trials)}
    with get_runner("race-check") as runner:
        # a cancelled duplicate may still be ending (Slurm: COMPLETING reads as RUNNING): a
        # duplicate left running stays, one being cancelled goes within a few seconds
        deadline = time.monotonic() + 60
        while True:
            rows = [r for r in runner.list(scheduler, cfg=cfg) if r.name in names]
            live: dict[int, list[str]] = {}
            for row in rows:
                if not is_terminal(row.state):
                    live.setdefault(names[row.name], []).append(row.app_handle)
            if all(len(v) <= 1 for v in live.values()) or time.monotonic() > deadline:
                break
            time.sleep(1)
        for row in rows:
            runner.cancel(row.app_handle)
    return {"attached": dict(got), "live": live}


def check(result: dict[str, Any], trials: int) -> list[str]:
    """The trials that did not end with exactly one live app, watched by both attempts."""
    bad = []
    for t in range(trials):
        attached = result["attached"].get(t, [])
        handles = {h for _, _, h in attached}
        hows = sorted(how for _, how, _ in attached)
        live = result["live"].get(t, [])
        if len(attached) != 2 or len(handles) != 1 or len(live) != 1 or "error" in hows:
            bad.append(f"trial {t}: attached {attached}, live {live}")
    return bad


# -- who owns a raced app: the attempt that took the name lock last ---------------------------

_PHASE = ["attach"]  # what the attempt of this process is doing (traced with each lock taken)


def _traced_name_locks(trace: str, owner: str) -> None:
    """Makes every local name lock taken in this process append ``<phase> <name> <owner>`` to
    ``trace`` while held: the file lists the holders in the order they held the lock.

    After releasing a lock it took to attach, the process pauses 50 ms, as a busy machine may
    deschedule it there: whatever an attempt does after the release (recording its owner, on
    the old code) then lands after the next holder's adoption, as it can in production."""
    import contextlib
    import os
    from collections.abc import Iterator

    from torchx_core.schedulers.local.scheduler import LocalScheduler

    real = LocalScheduler.name_lock

    @contextlib.contextmanager
    def name_lock(self: LocalScheduler, name: str) -> Iterator[bool]:
        with real(self, name) as held:
            fd = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{_PHASE[0]} {name} {owner}\n".encode())
            finally:
                os.close(fd)
            yield held
        if _PHASE[0] == "attach":
            time.sleep(0.05)

    LocalScheduler.name_lock = name_lock  # type: ignore[method-assign]


def _owning_attempt(
    app: specs.AppDef,
    run: str,
    owner: str,
    trials: int,
    barrier: Any,
    out: Any,
    trace: str,
) -> None:
    _traced_name_locks(trace, owner)
    with get_runner("race") as runner:
        life = AppLifecycle(runner, "local_cwd", owner=owner)
        for t in range(trials):
            barrier.wait(timeout=120)
            _PHASE[0] = "attach"
            try:
                att = life.attach(app, (run, t))
                how, handle = att.how, att.app_handle
            except Exception as e:  # noqa: BLE001 - reported to the parent
                how, handle = "error", repr(e)
            barrier.wait(timeout=120)  # every attempt attached: now each one's kill path runs
            _PHASE[0] = "cancel"
            cancelled = life.cancel(handle, timeout=60) if how != "error" else None
            out.put((t, owner, how, handle, cancelled))


def race_owners(
    app: specs.AppDef, attempts: int, trials: int, trace: str
) -> dict[int, dict[str, Any]]:
    """``trials`` races of ``attempts`` processes attaching one identity on ``local_cwd``, each
    followed by every attempt's kill path (``AppLifecycle.cancel``). Per trial: the
    attachments ``(owner, how, handle, cancelled)``, the owner recorded with the app and the
    owners in the order they held the name lock while attaching."""
    ctx = mp.get_context("spawn")
    run = uuid.uuid4().hex[:8]
    barrier = ctx.Barrier(attempts)
    out = ctx.Queue()
    owners = [f"try={i}" for i in range(1, attempts + 1)]
    procs = [
        ctx.Process(target=_owning_attempt, args=(app, run, o, trials, barrier, out, trace))
        for o in owners
    ]
    for p in procs:
        p.start()
    got: dict[int, list[tuple[str, str, str, bool | None]]] = defaultdict(list)
    try:
        for _ in range(attempts * trials):
            t, owner, how, handle, cancelled = out.get(timeout=300)
            got[t].append((owner, how, handle, cancelled))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    names = {app_name(app.name, (run, t)): t for t in range(trials)}
    order: dict[int, list[str]] = defaultdict(list)
    with open(trace, encoding="utf-8") as f:
        for line in f:
            phase, name, owner = line.split()
            if phase == "attach" and name in names:
                order[names[name]].append(owner)
    result: dict[int, dict[str, Any]] = {}
    with get_runner("race-check") as runner:
        for t in range(trials):
            handles = {h for _, how, h, _ in got[t] if how != "error"}
            recorded = [runner.owner(h) for h in sorted(handles)]
            for h in handles:
                runner.cancel(h)
            result[t] = {"attached": got[t], "owners": recorded, "lock_order": order[t]}
    return result


def check_owners(result: dict[int, dict[str, Any]], attempts: int) -> list[str]:
    """The trials where the owner is not the attempt that took the name lock last, or where a
    kill path other than that attempt's cancelled the app (or that one's did not)."""
    bad = []
    for t, r in sorted(result.items()):
        attached, order = r["attached"], r["lock_order"]
        last = order[-1] if order else None
        hows = sorted(how for _, how, _, _ in attached)
        cancels = {owner: c for owner, _, _, c in attached}
        expected = {owner: owner == last for owner, _, _, _ in attached}
        if (
            len(attached) != attempts
            or len({h for _, _, h, _ in attached}) != 1
            or hows != ["reattached"] * (attempts - 1) + ["submitted"]
            or len(order) != attempts
            or r["owners"] != [last]
            or cancels != expected
        ):
            bad.append(f"trial {t}: {r}")
    return bad
