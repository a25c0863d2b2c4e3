"""Resource use and end times of a real Slurm app (scripts/services/slurm's cluster): the
scheduler reads a running two-replica job's steps with ``sstat``, the dashboard's app page shows
CPU, memory and a sparkline per replica, and once the job ended ``list`` gives its end time."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

from torchx_core.dashboard import create_app
from torchx_core.dashboard._server import Settings
from torchx_core.runner import Runner, get_runner
from torchx_core.schedulers.api import ReplicaUsage
from torchx_core.specs import AppDef, AppState, Resource, Role, is_terminal

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.timeout(300)]

# each replica holds ~40 MB and burns CPU for two minutes
BURN = (
    "import time\nx = bytearray(40_000_000)\nend = time.time() + 120\nwhile time.time() < end: pass"
)


@pytest.fixture
def runner(slurm_cluster: SlurmCluster) -> Iterator[Runner]:  # noqa: F811 - the fixture above
    with get_runner("slurmusage") as r:
        yield r


def _usage_of_both(runner: Runner, handle: str) -> dict[tuple[str, int], ReplicaUsage]:
    deadline = time.monotonic() + 150
    usage: dict[tuple[str, int], ReplicaUsage] | None = None
    while time.monotonic() < deadline:
        usage = runner.resource_usage(handle)
        if usage and all(
            usage.get(("burn", k), ReplicaUsage(0, 0, 0)).cpu_seconds >= 1 for k in (0, 1)
        ):
            return usage
        time.sleep(1)
    raise AssertionError(f"no CPU time of both replicas of {handle} within 150 s: {usage}")


def _replica_row(html: str, k: int) -> str:
    rows = re.findall(
        r"<tr><td data-label=\"Role\">burn</td><td data-label=\"Replica\">(\d+)</td>(.*?)</tr>",
        html,
        re.S,
    )
    return dict(rows)[str(k)]


def test_a_running_slurm_app_shows_its_replicas_use_and_then_its_end(
    runner: Runner, tmp_path: Path
) -> None:
    role = Role(
        "burn",
        image="",
        entrypoint=sys.executable,
        args=["-c", BURN],
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=300),
    )
    handle = runner.run(
        AppDef("usage", [role]), "slurm", cfg={"job_dir": str(tmp_path), "time": "5"}
    )
    try:
        usage = _usage_of_both(runner, handle)
        for k in (0, 1):  # the replica's python, not the batch script's shell and srun
            assert 40_000_000 < usage[("burn", k)].rss_bytes < 200_000_000, usage
            assert usage[("burn", k)].processes >= 1

        app, _ = create_app(runner, Settings(["slurm"], refresh=60))
        client = TestClient(app, base_url="http://127.0.0.1")
        h = quote(handle, safe="")
        assert "<th>CPU</th>" in client.get(f"/app?handle={h}").text
        part = ""
        for _ in range(3):
            time.sleep(1.5)
            part = client.get(f"/app/status?handle={h}").text
        for k in (0, 1):
            row = _replica_row(part, k)
            assert re.search(r'<td class="cpu" data-label="CPU">\d+%</td>', row), row
            assert re.search(r'<td class="memory" data-label="Memory">\d+\.\d MB</td>', row), row
            # one sample per page read: the page and three status parts give three CPU rates
            assert f'aria-label="CPU of burn/{k} over the last 3 samples"><polyline' in row, row
    finally:
        runner.cancel(handle)
    # the end time is listed once every component ended (one may still be COMPLETING when the
    # leader reads CANCELLED)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        [row] = [r for r in runner.list("slurm") if r.app_handle == handle]
        if is_terminal(row.state) and row.ended is not None:
            break
        time.sleep(0.5)
    assert row.state == AppState.CANCELLED
    assert row.created and row.ended and row.created <= row.ended <= time.time() + 1, row
