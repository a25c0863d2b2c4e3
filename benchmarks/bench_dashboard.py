"""``torchx dashboard`` under load: the apps page over 1,000 apps, shared reads, memory, and a
fast log followed live.

The dashboard runs in a child process (uvicorn, as ``torchx dashboard`` serves) over a Runner
whose schedulers are:

* ``bench_a`` and ``bench_b``: 500 apps each, in an in-memory scheduler of this script (list
  answers from a table, with created time, owner and replica counts, as local and Slurm give);
  every list call is counted in shared memory;
* ``local_cwd``: the real local scheduler, for the log-follow part.

Printed:

1. the apps page with 1,000 apps: server time per request (time to first byte and whole page,
   on loopback, one client at a time; median and p95);
2. list reads per scheduler per refresh period while CLIENTS browsers each refresh every 0.5 s
   for DURATION seconds (the page refresh is 2 s; one read per scheduler per period is the goal);
3. the dashboard process's RSS (VmRSS, VmHWM) after all that;
4. a million-line local log: time to open its log page (the last 500 lines) and the RSS after;
5. a replica printing 10,000 lines/s for 5 s followed over the log page's server-sent events:
   lines received, and the delay from print to arrival (median, p99, max).

usage: .venv/bin/python benchmarks/bench_dashboard.py [CLIENTS=8] [DURATION=10]
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from torchx_core.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from torchx_core.specs import AppDef, AppDryRunInfo, AppState, CfgVal

APPS_PER_SCHEDULER = 500
REFRESH_S = 2.0
STATES = [AppState.RUNNING, AppState.SUCCEEDED, AppState.FAILED, AppState.PENDING]


class TableScheduler(Scheduler[None]):
    """A scheduler answering ``list`` from an in-memory table of ``APPS_PER_SCHEDULER`` apps."""

    def __init__(self, backend: str, session_name: str, counter: Any) -> None:
        super().__init__(backend, session_name)
        self.counter = counter
        now = time.time()
        self.rows = [
            (f"{backend}-app-{i}", STATES[i % len(STATES)], now - i * 37.0)
            for i in range(APPS_PER_SCHEDULER)
        ]

    def schedule(self, dryrun_info: AppDryRunInfo[None]) -> str:
        raise NotImplementedError

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[None]:
        raise NotImplementedError

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        return None

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        return dict.fromkeys(app_ids)

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        with self.counter.get_lock():
            self.counter.value += 1
        return [
            ListAppResponse(
                app_id=a,
                state=s,
                name=f"train-{a}",
                created=c,
                owner=f"airflow:etl/train/run-{a}/-1#try=1",
                replicas={s.name: 4},
            )
            for a, s, c in self.rows
        ]

    def _cancel_existing(self, app_id: str) -> None:
        pass


def serve(port: Any, counters: dict[str, Any], root: str) -> None:
    """The child: the dashboard over bench_a, bench_b and local_cwd (as ``torchx dashboard``)."""
    os.environ["TORCHX_LOCAL_ROOT"] = root
    from torchx_core.dashboard import serve as serve_dashboard
    from torchx_core.dashboard._server import Settings
    from torchx_core.runner import Runner
    from torchx_core.schedulers import get_scheduler_factories

    def factory(name: str) -> Any:
        return lambda session, **kw: TableScheduler(name, session, counters[name])

    factories: dict[str, Any] = dict(get_scheduler_factories())
    factories.update({name: factory(name) for name in ("bench_a", "bench_b")})
    runner = Runner("bench", factories)
    settings = Settings(["bench_a", "bench_b", "local_cwd"], refresh=REFRESH_S)

    def ready(url: str) -> None:
        port.value = int(url.rsplit(":", 1)[1])

    serve_dashboard(runner, settings, "127.0.0.1", 0, on_ready=ready)


def rss(pid: int) -> str:
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return f"VmRSS {fields['VmRSS'].strip()}, VmHWM (peak) {fields['VmHWM'].strip()}"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def apps_page(base: str, pid: int) -> None:
    ttfb, whole = [], []
    requests = 30
    with httpx.Client(base_url=base) as c:
        c.get("/")  # warm: templates compiled, first list read
        cpu0 = cpu_seconds(pid)
        for _ in range(requests):
            t0 = time.perf_counter()
            with c.stream("GET", "/") as r:
                first = None
                size = 0
                for chunk in r.iter_bytes():
                    first = first or time.perf_counter()
                    size += len(chunk)
            whole.append(time.perf_counter() - t0)
            ttfb.append((first or time.perf_counter()) - t0)
    cpu = (cpu_seconds(pid) - cpu0) / requests
    print(
        f"apps page, {2 * APPS_PER_SCHEDULER} apps ({size / 1e3:.0f} kB): server time median"
        f" {statistics.median(whole) * 1e3:.1f} ms, p95 {pct(whole, 0.95) * 1e3:.1f} ms"
        f" (first byte median {statistics.median(ttfb) * 1e3:.1f} ms); dashboard CPU per"
        f" request {cpu * 1e3:.1f} ms (load average {os.getloadavg()[0]:.1f})"
    )


def shared_reads(base: str, counters: dict[str, Any], clients: int, duration: float) -> None:
    stop = time.monotonic() + duration
    served = [0]
    lock = threading.Lock()

    def browse() -> None:
        with httpx.Client(base_url=base, timeout=30) as c:
            while time.monotonic() < stop:
                c.get("/rows").raise_for_status()
                with lock:
                    served[0] += 1
                time.sleep(0.5)

    before = {n: v.value for n, v in counters.items()}
    threads = [threading.Thread(target=browse) for _ in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    periods = elapsed / REFRESH_S
    reads = {n: v.value - before[n] for n, v in counters.items()}
    print(
        f"{clients} browsers refreshing every 0.5 s for {elapsed:.1f} s: {served[0]} page"
        f" refreshes served; list reads per scheduler per {REFRESH_S:g} s refresh period: "
        + ", ".join(f"{n} {r / periods:.2f}" for n, r in reads.items())
    )


def run_local(code: str) -> str:
    from torchx_core.runner import get_runner
    from torchx_core.specs import Role

    with get_runner("bench") as r:
        return r.run(
            AppDef(
                "bench-log",
                [
                    Role(
                        "main",
                        image=os.getcwd(),
                        entrypoint=sys.executable,
                        args=["-u", "-c", code],
                    )
                ],
            ),
            "local_cwd",
        )


def million_lines(base: str, pid: int) -> None:
    from torchx_core.runner import get_runner

    handle = run_local(
        "import sys\nsys.stdout.writelines(f'line {i}\\n' for i in range(1_000_000))"
    )
    with get_runner("bench") as r:
        r.wait(handle, wait_interval=0.5)
    h = quote(handle, safe="")
    with httpx.Client(base_url=base, timeout=120) as c:
        t0 = time.perf_counter()
        page = c.get(f"/logs?handle={h}&role=main&n=500")
        took = time.perf_counter() - t0
    assert "line 999999" in page.text, page.text[:500]
    print(
        f"a 1,000,000-line log: its page (the last 500 lines) in {took:.2f} s; dashboard {rss(pid)}"
    )


def follow_fast_log(base: str) -> None:
    code = (
        "import time\nstart = time.time()\ni = 0\n"
        "while time.time() - start < 5:\n"
        "    target = int((time.time() - start) * 10_000)\n"
        "    while i < target:\n"
        "        print(f'{time.time():.6f} line {i}')\n"
        "        i += 1\n"
        "    time.sleep(0.001)\n"
        "print(f'{time.time():.6f} total {i}', flush=True)\n"
    )
    handle = run_local(code)
    h = quote(handle, safe="")
    delays: list[float] = []
    total = None
    with (
        httpx.Client(base_url=base, timeout=60) as c,
        c.stream("GET", f"/logs/stream?handle={h}&role=main&skip=0") as r,
    ):
        for line in r.iter_lines():
            if line.startswith("event: end"):
                break
            if not line.startswith("data: "):
                continue
            now = time.time()
            for _, text in json.loads(line[6:]):  # [line number, text] pairs
                stamp, _, rest = text.partition(" ")
                delays.append(now - float(stamp))
                if rest.startswith("total "):
                    total = int(rest.split()[1])
    print(
        f"following a replica printing 10,000 lines/s for 5 s: {len(delays) - 1} lines received"
        f" of {total}; print-to-browser delay median {statistics.median(delays) * 1e3:.0f} ms,"
        f" p99 {pct(delays, 0.99) * 1e3:.0f} ms, max {max(delays) * 1e3:.0f} ms"
    )


def main() -> None:
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    root = tempfile.mkdtemp(prefix="bench-dashboard-")
    os.environ["TORCHX_LOCAL_ROOT"] = root
    ctx = mp.get_context("fork")
    counters = {n: ctx.Value("i", 0) for n in ("bench_a", "bench_b")}
    port = ctx.Value("i", 0)
    child = ctx.Process(target=serve, args=(port, counters, root), daemon=True)
    child.start()
    deadline = time.monotonic() + 60
    while port.value == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port.value}"
    for _ in range(100):
        try:
            httpx.get(base + "/static/dashboard.css")
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    try:
        apps_page(base, child.pid or 0)
        shared_reads(base, counters, clients, duration)
        print(f"dashboard process after those: {rss(child.pid or 0)}")
        million_lines(base, child.pid or 0)
        follow_fast_log(base)
    finally:
        child.terminate()
        child.join(10)


if __name__ == "__main__":
    main()
