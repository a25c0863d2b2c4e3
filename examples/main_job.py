"""The README's main job: a real multi-replica app on the local scheduler.

    python -m examples.main_job            # or: make demo

Three ``worker`` replicas each integrate 4/(1+x^2) over their third of [0, 1] (a slice of pi),
print their rank and partial result, and write it to a shared directory; an ``aggregate``
replica waits for the parts and prints pi. The launcher streams every replica's log (prefixed
``role/replica``, like ``torchx run``), then prints the final status. It exits non-zero unless the
app SUCCEEDED.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

from torchx_core.runner import Runner, get_runner
from torchx_core.specs import AppDef, AppState, Resource, Role, macros

WORKERS = 3
STEPS = 3_000_000


def _worker(rank: int, world: int, out: str, steps: int = STEPS) -> None:
    lo, hi = rank / world, (rank + 1) / world
    n = steps // world
    h = (hi - lo) / n
    total = sum(4.0 / (1.0 + (lo + (i + 0.5) * h) ** 2) for i in range(n)) * h
    print(
        f"worker rank={rank}/{world} host={socket.gethostname()} pid={os.getpid()}"
        f" app={os.environ.get('TORCHX_APP_ID')} integral[{lo:.3f},{hi:.3f}]={total:.12f}",
        flush=True,
    )
    tmp = os.path.join(out, f".part-{rank}")
    with open(tmp, "w") as f:
        f.write(repr(total))
    os.replace(tmp, os.path.join(out, f"part-{rank}"))


def _aggregate(world: int, out: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    parts: dict[int, float] = {}
    while len(parts) < world:
        for r in range(world):
            path = os.path.join(out, f"part-{r}")
            if r not in parts and os.path.exists(path):
                with open(path) as f:
                    parts[r] = float(f.read())
        if time.monotonic() > deadline:
            sys.exit(f"aggregate: only {sorted(parts)} of {world} parts arrived")
        time.sleep(0.05)
    pi = sum(parts.values())
    print(
        f"aggregate: pi ~= {pi:.12f} from {world} workers"
        f" (error {abs(pi - 3.141592653589793):.2e})",
        flush=True,
    )


def make_app(out: str, steps: int | None = None) -> AppDef:
    """The app: WORKERS worker replicas and one aggregator, all running this file.

    ``steps`` is the number of integration steps (default: ``STEPS`` at call time).
    """
    small = Resource(cpu=1, gpu=0, memMB=256)
    return AppDef(
        name="pi",
        roles=[
            Role(
                name="worker",
                image=os.getcwd(),
                entrypoint=sys.executable,
                args=[
                    os.path.abspath(__file__),
                    "worker",
                    "--rank",
                    macros.replica_id,
                    "--world",
                    str(WORKERS),
                    "--out",
                    out,
                    "--steps",
                    str(steps or STEPS),
                ],
                num_replicas=WORKERS,
                resource=small,
            ),
            Role(
                name="aggregate",
                image=os.getcwd(),
                entrypoint=sys.executable,
                args=[
                    os.path.abspath(__file__),
                    "aggregate",
                    "--world",
                    str(WORKERS),
                    "--out",
                    out,
                ],
                resource=small,
            ),
        ],
    )


def _follow(runner: Runner, handle: str, role: str, k: int, lock: threading.Lock) -> None:
    for line in runner.log_lines(handle, role, k, should_tail=True):
        with lock:
            sys.stdout.write(f"{role}/{k} {line}")
            sys.stdout.flush()


def launch() -> int:
    """Runs the app on ``local_cwd``, streams its logs and prints the final status."""
    out = tempfile.mkdtemp(prefix="torchx-main-job-")
    app = make_app(out)
    with get_runner() as runner:
        handle = runner.run(app, scheduler="local_cwd")
        print(f"launched {handle}", flush=True)
        lock = threading.Lock()
        threads = [
            threading.Thread(target=_follow, args=(runner, handle, role.name, k, lock), daemon=True)
            for role in app.roles
            for k in range(role.num_replicas)
        ]
        for t in threads:
            t.start()
        try:
            status = runner.wait(handle, wait_interval=0.5)
        except KeyboardInterrupt:
            print(f"interrupted: cancelling {handle}", flush=True)
            runner.cancel(handle)
            status = runner.status(handle)
        for t in threads:
            t.join(timeout=10)
        print(status.format() if status else f"{handle}: unknown app", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return 0 if status is not None and status.state == AppState.SUCCEEDED else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point: no arguments launches the app; ``worker``/``aggregate`` run inside it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["worker", "aggregate"])
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=WORKERS)
    parser.add_argument("--out", default="")
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    if args.mode == "worker":
        _worker(args.rank, args.world, args.out, args.steps)
        return 0
    if args.mode == "aggregate":
        _aggregate(args.world, args.out)
        return 0
    return launch()


if __name__ == "__main__":
    sys.exit(main())
