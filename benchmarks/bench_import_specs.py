"""Import cost of ``torchx_core.specs`` vs TorchX 0.7.0's ``torchx.specs``.

Creates (on first run) a separate venv under ``.bench/torchx070`` holding ``torchx==0.7.0``
from PyPI, then times fresh interpreters:

* ``python -c "import torchx.specs"``        (TorchX 0.7.0 venv)
* ``python -c "import torchx_core.specs"``   (our .venv)
* ``python -c "pass"``                        (each interpreter's start-up, subtracted for "net")

and the ``-X importtime`` cumulative time of the top-level package. Prints best/median of N runs
and the ratios. Target: ours >= 3x faster.

usage: .venv/bin/python benchmarks/bench_import_specs.py [N]
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baseline import OUR_PYTHON, REPO, torchx070_python


def interleaved_best(commands: dict[str, list[str]], n: int) -> dict[str, tuple[float, float]]:
    """Best and median wall seconds per command; the commands take turns, so a burst of load
    on the machine hits all of them alike."""
    times: dict[str, list[float]] = {k: [] for k in commands}
    for i in range(n + 1):
        for label, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
            if i:  # the first round only warms the page cache
                times[label].append(time.perf_counter() - t0)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def importtime_us(py: Path, module: str, n: int) -> int:
    """Best ``-X importtime`` cumulative microseconds of ``module`` over n runs."""
    best: int | None = None
    for _ in range(n):
        out = subprocess.run(
            [str(py), "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        for line in out.stderr.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line.rstrip())
            if m and m.group(2) == module:
                value = int(m.group(1))
                best = value if best is None else min(best, value)
    if best is None:
        raise RuntimeError(f"{module} not found in -X importtime output of {py}")
    return best


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    theirs_py = torchx070_python()
    ours_py = OUR_PYTHON
    # pip byte-compiled TorchX at install; do the same for our sources (PYTHONDONTWRITEBYTECODE
    # would otherwise make every run compile them again).
    subprocess.run(
        [str(ours_py), "-m", "compileall", "-q", str(REPO / "torchx_core")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    commands = {
        "torchx 0.7.0: import torchx.specs": [str(theirs_py), "-c", "import torchx.specs"],
        "torchx-suite: import torchx_core.specs": [str(ours_py), "-c", "import torchx_core.specs"],
        "torchx 0.7.0 venv: python -c pass": [str(theirs_py), "-c", "pass"],
        "torchx-suite venv: python -c pass": [str(ours_py), "-c", "pass"],
    }
    rows = interleaved_best(commands, n)
    print(f"fresh interpreter runs, best of {n} (median in brackets):")
    for label, (best, median) in rows.items():
        print(f"  {label:<42} {best * 1000:8.1f} ms  ({median * 1000:.1f} ms)")
    theirs = rows["torchx 0.7.0: import torchx.specs"][0]
    ours = rows["torchx-suite: import torchx_core.specs"][0]
    theirs_net = theirs - rows["torchx 0.7.0 venv: python -c pass"][0]
    ours_net = ours - rows["torchx-suite venv: python -c pass"][0]
    it_theirs = importtime_us(theirs_py, "torchx.specs", max(3, n // 4))
    it_ours = importtime_us(ours_py, "torchx_core.specs", max(3, n // 4))
    print(f"  {'-X importtime torchx.specs (cumulative)':<42} {it_theirs / 1000:8.1f} ms")
    print(f"  {'-X importtime torchx_core.specs (cumulative)':<42} {it_ours / 1000:8.1f} ms")
    print(f"ratio, whole process (incl. interpreter start-up): {theirs / ours:.1f}x")
    print(
        "ratio, net import time (minus 'python -c pass'):  "
        f" {theirs_net / max(ours_net, 1e-4):.1f}x"
    )
    print(f"ratio, -X importtime cumulative:                   {it_theirs / it_ours:.1f}x")
    ratios = (theirs / ours, theirs_net / max(ours_net, 1e-4), it_theirs / it_ours)
    target_met = all(r >= 3 for r in ratios)
    print(f"target (>= 3x faster import, all three ratios): {'MET' if target_met else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
