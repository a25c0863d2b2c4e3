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
