"""Local scheduler at scale: 1 role x 1024 replicas of /bin/true, submit + wait to SUCCEEDED.

Usage: .venv/bin/python benchmarks/bench_local_scale.py [--replicas N] [--repeat R]

Compares, each in a fresh interpreter (times exclude interpreter start and imports):

* ``direct``: ``os.posix_spawn`` of N ``/bin/true`` + ``waitpid`` of each (the floor);
* ``ours run+wait``: ``Runner.run`` + ``Runner.wait(wait_interval=0.05)`` (the local scheduler's
  blocking wait: no polling);
* ``ours submit+poll``: ``scheduler.submit`` + ``describe`` every 0.05 s (TorchX's loop);
* ``torchx 0.7.0``: ``Runner.run`` + ``Runner.wait(wait_interval=0.05)`` with TorchX from PyPI.

Prints best and median seconds and the ratios the targets are stated in (<= 1/20 of TorchX,
<= 3x direct).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from _baseline import OUR_PYTHON, REPO, torchx070_python

DIRECT = textwrap.dedent(
    """
    import os, sys, time
    n = int(sys.argv[1])
    env = dict(os.environ)
    t = time.perf_counter()
    pids = [os.posix_spawn("/bin/true", ["/bin/true"], env) for _ in range(n)]
    for p in pids:
        os.waitpid(p, 0)
    print(time.perf_counter() - t)
    """
)

RUNNER = textwrap.dedent(
    """
    import sys, time
    from {pkg} import specs
    from {pkg}.runner import get_runner
    n = int(sys.argv[1])
    role = specs.Role("r", image=".", entrypoint="/bin/true", num_replicas=n)
    app = specs.AppDef("bench", roles=[role])
    with get_runner() as runner:
        t = time.perf_counter()
        handle = runner.run(app, "local_cwd", {{}})
        status = runner.wait(handle, wait_interval=0.05)
        elapsed = time.perf_counter() - t
    assert status.state.name == "SUCCEEDED", status
    print(elapsed)
    """
)

SUBMIT_POLL = textwrap.dedent(
    """
    import sys, time
    from torchx_core import specs
    from torchx_core.schedulers.local.scheduler import create_scheduler
    n = int(sys.argv[1])
    role = specs.Role("r", image=".", entrypoint="/bin/true", num_replicas=n)
    app = specs.AppDef("bench", roles=[role])
    sched = create_scheduler("bench")
    t = time.perf_counter()
    app_id = sched.submit(app, {})
    while True:
        desc = sched.describe(app_id)
        if desc.state.name in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    elapsed = time.perf_counter() - t
    assert desc.state.name == "SUCCEEDED", desc
    print(elapsed)
    """
)


SMALL = textwrap.dedent(
    """
    import statistics, subprocess, sys, time
    from torchx_core import specs
    from torchx_core.schedulers.local.scheduler import create_scheduler
    sched = create_scheduler("bench")
    tiny = specs.AppDef("tiny", roles=[specs.Role("r", image=".", entrypoint="/bin/true")])
    def timed(fn, n):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), statistics.median(times), out
    submit_wait = timed(lambda: sched.wait(sched.submit(tiny, {})), 20)
    ids = [sched.submit(tiny, {}) for _ in range(200)]
    for app_id in ids:
        sched.wait(app_id)
    describe = timed(lambda: sched.describe(ids[0]), 200)
    listed = timed(lambda: sched.list(), 20)
    assert len(listed[2]) >= 200
    probe = (
        "import sys, time; from torchx_core.schedulers.local.scheduler import create_scheduler;"
        "s = create_scheduler('x'); t = time.perf_counter(); d = s.describe(sys.argv[1]);"
        "print(time.perf_counter() - t)"
    )
    fresh = min(float(subprocess.run([sys.executable, "-c", probe, ids[0]], capture_output=True,
                text=True, check=True).stdout) for _ in range(5))
    print(submit_wait[0], submit_wait[1], describe[0], describe[1], listed[0], listed[1], fresh)
    """
)


def measure(python: str, code: str, n: int, repeat: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [python, "-c", code, str(n)],
            check=True, capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
        )  # fmt: skip
        times.append(float(out.stdout.split()[-1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--torchx-repeat", type=int, default=2, help="TorchX takes ~20 s per run")
    args = parser.parse_args()
    n = args.replicas
    with tempfile.TemporaryDirectory(prefix="bench-local-") as root:
        env = {**os.environ, "TORCHX_LOCAL_ROOT": root}
        rows = {
            "direct posix_spawn": measure(sys.executable, DIRECT, n, args.repeat, env),
            "ours run+wait": measure(
                str(OUR_PYTHON), RUNNER.format(pkg="torchx_core"), n, args.repeat, env
            ),
            "ours submit+poll(0.05)": measure(str(OUR_PYTHON), SUBMIT_POLL, n, args.repeat, env),
            "torchx 0.7.0 run+wait(0.05)": measure(
                str(torchx070_python()), RUNNER.format(pkg="torchx"), n, args.torchx_repeat, env
            ),
        }
        small = subprocess.run(
            [str(OUR_PYTHON), "-c", SMALL],
            check=True, capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
        ).stdout.split()  # fmt: skip
    direct = min(rows["direct posix_spawn"])
    torchx = min(rows["torchx 0.7.0 run+wait(0.05)"])
    print(
        f"1 role x {n} replicas of /bin/true, submit -> SUCCEEDED (seconds; {os.cpu_count()} cores)"
    )
    print(f"{'':30} {'best':>8} {'median':>8} {'x direct':>9} {'/ torchx':>9}")
    for name, times in rows.items():
        best = min(times)
        print(
            f"{name:30} {best:8.3f} {statistics.median(times):8.3f}"
            f" {best / direct:9.2f} {best / torchx:9.3f}"
        )
    sw, swm, d, dm, li, lim, fresh = (float(x) for x in small)
    print()
    print("small operations (ours, seconds)            best     median")
    print(f"tiny app submit + wait (/bin/true)       {sw:9.4f} {swm:9.4f}")
    print(f"describe (warm process)                  {d:9.6f} {dm:9.6f}")
    print(f"describe from a fresh process (1st call) {fresh:9.6f}")
    print(f"list() of 200+ apps                      {li:9.4f} {lim:9.4f}")


if __name__ == "__main__":
    main()
