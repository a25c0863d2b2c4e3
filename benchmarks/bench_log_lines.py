"""Reading a finished replica's log: ``Runner.log_lines`` over 1,000,000 lines, ours vs TorchX.

Usage: .venv/bin/python benchmarks/bench_log_lines.py [--lines N] [--repeat R]

Each side runs (in a fresh interpreter) an app whose single replica prints N lines, waits for it,
then iterates ``log_lines(handle, "r", 0)`` (default stream: combined) R times, counting lines.
Prints the best and median lines/second and our speed-up (target: >= 2x TorchX).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

from _baseline import OUR_PYTHON, REPO, torchx070_python

SNIPPET = textwrap.dedent(
    """
    import statistics, sys, time
    from {pkg} import specs
    from {pkg}.runner import get_runner
    n, repeat = int(sys.argv[1]), int(sys.argv[2])
    printer = (
        "import sys; sys.stdout.writelines("
        "f'line {{i}} of the benchmark output\\\\n' for i in range(%d))" % n
    )
    role = specs.Role("r", image=".", entrypoint=sys.executable, args=["-c", printer])
    app = specs.AppDef("logs", roles=[role])
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd", {{}})
        status = runner.wait(handle, wait_interval=0.05)
        assert status.state.name == "SUCCEEDED", status
        rates = []
        for _ in range(repeat):
            t = time.perf_counter()
            count = sum(1 for _ in runner.log_lines(handle, "r", 0))
            rates.append(count / (time.perf_counter() - t))
    # TorchX 0.7.0 splits some lines at its read-chunk boundaries, so it yields a few more
    assert count == n or "{pkg}" == "torchx", count
    print(count, max(rates), statistics.median(rates))
    """
)


def measure(
    python: str, pkg: str, n: int, repeat: int, env: dict[str, str]
) -> tuple[int, float, float]:
    out = subprocess.run(
        [python, "-c", SNIPPET.format(pkg=pkg), str(n), str(repeat)],
        check=False, capture_output=True, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(f"{python} failed:\n{out.stderr}")
    count, best, median = out.stdout.split()[-3:]
    return int(count), float(best), float(median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as root:
        env = {**os.environ, "TORCHX_LOCAL_ROOT": root}
        ours = measure(str(OUR_PYTHON), "torchx_core", args.lines, args.repeat, env)
        theirs = measure(str(torchx070_python()), "torchx", args.lines, args.repeat, env)
    print(
        f"log_lines over a finished replica's {args.lines:,} lines"
        f" (lines/s; {os.cpu_count()} cores)"
    )
    print(f"{'':14} {'best':>12} {'median':>12} {'lines yielded':>14}")
    for name, (count, best, median) in (("ours", ours), ("torchx 0.7.0", theirs)):
        print(f"{name:14} {best:12,.0f} {median:12,.0f} {count:14,}")
    print(f"speed-up (best): {ours[1] / theirs[1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
