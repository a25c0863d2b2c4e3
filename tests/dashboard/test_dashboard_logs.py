"""The dashboard's log pages over the fake scheduler: filters bounded in time, exact resumes of a
follow, byte-exact downloads, bidi controls, the cap on follows."""

from __future__ import annotations

import asyncio
import html
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from dashboard_browser import sse_lines
from starlette.testclient import TestClient
from support.fake_scheduler import JobTable

from torchx_core.dashboard import create_app
from torchx_core.dashboard._filter import FilterCutOff, RegexPool
from torchx_core.dashboard._logs import (
    DOWNLOAD_CHUNK,
    Follower,
    LogRef,
    TooManyFollowsError,
    display,
    download,
)
from torchx_core.dashboard._server import Settings
from torchx_core.runner import Runner
from torchx_core.specs import AppDef, AppState, Role


def _submit(runner: Runner) -> str:
    return runner.run(AppDef("logs", [Role("trainer", "img", entrypoint="python")]), "fake")


def _client(runner: Runner, **settings: object) -> TestClient:
    app, _ = create_app(runner, Settings(["fake"], refresh=60, **settings))  # type: ignore[arg-type]
    return TestClient(app, base_url="http://127.0.0.1", follow_redirects=False)


def test_a_catastrophic_filter_is_cut_off_with_a_message(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    table.append_log(handle.rsplit("/", 1)[1], "trainer", 0, "A" * 100_000, "AAB")
    client = _client(runner, filter_timeout=1.0)
    url = f"/logs?handle={quote(handle, safe='')}&role=trainer&regex=" + quote("(A+)+B")
    answer: list[str] = []
    worker = threading.Thread(target=lambda: answer.append(client.get(url).text), daemon=True)
    worker.start()
    worker.join(120)  # the old server matched in its own thread: (A+)+B never finished
    assert answer, "the filter request never answered"
    assert 'id="filter-cut-off"' in answer[0] and "the filter was stopped after 1 s" in answer[0]
    assert "data-stream-url" not in answer[0]  # nothing followed after a cut-off filter


def test_the_pool_matches_like_re_search_and_outlives_a_killed_worker() -> None:
    pool = RegexPool(1)
    try:
        with pytest.raises(FilterCutOff):
            pool.matching("(A+)+B", ["A" * 50_000], deadline=0.0)
        import time

        found = pool.matching("b+$", ["abb\n", "ba", "bb"], time.monotonic() + 60)
        assert found == [0, 2]
    finally:
        pool.close()


def test_a_reconnect_resumes_after_its_last_event_id(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    app_id = handle.rsplit("/", 1)[1]
    table.append_log(app_id, "trainer", 0, "a", "b")
    table.set_state(app_id, AppState.SUCCEEDED)
    client = _client(runner)
    url = f"/logs/stream?handle={quote(handle, safe='')}&role=trainer&skip=1"
    first = client.get(url).text  # 3 fake lines + a, b; skip 1
    assert sse_lines(first) == (
        [[2, "trainer 0 line 1"], [3, "trainer 0 line 2"], [4, "a"], [5, "b"]],
        5,
    )
    again = client.get(url, headers={"last-event-id": "4"}).text  # the browser saw up to 4
    assert sse_lines(again) == ([[5, "b"]], 5)
    bad = client.get(url, headers={"last-event-id": "x"})
    assert bad.status_code == 400 and "Last-Event-ID" in bad.text


def test_a_filtered_follow_numbers_lines_by_their_place_in_the_log(
    runner: Runner, table: JobTable
) -> None:
    handle = _submit(runner)
    app_id = handle.rsplit("/", 1)[1]
    table.append_log(app_id, "trainer", 0, "x1", "y", "x2")
    table.set_state(app_id, AppState.SUCCEEDED)
    url = f"/logs/stream?handle={quote(handle, safe='')}&role=trainer&regex=x"
    body = _client(runner).get(url).text
    assert sse_lines(body) == ([[4, "x1"], [6, "x2"]], 6)


def test_a_download_is_the_files_bytes_in_large_chunks(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    raw = b"ok \xff\xfe not utf-8\n" * (DOWNLOAD_CHUNK // 10) + b"no newline at the end"
    out.write_bytes(raw)
    err.write_bytes(b"\xc3(\n")
    chunks = list(
        download(None, LogRef("fake://s/x", "r"), [str(out), str(tmp_path / "gone"), str(err)])
    )  # type: ignore[arg-type]
    assert b"".join(chunks) == raw + b"\xc3(\n"
    assert all(len(c) == DOWNLOAD_CHUNK for c in chunks[:-2])
    assert len(chunks) == len(raw) // DOWNLOAD_CHUNK + 2


def test_bidi_controls_are_shown_escaped() -> None:
    assert display("user \u202egnp.exe\u202c ok\u2066\n") == "user \\u202egnp.exe\\u202c ok\\u2066"


def test_follows_are_capped_and_a_slot_frees_when_the_log_ends(
    runner: Runner, table: JobTable
) -> None:
    handle = _submit(runner)
    app_id = handle.rsplit("/", 1)[1]
    slots = threading.BoundedSemaphore(1)
    ref = LogRef(handle, "trainer")

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        first = Follower(runner, ref, 0, slots, loop)
        with pytest.raises(TooManyFollowsError, match="too many logs are followed"):
            Follower(runner, ref, 0, slots, loop)
        got: list[str] = []
        table.set_state(app_id, AppState.SUCCEEDED)
        while (batch := await first.next_batch(60)) is not None:
            got += batch
        await asyncio.to_thread(first._thread.join, 60)
        second = Follower(runner, ref, 3, slots, loop)  # the slot came back
        assert await second.next_batch(60) is None
        return got

    assert asyncio.run(scenario()) == [f"trainer 0 line {i}\n" for i in range(3)]


def test_a_bad_log_request_is_a_4xx_page(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    h = quote(handle, safe="")
    client = _client(runner)
    assert client.get(f"/logs?handle={h}&role=trainer&k=x").status_code == 400
    assert client.get(f"/logs?handle={h}&role=trainer&regex=" + "a" * 1001).status_code == 400


def test_a_closed_event_stream_stops_its_follower_and_frees_its_slot(
    runner: Runner, table: JobTable
) -> None:
    from torchx_core.dashboard._server import _events

    handle = _submit(runner)
    app_id = handle.rsplit("/", 1)[1]
    table.set_state(app_id, AppState.RUNNING)
    slots = threading.BoundedSemaphore(1)

    async def scenario() -> Follower:
        follower = Follower(runner, LogRef(handle, "trainer"), 0, slots, asyncio.get_running_loop())
        events = _events(follower, LogRef(handle, "trainer"), RegexPool(1), 10.0)
        assert (await events.__anext__()).startswith("retry:")
        seen = ""
        while "trainer 0 line 2" not in seen:  # the three lines, in one or more events
            seen += await events.__anext__()
        await events.aclose()  # the browser went away: Starlette closes the generator
        return follower

    follower = asyncio.run(scenario())
    table.append_log(app_id, "trainer", 0, "after the browser left")  # the thread's next line
    follower._thread.join(60)
    assert not follower.alive and slots.acquire(blocking=False)
    assert table.job(app_id).state == AppState.RUNNING  # the app itself runs on


def test_logs_are_redacted_on_request(runner: Runner, table: JobTable) -> None:
    handle = _submit(runner)
    app_id = handle.rsplit("/", 1)[1]
    table.append_log(
        app_id,
        "trainer",
        0,
        "export HF_TOKEN=hf_s3cr3t; db password: 'p4ss' user=alice",
        'curl -H "Authorization: Bearer eyJhbGci.x.y" {"api_key": "k3y"}',
    )
    table.set_state(app_id, AppState.SUCCEEDED)
    client = _client(runner)
    base = f"handle={quote(handle, safe='')}&role=trainer"
    plain = client.get(f"/logs?{base}").text
    assert "hf_s3cr3t" in plain  # not asked: the log as it is
    page = html.unescape(client.get(f"/logs?{base}&redact=1").text)
    streamed = "\n".join(
        t for _, t in sse_lines(client.get(f"/logs/stream?{base}&redact=1").text)[0]
    )
    for text in (page, streamed):
        for secret in ("hf_s3cr3t", "p4ss", "eyJhbGci", "k3y"):
            assert secret not in text, (text, secret)
        assert "HF_TOKEN=••••••; db password: '••••••' user=alice" in text
        assert 'Authorization: Bearer ••••••" {"api_key": "••••••"}' in text
    assert "redact=1" in client.get(f"/logs?{base}&redact=1").text  # the follow keeps masking
