"""Per-replica resource use: the local scheduler's reading of ``/proc`` (process trees), the
dashboard's history of samples and its columns on the app page."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from support.fake_scheduler import JobTable, make_runner

from torchx_core.dashboard import create_app
from torchx_core.dashboard._server import Settings
from torchx_core.dashboard._usage import UsageHistory
from torchx_core.schedulers.api import ReplicaUsage
from torchx_core.schedulers.local._usage import parse_stat, replica_usage, usage_of_trees
from torchx_core.specs import AppDef, AppState, Role


def test_a_replica_counts_its_whole_process_tree() -> None:
    stats = {
        10: (1, 2.0, 100),  # replica 0
        11: (10, 1.0, 50),  # its child
        12: (11, 0.5, 25),  # a grandchild
        20: (1, 3.0, 300),  # replica 1
        30: (1, 9.0, 900),  # someone else
    }
    got = usage_of_trees(stats, {("w", 0): 10, ("w", 1): 20, ("w", 2): 99})
    assert got == {
        ("w", 0): ReplicaUsage(cpu_seconds=3.5, rss_bytes=175, processes=3),
        ("w", 1): ReplicaUsage(cpu_seconds=3.0, rss_bytes=300, processes=1),
    }


def test_proc_stat_with_a_hostile_command_name() -> None:
    line = b"42 (a) b) (c) S 7 42 42 0 -1 4194560 1 0 0 0 250 150 0 0 20 0 1 0 9 1 3 1844674"
    parsed = parse_stat(line)
    assert parsed is not None and parsed[0] == 7 and parsed[2] == 3 * os.sysconf("SC_PAGE_SIZE")
    assert parsed[1] == pytest.approx(400 / os.sysconf("SC_CLK_TCK"))
    assert parse_stat(b"garbage") is None


def test_this_process_tree_is_measured_from_proc() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        got = replica_usage({("me", 0): os.getpid()})[("me", 0)]
        assert got.processes >= 2 and got.rss_bytes > 10_000_000 and got.cpu_seconds > 0
    finally:
        child.kill()
        child.wait()


def test_cpu_percent_comes_from_two_samples_and_old_apps_are_forgotten() -> None:
    history = UsageHistory(keep=3, apps=2)
    one = {("w", 0): ReplicaUsage(1.0, 1000, 1)}
    assert history.add("a", one, now=10.0)[("w", 0)].cpu_now() == ""  # one sample: no rate
    later = {("w", 0): ReplicaUsage(2.5, 2_500_000, 1)}
    series = history.add("a", later, now=12.0)[("w", 0)]
    assert series.cpu_now() == "75%" and series.memory_now() == "2.5 MB"
    history.add("b", one, now=1.0)
    history.add("c", one, now=1.0)  # a third app: the least recently shown ("a") is forgotten
    assert history.add("a", later, now=20.0)[("w", 0)].cpu_now() == ""


def test_the_app_page_shows_cpu_memory_and_a_sparkline() -> None:
    table = JobTable()
    table.hold = True
    with make_runner(table) as runner:
        handle = runner.run(AppDef("u", [Role("trainer", "img", entrypoint="python")]), "fake")
        table.set_state(handle.rsplit("/", 1)[1], AppState.RUNNING)
        samples = iter([ReplicaUsage(float(i), 1_000_000 * (i + 1), 1) for i in range(10)])
        sched = runner._scheduler("fake")
        sched.resource_usage = lambda app_id: {("trainer", 0): next(samples)}  # type: ignore[method-assign]
        app, _ = create_app(runner, Settings(["fake"], refresh=60))
        client = TestClient(app, base_url="http://127.0.0.1")
        h = quote(handle, safe="")
        assert "<th>CPU</th>" in client.get(f"/app?handle={h}").text
        time.sleep(0.01)
        client.get(f"/app/status?handle={h}")
        time.sleep(0.01)
        part = client.get(f"/app/status?handle={h}").text
        assert (
            '<td class="memory" data-label="Memory">3.0 MB</td>' in part
            and "<polyline points=" in part
        )


@pytest.mark.integration
@pytest.mark.local
def test_a_local_replica_burning_cpu_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.runner import get_runner

    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path))
    code = "import time\nend = time.time() + 60\nwhile time.time() < end: pass"
    role = Role("burn", os.getcwd(), entrypoint=sys.executable, args=["-c", code])
    with get_runner("usage") as runner:
        handle = runner.run(AppDef("burn", [role]), "local_cwd")
        try:
            deadline = time.monotonic() + 60
            usage = None
            while time.monotonic() < deadline:
                usage = runner.resource_usage(handle)
                if usage and usage[("burn", 0)].cpu_seconds > 0.5:
                    break
                time.sleep(0.2)
            assert usage is not None and usage[("burn", 0)].cpu_seconds > 0.5, usage
            assert usage[("burn", 0)].rss_bytes > 1_000_000
        finally:
            runner.cancel(handle)
