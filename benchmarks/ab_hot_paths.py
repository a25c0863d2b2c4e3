"""Hot paths of two checkouts side by side: wall time interleaved, and instruction counts.

Compares a base checkout (e.g. a ``git worktree`` of an older commit, with its own ``.venv``
from ``make venv``) with this one on what must not get slower:

* ``cli_run``: ``torchx run -s local_cwd utils.echo --msg hi``, whole process (waits, streams);
* ``cli_status``: ``torchx status`` of a finished local app, whole process;
* ``import_specs``: ``python -c "import torchx_core.specs"``, whole process;
* ``status_fresh``: the first ``describe`` of a local app in a fresh process (in-process time);
* ``fanout1024``: ``Runner.run`` + ``wait`` of 1 role x 1024 replicas of ``/bin/true``.

Runs alternate base/head (A,B,B,A,...) so that load drifts of a shared machine hit both alike;
prints min and median. ``--instructions`` also counts the instructions of ``import
torchx_core.specs``, ``torchx run --dryrun`` and ``torchx status`` under callgrind (valgrind):
unlike wall time they do not change with the machine's load. Not part of ``make bench`` (it
needs a base checkout)::

    git worktree add /tmp/base 627e2c2 && make -C /tmp/base venv
    .venv/bin/python benchmarks/ab_hot_paths.py --base /tmp/base [-n 10] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FANOUT = """
import time
from torchx_core import specs
from torchx_core.runner import get_runner
role = specs.Role("r", image=".", entrypoint="/bin/true", num_replicas=1024)
with get_runner() as runner:
    t = time.perf_counter()
    status = runner.wait(runner.run(specs.AppDef("bench", roles=[role]), "local_cwd", {}),
                         wait_interval=0.05)
    elapsed = time.perf_counter() - t
assert status.state.name == "SUCCEEDED", status
print(elapsed)
"""
# the TorchX module paths: both older and newer checkouts have them
SUBMIT = (
    "from torchx_core import specs; from torchx_core.schedulers.local_scheduler import"
    " create_scheduler; s = create_scheduler('x'); i = s.submit(specs.AppDef('tiny',"
    " roles=[specs.Role('r', image='.', entrypoint='/bin/true')]), {}); s.wait(i); print(i)"
)
PROBE = (
    "import sys, time; from torchx_core.schedulers.local_scheduler import create_scheduler;"
    "s = create_scheduler('x'); t = time.perf_counter(); s.describe(sys.argv[1]);"
    "print(time.perf_counter() - t)"
)
CLI = ["-m", "torchx_core.cli.main"]
RUN_ARGS = ["run", "--scheduler", "local_cwd", "utils.echo", "--msg", "hi"]


class Checkout:
    def __init__(self, label: str, root: Path, work: Path) -> None:
        self.label = label
        self.python = str(root / ".venv" / "bin" / "python")
        self.env = {
            **os.environ,
            "TORCHX_LOCAL_ROOT": str(work / f"root-{label}"),
            "HOME": str(work),  # no user .torchxconfig
            "LOGLEVEL": "INFO",
        }
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what users get: cached bytecode
        self.work = work
        self.app_id = self.out("-c", SUBMIT).split()[-1]

    def out(self, *args: str) -> str:
        return subprocess.run(
            [self.python, *args], cwd=self.work, env=self.env, capture_output=True, text=True,
            check=True, timeout=600,
        ).stdout  # fmt: skip

    def whole(self, *args: str) -> float:
        t = time.perf_counter()
        subprocess.run(
            [self.python, *args], cwd=self.work, env=self.env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, check=True, timeout=600,
        )  # fmt: skip
        return time.perf_counter() - t

    def instructions(self, *args: str) -> int:
        """Instructions of the (main) process under callgrind."""
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", self.python, *args],
            cwd=self.work, env=self.env, capture_output=True, text=True, check=True, timeout=900,
        )  # fmt: skip
        pid = re.search(r"==(\d+)== Command:", proc.stderr)
        counts = dict(re.findall(r"==(\d+)== Collected : (\d+)", proc.stderr))
        return int(counts[pid.group(1)] if pid and pid.group(1) in counts else 0)


BENCHES: dict[str, tuple[Callable[[Checkout], float], int]] = {
    "cli_run": (lambda c: c.whole(*CLI, *RUN_ARGS), 2),
    "cli_status": (lambda c: c.whole(*CLI, "status", f"local_cwd://x/{c.app_id}"), 2),
    "import_specs": (lambda c: c.whole("-c", "import torchx_core.specs"), 2),
    "status_fresh": (lambda c: float(c.out("-c", PROBE, c.app_id).split()[-1]), 2),
    "fanout1024": (lambda c: float(c.out("-c", FANOUT).split()[-1]), 1),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument(
        "-n", "--runs", type=int, default=10, help="runs per side (x2 for fast ones)"
    )
    parser.add_argument("--instructions", action="store_true", help="also count instructions")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ab-hot-paths-"))
    try:
        base = Checkout("base", args.base.resolve(), work)
        head = Checkout("head", REPO, work)
        print(f"base = {args.base}, head = {REPO}; ms (min / median), head/base of the medians")
        for name, (bench, factor) in BENCHES.items():
            times: dict[str, list[float]] = {"base": [], "head": []}
            for i in range(max(2, args.runs * factor // (2 if name == "fanout1024" else 1))):
                for side in (base, head) if i % 2 == 0 else (head, base):
                    times[side.label].append(bench(side))
            b, h = times["base"], times["head"]
            print(
                f"  {name:13s} base {min(b) * 1e3:8.2f} / {statistics.median(b) * 1e3:8.2f}"
                f"   head {min(h) * 1e3:8.2f} / {statistics.median(h) * 1e3:8.2f}"
                f"   {statistics.median(h) / statistics.median(b):.3f}x  (n={len(b)})",
                flush=True,
            )
        if args.instructions:
            print("instructions (callgrind, main process), head/base")
            for name, cmd in {
                "python -c pass": ["-c", "pass"],
                "import_specs": ["-c", "import torchx_core.specs"],
                "cli_run --dryrun": [*CLI, "run", "--dryrun", *RUN_ARGS[1:]],
                "cli_run": [*CLI, *RUN_ARGS],
            }.items():
                ib, ih = base.instructions(*cmd), head.instructions(*cmd)
                print(
                    f"  {name:17s} base {ib / 1e6:8.1f} M   head {ih / 1e6:8.1f} M   {ih / ib:.3f}x"
                )
            ib = base.instructions(*CLI, "status", f"local_cwd://x/{base.app_id}")
            ih = head.instructions(*CLI, "status", f"local_cwd://x/{head.app_id}")
            print(
                f"  {'cli_status':17s} base {ib / 1e6:8.1f} M   head {ih / 1e6:8.1f} M"
                f"   {ih / ib:.3f}x"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
