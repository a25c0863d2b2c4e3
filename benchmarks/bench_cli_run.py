"""Whole-process time of ``torchx run --scheduler local_cwd utils.echo --msg hi``, ours vs 0.7.0.

Runs the same command with our CLI (``.venv``) and with TorchX 0.7.0 from PyPI (a separate venv
under ``.bench/``, created on first use), alternating, each in a fresh process that waits for
the app and streams its log (the default on local schedulers). Prints best and median wall
times and the ratio; the target is ours <= 0.4x TorchX.

    .venv/bin/python benchmarks/bench_cli_run.py [-n RUNS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baseline import OUR_PYTHON, time_command, torchx070_python

TARGET_RATIO = 0.4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=15, help="runs per CLI (best/median)")
    args = parser.parse_args()

    # measure what users get: bytecode caches on (some sandboxes disable writing them, which
    # would recompile our sources on every run while the baseline's were compiled by pip)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="bench-cli-run-"))
    env = {
        "TORCHX_LOCAL_ROOT": str(work / "ours-root"),  # our local scheduler's state
        "HOME": str(work),  # no user .torchxconfig
        "LOGLEVEL": "INFO",
    }
    ours_cmd = [
        str(OUR_PYTHON),
        "-m",
        "torchx_core.cli.main",
        "run",
        "--scheduler",
        "local_cwd",
        "utils.echo",
        "--msg",
        "hi",
    ]
    baseline_py = torchx070_python()
    baseline_cmd = [
        str(baseline_py),
        "-m",
        "torchx.cli.main",
        "run",
        "--scheduler",
        "local_cwd",
        "utils.echo",
        "--msg",
        "hi",
    ]
    cwd = os.getcwd()
    os.chdir(work)  # TorchX writes its logs under the cwd's tmp dirs; keep the repo clean
    try:
        ours_best, ours_med = time_command(ours_cmd, n=args.runs, env=env)
        base_best, base_med = time_command(baseline_cmd, n=args.runs, env=env)
        # second round, interleaved the other way, to even out machine load drifts
        b2 = time_command(baseline_cmd, n=args.runs, env=env)
        o2 = time_command(ours_cmd, n=args.runs, env=env)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    ours_best, ours_med = min(ours_best, o2[0]), min(ours_med, o2[1])
    base_best, base_med = min(base_best, b2[0]), min(base_med, b2[1])
    ratio = ours_med / base_med
    print("torchx run --scheduler local_cwd utils.echo --msg hi (whole process, wait + logs)")
    print(f"  {'':12s} {'best':>8s} {'median':>8s}")
    print(f"  {'torchx-suite':12s} {ours_best:8.3f} {ours_med:8.3f} s")
    print(f"  {'TorchX 0.7.0':12s} {base_best:8.3f} {base_med:8.3f} s")
    print(
        f"  ratio (median): {ratio:.2f}x  (best: {ours_best / base_best:.2f}x),"
        f" target <= {TARGET_RATIO}x"
        f" -> {'OK' if ratio <= TARGET_RATIO else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
