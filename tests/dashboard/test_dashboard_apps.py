"""The apps page: sorting, pagination, owner filter and times over the fake scheduler; the app
page of a scheduler that keeps no AppDef; user errors as 4xx; the favicon."""

from __future__ import annotations

import re
from urllib.parse import quote

from starlette.testclient import TestClient
from support.fake_scheduler import JobTable, make_runner

from torchx_core.dashboard import create_app
from torchx_core.dashboard._server import Settings
from torchx_core.runner import Runner
from torchx_core.specs import AppDef, AppState, Role


def _client(runner: Runner) -> TestClient:
    app, _ = create_app(runner, Settings(["fake"], refresh=60))
    return TestClient(app, base_url="http://127.0.0.1", follow_redirects=False)


def _submit(runner: Runner, table: JobTable, name: str, created: float) -> str:
    handle = runner.run(AppDef(name, [Role("trainer", "img", entrypoint="python")]), "fake")
    table.job(handle.rsplit("/", 1)[1]).created = created
    return handle


def _names(page: str) -> list[str]:
    return re.findall(r'<td class="name" data-label="Name">([^<]*)</td>', page)


def test_apps_are_paged_and_sorted_on_the_server(runner: Runner, table: JobTable) -> None:
    for i in range(25):
        _submit(runner, table, f"app{i:02d}", 1_000_000.0 + i)
    client = _client(runner)
    first = client.get("/?per_page=10").text
    assert _names(first) == [f"app{i:02d}" for i in range(24, 14, -1)]
    assert "25 app(s), 1\u201310 shown" in first and "page 1 of 3" in first
    third = client.get("/rows?per_page=10&page=3").text
    assert _names(third) == [f"app{i:02d}" for i in range(4, -1, -1)] and "page 3 of 3" in third
    by_name = client.get("/rows?per_page=5&sort=name&order=asc").text
    assert _names(by_name) == [f"app{i:02d}" for i in range(5)]
    bad = client.get("/?sort=evil")
    assert bad.status_code == 400 and "sort is one of submitted, name" in bad.text


def test_owner_filter_and_submit_times_in_utc(runner: Runner, table: JobTable) -> None:
    mine = _submit(runner, table, "mine", 1_795_858_212.0)
    _submit(runner, table, "theirs", 1_795_858_213.0)
    runner.set_owner(mine, "airflow:etl/train/run1/-1#try=1")
    page = _client(runner).get("/?owner=ETL").text
    assert _names(page) == ["mine"]
    assert 'datetime="2026-11-28T09:30:12Z">2026-11-28 09:30:12</time>' in page
    assert "Submitted (UTC)" in page and "times in UTC" in page


def test_end_times_and_durations_are_shown_where_known() -> None:
    from torchx_core.dashboard._board import AppRow
    from torchx_core.dashboard._pages import span

    done = AppRow("h", "s", "a", "n", "SUCCEEDED", 100.0, None, None, ended=3_825.0)
    running = AppRow("h", "s", "b", "n", "RUNNING", 100.0, None, None)
    assert span(done.duration(now=99_999.0)) == "1h 2m"
    assert span(running.duration(now=130.0)) == "30s"
    assert AppRow("h", "s", "c", "n", "RUNNING", None, None, None).duration(1.0) is None
    # ended, but its scheduler does not say when (Slurm): no duration rather than a growing one
    assert AppRow("h", "s", "d", "n", "CANCELLED", 100.0, None, None).duration(500.0) is None


def test_an_app_of_a_scheduler_without_its_appdef_says_so(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner, table, "slurmish", 1.0)
    job = table.job(handle.rsplit("/", 1)[1])
    job.app = AppDef("slurmish", [Role("trainer", "", num_replicas=2)])  # as read back from Slurm
    with make_runner(table) as fresh:  # no AppDef cached from the submit
        page = _client(fresh).get(f"/app?handle={quote(handle, safe='')}").text
    assert 'id="appdef-note"' in page and "does not keep the AppDef" in page
    assert "&lt;MISSING&gt;" not in page and "&#34;num_replicas&#34;: 2" in page


def test_backend_user_errors_are_4xx(runner: Runner, table: JobTable) -> None:
    from torchx_core.schedulers.api import InvalidLogQueryError

    handle = _submit(runner, table, "x", 1.0)
    client = _client(runner)

    def bad_role(*args: object, **kwargs: object) -> None:
        raise InvalidLogQueryError("app x has no role 'nosuch'; its roles are: trainer")

    sched = runner._scheduler("fake")  # the fake's log read, as local and Slurm refuse a role
    sched.log_iter = bad_role  # type: ignore[method-assign]
    resp = client.get(f"/logs?handle={quote(handle, safe='')}&role=nosuch")
    assert resp.status_code == 400 and "has no role &#39;nosuch&#39;" in resp.text


def test_a_favicon_is_served(runner: Runner) -> None:
    client = _client(runner)
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/").text
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.text.startswith("<svg")
    assert client.get("/favicon.ico").headers["location"] == "/static/favicon.svg"


def test_states_are_named_in_the_rows(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner, table, "s", 1.0)
    table.set_state(handle.rsplit("/", 1)[1], AppState.FAILED)
    assert "state-FAILED" in _client(runner).get("/rows").text
