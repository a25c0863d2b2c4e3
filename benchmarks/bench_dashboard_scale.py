"""``torchx dashboard`` at scale (issue 34), the numbers side by side in one run:

1. the apps page over 10,000 apps (two in-memory schedulers of 5,000, ``bench_dashboard``'s
   ``TableScheduler``): server time per request of the first page (100 rows) and of a page
   sorted by name, and the dashboard's CPU per request;
2. a 1,000,000-line local log: ``/logs/download`` (whole file) against ``torchx log`` of the same
   replica (to /dev/null), wall time of each and their ratio;
3. ``/rows`` latency while a log filter that never finishes by itself (``(A+)+B`` over a 100 kB
   line of ``A``) runs: median and max of the ``/rows`` answers during the filter, and how long
   the filter took to be cut off (``--filter-timeout``, 10 s here).

Goals (issue 34): apps page <= 200 ms of server time; download <= 3x ``torchx log``; ``/rows``
<= 1 s while a filter runs.

usage: .venv/bin/python benchmarks/bench_dashboard_scale.py
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import bench_dashboard as base  # the table scheduler and helpers of the first benchmark

APPS = 10_000
FILTER_TIMEOUT_S = 10.0


def serve(port: Any, counters: dict[str, Any], root: str) -> None:
    """The child: ``bench_dashboard.serve`` with 5,000 apps per table scheduler."""
    base.APPS_PER_SCHEDULER = APPS // 2
    os.environ["TORCHX_LOCAL_ROOT"] = root
    from torchx_core.dashboard import serve as serve_dashboard
    from torchx_core.dashboard._server import Settings
    from torchx_core.runner import Runner
    from torchx_core.schedulers import get_scheduler_factories

    def factory(name: str) -> Any:
        return lambda session, **kw: base.TableScheduler(name, session, counters[name])

    factories: dict[str, Any] = dict(get_scheduler_factories())
    factories.update({name: factory(name) for name in ("bench_a", "bench_b")})
    settings = Settings(
        ["bench_a", "bench_b", "local_cwd"], refresh=2.0, filter_timeout=FILTER_TIMEOUT_S
    )

    def ready(url: str) -> None:
        port.value = int(url.rsplit(":", 1)[1])

    serve_dashboard(Runner("bench", factories), settings, "127.0.0.1", 0, on_ready=ready)


def timed_get(c: httpx.Client, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = c.get(path)
    r.raise_for_status()
    return time.perf_counter() - t0, len(r.content)


def apps_page(url: str, pid: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        c.get("/")  # the first list read and template compilation
        for label, path in (("newest first", "/"), ("sorted by name", "/?sort=name&order=asc")):
            cpu0 = base.cpu_seconds(pid)
            times = []
            for _ in range(20):
                took, size = timed_get(c, path)
                times.append(took)
            cpu = (base.cpu_seconds(pid) - cpu0) / len(times)
            print(
                f"apps page over {APPS:,} apps, {label} (first 100, {size / 1e3:.0f} kB):"
                f" server time median {statistics.median(times) * 1e3:.0f} ms, p95"
                f" {base.pct(times, 0.95) * 1e3:.0f} ms; dashboard CPU {cpu * 1e3:.0f} ms/request"
            )


def download_vs_torchx_log(url: str) -> None:
    from torchx_core.runner import get_runner

    handle = base.run_local(
        "import sys\nsys.stdout.writelines(f'line {i} of the log\\n' for i in range(1_000_000))"
    )
    with get_runner("bench") as r:
        r.wait(handle, wait_interval=0.5)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "log", f"{handle}/main/0"],
        stdout=subprocess.DEVNULL,
        check=True,
        env=env,
    )
    cli = time.perf_counter() - t0
    h = quote(handle, safe="")
    size = 0
    with httpx.Client(base_url=url, timeout=300) as c:
        t0 = time.perf_counter()
        with c.stream("GET", f"/logs/download?handle={h}&role=main") as resp:
            for chunk in resp.iter_raw():
                size += len(chunk)
        web = time.perf_counter() - t0
    print(
        f"a 1,000,000-line log ({size / 1e6:.1f} MB): download {web:.2f} s, `torchx log`"
        f" {cli:.2f} s: {web / cli:.2f}x"
    )


def rows_while_filtering(url: str) -> None:
    handle = base.run_local("print('A' * 100_000)\nprint('done')")
    from torchx_core.runner import get_runner

    with get_runner("bench") as r:
        r.wait(handle, wait_interval=0.5)
    h = quote(handle, safe="")
    slow = f"/logs?handle={h}&role=main&regex={quote('(A+)+B')}"
    filter_took: list[float] = []

    def run_filter() -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            t0 = time.perf_counter()
            c.get(slow).raise_for_status()
            filter_took.append(time.perf_counter() - t0)

    t = threading.Thread(target=run_filter)
    times = []
    with httpx.Client(base_url=url, timeout=300) as c:
        t.start()
        time.sleep(0.5)
        while t.is_alive():
            took, _ = timed_get(c, "/rows")
            times.append(took)
            time.sleep(0.2)
    t.join()
    print(
        f"/rows while a filter ran ({len(times)} requests): median"
        f" {statistics.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms; the filter was"
        f" cut off after {filter_took[0]:.1f} s (--filter-timeout {FILTER_TIMEOUT_S:g})"
    )


def main() -> None:
    root = tempfile.mkdtemp(prefix="bench-dashboard-scale-")
    os.environ["TORCHX_LOCAL_ROOT"] = root
    ctx = mp.get_context("fork")
    counters = {n: ctx.Value("i", 0) for n in ("bench_a", "bench_b")}
    port = ctx.Value("i", 0)
    # not a daemon: the dashboard starts its filter worker processes from it
    child = ctx.Process(target=serve, args=(port, counters, root))
    child.start()
    deadline = time.monotonic() + 60
    while port.value == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port.value}"
    try:
        apps_page(url, child.pid or 0)
        download_vs_torchx_log(url)
        rows_while_filtering(url)
    finally:
        child.terminate()
        child.join(10)


if __name__ == "__main__":
    main()
