"""The dashboard's pages and guards over a real Runner on the fake scheduler (no network)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from support.fake_scheduler import JobTable, make_runner

from torchx_core.dashboard import create_app
from torchx_core.dashboard._board import Board, Filters
from torchx_core.dashboard._engines import engine_link
from torchx_core.dashboard._logs import LogRef, display, tail
from torchx_core.dashboard._pages import MASK
from torchx_core.dashboard._server import Settings
from torchx_core.runner import Runner
from torchx_core.specs import AppDef, AppState, Role
from torchx_core.specs.errors import TorchXError, UnknownAppException

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
LOCAL = "http://127.0.0.1"


def _submit(
    runner: Runner, name: str = "train", env: dict[str, str] | None = None, replicas: int = 1
) -> str:
    app = AppDef(
        name,
        [
            Role(
                "trainer",
                "img",
                entrypoint="python",
                args=["-c", "pass"],
                env=env or {},
                num_replicas=replicas,
            )
        ],
    )
    return runner.run(app, "fake")


@pytest.fixture
def table() -> JobTable:
    t = JobTable()
    t.hold = True
    return t


@pytest.fixture
def runner(table: JobTable) -> Iterator[Runner]:
    r = make_runner(table)
    yield r
    r.close()


def _client(
    runner: Runner, token: str | None = None, loopback: bool = True, base: str = LOCAL
) -> TestClient:
    app, _ = create_app(runner, Settings(["fake"], token=token, loopback=loopback, refresh=60))
    return TestClient(app, base_url=base, follow_redirects=False)


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m, page
    return m.group(1)


def _app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


# -- pages ------------------------------------------------------------------------------------


def test_apps_page_lists_newest_first_with_owner_and_filters(
    runner: Runner, table: JobTable
) -> None:
    old, new = _submit(runner, "older"), _submit(runner, "newer")
    table.job(_app_id(old)).created, table.job(_app_id(new)).created = 100.0, 200.0
    runner.set_owner(new, "airflow:dag1/task1/run1/-1#try=1")
    table.set_state(_app_id(old), AppState.FAILED)
    page = _client(runner).get("/").text
    assert page.index(html.escape(new)) < page.index(html.escape(old))
    assert "airflow:dag1/task1/run1/-1#try=1" in page
    only_failed = _client(runner).get("/rows?state=FAILED").text
    assert html.escape(old) in only_failed and html.escape(new) not in only_failed
    by_name = _client(runner).get("/rows?name=NEW").text
    assert html.escape(new) in by_name and html.escape(old) not in by_name


def test_board_reads_each_scheduler_once_per_period_for_many_requests(
    runner: Runner, table: JobTable
) -> None:
    for i in range(5):
        _submit(runner, f"a{i}")
    now = [0.0]
    board = Board(runner, ["fake"], max_age=2.0, clock=lambda: now[0])
    for _ in range(50):  # fifty browsers refreshing in one period
        rows, errors = board.rows(Filters())
        assert len(rows) == 5 and not errors
    assert board.reads("fake") == 1
    now[0] = 2.5
    board.rows(Filters(state="RUNNING"))
    assert board.reads("fake") == 2


def test_a_failing_list_is_shown_not_raised(runner: Runner, table: JobTable) -> None:
    table.list_error = RuntimeError("squeue: connection refused")
    page = _client(runner).get("/")
    assert page.status_code == 200 and "cannot list fake" in page.text
    assert "squeue: connection refused" in page.text


def test_app_page_shows_replicas_error_and_masks_env(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner, env={"API_KEY": "s3cr3t-value"}, replicas=2)
    app_id = _app_id(handle)
    table.set_replica(
        app_id, "trainer", 1, AppState.FAILED, error='{"exit_code": 3, "message": "boom"}'
    )
    table.set_state(app_id, AppState.FAILED)
    client = _client(runner)
    page = client.get(f"/app?handle={quote(handle, safe='')}").text
    assert "s3cr3t-value" not in page and MASK in page and "API_KEY" in page
    assert "<td>3</td>" in page  # the failed replica's exit code
    assert "trainer 1 line 2" in page  # the failure log tail
    shown = client.get(f"/app?handle={quote(handle, safe='')}&show_env=1").text
    assert "s3cr3t-value" in shown


def test_app_page_shows_the_run_options_as_submitted(runner: Runner) -> None:
    app = AppDef("opts", [Role("trainer", "img", entrypoint="python")])
    handle = runner.run(app, "fake", cfg={"queue": "gpu-<b>", "priority": 7})
    page = _client(runner).get(f"/app?handle={quote(handle, safe='')}").text
    assert re.search(r"<td>queue</td><td><code>&#34;gpu-&lt;b&gt;&#34;</code></td>", page), page
    assert "<td>priority</td><td><code>7</code></td>" in page


def test_app_page_links_the_owner_engine() -> None:
    link = engine_link(
        "airflow:etl/train/manual__2026-01-01/-1#try=2", {"airflow": "http://af:8080"}
    )
    assert link is not None
    assert link.url == "http://af:8080/dags/etl/runs/manual__2026-01-01/tasks/train"
    prefect = engine_link("prefect:abc-123#run=1/t/tr#try=1", {"prefect": "http://pf"})
    assert prefect is not None and prefect.url == "http://pf/runs/flow-run/abc-123"
    kfp = engine_link("kfp:job-9/step/x@h/1", {})
    assert kfp is not None and kfp.url is None and kfp.label == "pipeline run job-9"
    assert engine_link(None, {}) is None


def test_unknown_handle_and_unshown_scheduler_are_clear_errors(runner: Runner) -> None:
    client = _client(runner)
    gone = client.get("/app?handle=" + quote("fake://test/nope-1", safe=""))
    assert gone.status_code == 200 and "does not know this app" in gone.text
    other = client.get("/app?handle=" + quote("slurm://test/1", safe=""))
    assert other.status_code == 400 and "not shown by this dashboard" in other.text
    bad = client.get("/app?handle=garbage")
    assert bad.status_code == 400 and "bad app handle" in bad.text


# -- logs -------------------------------------------------------------------------------------


def test_log_tail_of_a_long_log_keeps_only_the_last_lines(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    table.append_log(_app_id(handle), "trainer", 0, *(f"n{i}" for i in range(100_000)))
    lines, count = tail(runner, LogRef(handle, "trainer"), 5)
    assert lines == [f"n{i}" for i in range(99_995, 100_000)] and count == 100_003
    page = _client(runner).get(f"/logs?handle={quote(handle, safe='')}&role=trainer&n=3").text
    assert "n99999" in page and "n99996" not in page and "skip=100003" in page


def test_log_stream_sends_only_new_lines_then_ends(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    app_id = _app_id(handle)
    table.append_log(app_id, "trainer", 0, "new 1", "new 2")
    table.set_state(app_id, AppState.SUCCEEDED)
    body = (
        _client(runner)
        .get(f"/logs/stream?handle={quote(handle, safe='')}&role=trainer&skip=3")
        .text
    )
    assert 'data: ["new 1", "new 2"]' in body and "event: end" in body
    assert "line 0" not in body


def test_log_filter_download_and_bad_regex(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    h = quote(handle, safe="")
    client = _client(runner)
    page = client.get(f"/logs?handle={h}&role=trainer&regex=line%20[12]").text
    assert "trainer 0 line 1" in page and "trainer 0 line 0" not in page
    dl = client.get(f"/logs/download?handle={h}&role=trainer")
    assert dl.text == "".join(f"trainer 0 line {i}\n" for i in range(3))
    assert "attachment" in dl.headers["content-disposition"]
    bad = client.get(f"/logs?handle={h}&role=trainer&regex=(")
    assert bad.status_code == 400 and "not a valid regular expression" in bad.text


def test_control_sequences_are_shown_escaped_as_the_cli_does() -> None:
    assert display("\x1b[31mred\x1b[0m \x1b]52;c;aGk=\x07\n") == "red \\x1b]52;c;aGk=\\x07"


# -- security ---------------------------------------------------------------------------------


def test_hostile_strings_are_html_escaped_everywhere(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner, env={"X": HOSTILE})
    job = table.job(_app_id(handle))
    job.app = AppDef(HOSTILE, [Role(HOSTILE, "img", args=[HOSTILE], env={"X": HOSTILE})])
    table.append_log(_app_id(handle), "trainer", 0, HOSTILE)
    client = _client(runner)
    h = quote(handle, safe="")
    for path in ("/", "/rows", f"/app?handle={h}&show_env=1", f"/logs?handle={h}&role=trainer"):
        body = client.get(path).text
        assert "<script>window" not in body and "<img src=x" not in body, path
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body, path


def test_every_response_forbids_inline_script_and_cross_origin_reads(runner: Runner) -> None:
    resp = _client(runner).get("/")
    csp = resp.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "access-control-allow-origin" not in resp.headers
    assert resp.headers["x-content-type-options"] == "nosniff"


def test_non_loopback_bind_needs_the_token_on_every_request(runner: Runner) -> None:
    client = _client(runner, token="t0k", loopback=False, base="http://10.1.2.3:8288")
    for path in ("/", "/rows", "/static/dashboard.css", "/logs/stream?handle=x&role=r"):
        assert client.get(path).status_code == 401, path
    assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"authorization": "Bearer t0k"}).status_code == 200
    # ?token= once: moved to an HttpOnly cookie, the URL cleaned, later requests pass
    first = client.get("/rows?state=RUNNING&token=t0k")
    assert first.status_code == 303 and first.headers["location"] == "/rows?state=RUNNING"
    assert "HttpOnly" in first.headers["set-cookie"]
    assert client.get("/rows?state=RUNNING").status_code == 200


def test_loopback_bind_refuses_foreign_host_headers(runner: Runner) -> None:
    client = _client(runner)
    assert client.get("/", headers={"host": "attacker.example:8288"}).status_code == 403
    assert client.get("/", headers={"host": "localhost:8288"}).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1.evil.com",  # a loopback name as a prefix (DNS rebinding)
        "127.0.0.1.evil.com:8288",
        "localhost.evil.com",
        "localhost:80@evil",  # a port that is not a number
        "localhost:",
        "[::1].evil.com",
        "[::1]:8288x",
        "[::1",
        "",
    ],
)
def test_host_check_is_an_exact_match_not_a_prefix(runner: Runner, host: str) -> None:
    resp = _client(runner).get("/", headers={"host": host})
    assert resp.status_code == 403 and "Host refused" in resp.text


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8288", "127.0.0.1", "127.0.0.1:8288", "[::1]", "[::1]:8288"]
)
def test_host_check_lets_loopback_names_in(runner: Runner, host: str) -> None:
    assert _client(runner).get("/", headers={"host": host}).status_code == 200


class UnknownFieldError(TorchXError):
    """Named like a lookup error, but not one: a 500 (the page once chose by the name)."""


class AppGoneError(UnknownAppException):
    """A "no such app" error whose name does not say "unknown": a 404."""


@pytest.mark.parametrize(("error", "status"), [(UnknownFieldError, 500), (AppGoneError, 404)])
def test_error_page_status_is_decided_by_the_error_type(
    runner: Runner, table: JobTable, error: type[TorchXError], status: int
) -> None:
    handle = _submit(runner)
    table.describe_error = error("boom")
    resp = _client(runner).get(f"/app/status?handle={quote(handle, safe='')}")
    assert resp.status_code == status and f"{error.__name__}: " in resp.text


def test_cancel_needs_a_same_site_post_with_the_csrf_token(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    app_id = _app_id(handle)
    table.set_state(app_id, AppState.RUNNING)
    client = _client(runner)
    h = quote(handle, safe="")
    confirm = client.get(f"/app/confirm?action=cancel&handle={h}")  # a GET changes nothing
    assert confirm.status_code == 200 and table.job(app_id).state == AppState.RUNNING
    assert client.get(f"/app/action?action=cancel&handle={h}").status_code == 405
    token = _csrf(confirm.text)
    form = {"action": "cancel", "handle": handle, "csrf": token}
    cross = client.post("/app/action", data=form, headers={"origin": "http://evil.example"})
    assert cross.status_code == 403
    fetch_site = client.post("/app/action", data=form, headers={"sec-fetch-site": "cross-site"})
    assert fetch_site.status_code == 403
    no_token = client.post("/app/action", data={**form, "csrf": "guess"})
    assert no_token.status_code == 403
    assert table.job(app_id).state == AppState.RUNNING
    ok = client.post(
        "/app/action", data=form, headers={"origin": LOCAL, "sec-fetch-site": "same-origin"}
    )
    assert ok.status_code == 303 and table.job(app_id).state == AppState.CANCELLED


def test_delete_removes_a_finished_app(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    table.set_state(_app_id(handle), AppState.SUCCEEDED)
    client = _client(runner)
    token = _csrf(client.get(f"/app/confirm?action=delete&handle={quote(handle, safe='')}").text)
    resp = client.post("/app/action", data={"action": "delete", "handle": handle, "csrf": token})
    assert resp.status_code == 303 and _app_id(handle) not in table.jobs


def test_a_non_ascii_token_is_refused_not_an_error(runner: Runner) -> None:
    client = _client(runner, token="t0k", loopback=False, base="http://10.1.2.3:8288")
    assert client.get("/", headers={"authorization": "Bearer tök".encode()}).status_code == 401


def test_app_page_shows_tracker_results_when_a_tracker_is_configured(
    runner: Runner, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import fsspec

    from torchx_core.tracker.backend.fsspec import FsspecTracker

    for key in list(os.environ):
        if key.startswith("TORCHX_TRACKER"):
            monkeypatch.delenv(key)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    handle = _submit(runner)
    page_url = f"/app?handle={quote(handle, safe='')}"
    assert "<h2>Tracker</h2>" not in _client(runner).get(page_url).text  # none configured
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {tmp_path / 'root'}\n")
    (tmp_path / ".torchxconfig").write_text(
        f"[torchx:tracker]\nfs = fsspec\n\n[tracker:fs]\nconfig = {conf}\n"
    )
    backend = FsspecTracker(fsspec.filesystem("file"), str(tmp_path / "root"))
    backend.add_metadata(handle, final_loss=0.25, note=HOSTILE)
    backend.add_artifact(handle, "model", "/ckpt/m.pt", {})
    page = _client(runner).get(page_url).text
    assert "<h2>Tracker</h2>" in page and "final_loss" in page and "0.25" in page
    assert "/ckpt/m.pt" in page and "<script>window" not in page
    assert '<svg class="metrics"' in page and "<title>final_loss = 0.25</title>" in page


def test_metric_bars_scale_to_the_largest_value() -> None:
    from torchx_core.dashboard._pages import metric_bars

    assert metric_bars({"loss": 2.0, "delta": -1.0, "zero": 0.0}) == [
        ("loss", "2", 100),
        ("delta", "-1", 50),
        ("zero", "0", 0),
    ]
    assert metric_bars({}) == []


def test_apps_without_a_submit_time_come_last_numeric_ids_newest_first(
    runner: Runner, table: JobTable
) -> None:
    handles = [_submit(runner, "n") for _ in range(11)]  # ids n-0 .. n-10
    table.job(_app_id(handles[3])).created = 50.0
    rows, _ = Board(runner, ["fake"]).rows()
    assert [r.app_id for r in rows] == [
        "n-3",
        "n-10",
        *(f"n-{i}" for i in (9, 8, 7, 6, 5, 4, 2, 1, 0)),
    ]


def test_a_backend_error_is_an_error_page_not_a_crash(runner: Runner) -> None:
    handle = _submit(runner)
    resp = _client(runner).get(f"/logs?handle={quote(handle, safe='')}&role=<nosuch>")
    assert resp.status_code == 500 and "ValueError: no replica &lt;nosuch&gt;/0" in resp.text
