"""``torchx dashboard`` in a real browser (headless Debian Chromium driven by Playwright), over real
apps on ``local_cwd`` and on the test Slurm cluster. Screenshots of each page are kept in the
folder printed at the start (see ``dashboard_browser.artifacts_dir``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from dashboard_browser import artifacts_dir, chromium, dashboard_process, processes_of
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

from torchx_core.runner import Runner, get_runner
from torchx_core.specs import AppDef, AppState, Resource, Role

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.local,
    pytest.mark.slurm,
    pytest.mark.timeout(600),
]

WAIT_MS = 90_000
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def _py_role(name: str, code: str) -> Role:
    return Role(
        name,
        image=os.getcwd(),
        entrypoint=sys.executable,
        args=["-u", "-c", code],
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )


@pytest.fixture(scope="module")
def env(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture imported above
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("local-root")
    saved = os.environ.get("TORCHX_LOCAL_ROOT")
    os.environ["TORCHX_LOCAL_ROOT"] = str(root)
    yield {**os.environ, "SLURM_CONF": slurm_cluster.conf, "TORCHX_LOCAL_ROOT": str(root)}
    if saved is None:
        os.environ.pop("TORCHX_LOCAL_ROOT", None)
    else:
        os.environ["TORCHX_LOCAL_ROOT"] = saved


@pytest.fixture(scope="module")
def url(env: dict[str, str]) -> Iterator[str]:
    with dashboard_process(["-s", "local_cwd,slurm", "--refresh", "1"], env) as u:
        yield u


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    print(f"\ndashboard screenshots: {artifacts_dir()}")
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    p = context.new_page()
    yield p
    context.close()


@pytest.fixture
def runner(env: dict[str, str]) -> Iterator[Runner]:
    with get_runner("dashtest") as r:
        yield r


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(artifacts_dir() / f"{name}.png"), full_page=True)


def _row(page: Any, handle: str) -> Any:
    return page.locator(f'tr[data-handle$="/{handle.rsplit("/", 1)[1]}"]')


def test_apps_of_both_schedulers_listed_and_updated_without_reload(
    page: Any, url: str, runner: Runner, tmp_path: Path
) -> None:
    code = "import time; print('start', flush=True); time.sleep(6); print('done')"
    local = runner.run(AppDef("dash-local", [_py_role("main", code)]), "local_cwd")
    slurm = runner.run(
        AppDef("dash-slurm", [_py_role("main", code)]),
        "slurm",
        cfg={"job_dir": str(tmp_path), "time": "5"},
    )
    try:
        page.goto(url + "/")
        page.evaluate("window.__sameDocument = 1")  # gone if the page reloads
        for handle in (local, slurm):
            _row(page, handle).wait_for(timeout=WAIT_MS)
        first = {h: _row(page, h).locator(".state").inner_text() for h in (local, slurm)}
        assert all(s in ("SUBMITTED", "PENDING", "RUNNING") for s in first.values()), first
        _shot(page, "apps-running")
        for handle in (local, slurm):
            _row(page, handle).locator(".state", has_text="SUCCEEDED").wait_for(timeout=WAIT_MS)
        assert page.evaluate("window.__sameDocument") == 1
        _shot(page, "apps-succeeded")
        page.goto(url + "/?scheduler=slurm")
        assert _row(page, slurm).count() == 1 and _row(page, local).count() == 0
    finally:
        runner.cancel(slurm)


def test_log_page_follows_lines_printed_after_it_opened(
    page: Any, url: str, runner: Runner
) -> None:
    code = (
        "import time\nfor i in range(60):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)"
    )
    handle = runner.run(AppDef("dash-log", [_py_role("main", code)]), "local_cwd")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(runner.log_lines(handle, "main", 0)):
            time.sleep(0.2)
        page.goto(url + "/")
        _row(page, handle).locator("a").click()
        page.locator("a.log-link").first.click()
        page.locator("#log").wait_for()
        shown = page.locator("#log").inner_text().split("\n")
        last = max(int(x.split()[1]) for x in shown if x.startswith("tick "))
        later = f"tick {last + 4}"
        page.locator("#log", has_text=later).wait_for(timeout=WAIT_MS)  # arrived over SSE
        _shot(page, "log-following")
    finally:
        runner.cancel(handle)


def test_cancel_from_the_page_ends_cancelled_and_kills_processes(
    page: Any, url: str, runner: Runner
) -> None:
    handle = runner.run(
        AppDef("dash-cancel", [_py_role("main", "import time; time.sleep(600)")]), "local_cwd"
    )
    app_id = handle.rsplit("/", 1)[1]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not processes_of(app_id):
            time.sleep(0.2)
        assert processes_of(app_id), "the app never started"
        page.goto(url + "/")
        _row(page, handle).locator("a").click()
        page.locator("#app-state", has_text="RUNNING").wait_for(timeout=WAIT_MS)
        _shot(page, "app-running")
        page.locator("#cancel-link").click()
        _shot(page, "confirm-cancel")
        page.locator("#confirm-button").click()
        page.locator("#app-state", has_text="CANCELLED").wait_for(timeout=WAIT_MS)
        _shot(page, "app-cancelled")
        status = runner.status(handle)
        assert status is not None and status.state == AppState.CANCELLED
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and processes_of(app_id):
            time.sleep(0.2)
        assert processes_of(app_id) == []
    finally:
        runner.cancel(handle)


def test_hostile_output_is_shown_as_text_and_never_runs(
    page: Any, url: str, runner: Runner
) -> None:
    code = f"print({HOSTILE!r}); print('\\x1b]0;title\\x07\\x1b[2Jcleared')"
    handle = runner.run(AppDef("dash-hostile", [_py_role("main", code)]), "local_cwd")
    status = runner.wait(handle, wait_interval=0.5)
    assert status is not None and status.state == AppState.SUCCEEDED
    page.goto(url + "/")
    _row(page, handle).locator("a").click()
    page.locator("a.log-link").first.click()
    log = page.locator("#log")
    log.wait_for()
    assert HOSTILE in log.inner_text()
    assert "\\x1b]0;title\\x07\\x1b[2Jcleared" in log.inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#log script, #log img").count() == 0
    _shot(page, "log-hostile")


WIDER_THAN_1280 = (
    "[...document.querySelectorAll('body *')]"
    ".filter(e => e.getBoundingClientRect().right > 1280).slice(0, 8)"
    ".map(e => `${e.tagName}.${e.className} ${(e.textContent || '').slice(0, 60)}`)"
)


def _no_horizontal_overflow(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_pages_fit_a_390px_phone_and_follow_dark_mode(
    browser: Any, url: str, runner: Runner
) -> None:
    code = "print('x' * 300, flush=True); print('short')"
    handle = runner.run(AppDef("dash-narrow-" + "n" * 40, [_py_role("main", code)]), "local_cwd")
    runner.wait(handle, wait_interval=0.5)
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    try:
        page = context.new_page()
        page.goto(url + "/")
        _row(page, handle).wait_for(timeout=WAIT_MS)
        assert _no_horizontal_overflow(page) <= 390
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert bg == "rgb(22, 24, 28)", bg  # prefers-color-scheme: dark
        _shot(page, "apps-390-dark")
        _row(page, handle).locator("a").click()
        page.locator("#app-state").wait_for()
        page.wait_for_load_state()  # the stylesheet applied: the layout a person sees
        assert _no_horizontal_overflow(page) <= 390
        _shot(page, "app-390-dark")
        page.locator("a.log-link").first.click()
        page.locator("#log", has_text="short").wait_for(timeout=WAIT_MS)
        page.wait_for_load_state()
        assert _no_horizontal_overflow(page) <= 390
        _shot(page, "log-390-dark")
    finally:
        context.close()


def test_a_followed_log_resumes_exactly_after_a_dashboard_restart(
    page: Any, env: dict[str, str], runner: Runner
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "import time\nfor i in range(400):\n    print(f'tick {i}', flush=True)\n"
        "    time.sleep(0.04)"
    )
    handle = runner.run(AppDef("dash-resume", [_py_role("main", code)]), "local_cwd")
    args = ["-s", "local_cwd", "--port", str(port)]
    try:
        with dashboard_process(args, env) as first:
            page.goto(f"{first}/logs?handle={quote(handle, safe='')}&role=main")
            page.locator("#log", has_text="tick 40").wait_for(timeout=WAIT_MS)
        # the page keeps the lines it has; its EventSource reconnects to the new process
        with dashboard_process(args, env):
            page.locator("#follow-state", has_text="Log ended").wait_for(timeout=WAIT_MS)
            lines = [x for x in page.locator("#log").inner_text().split("\n") if x]
        assert lines == [f"tick {i}" for i in range(400)], (len(lines), lines[:5])
        _shot(page, "log-resumed")
    finally:
        runner.cancel(handle)


def test_a_multi_replica_slurm_app_and_its_live_log(
    page: Any, url: str, runner: Runner, tmp_path: Path
) -> None:
    code = (
        "import time\nfor i in range(240):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)"
    )
    role = _py_role("main", code)
    role.num_replicas = 2
    handle = runner.run(
        AppDef("dash-slurm-two", [role]), "slurm", cfg={"job_dir": str(tmp_path), "time": "5"}
    )
    try:
        page.goto(f"{url}/app?handle={quote(handle, safe='')}")
        page.locator("#app-state", has_text="RUNNING").wait_for(timeout=WAIT_MS)
        replicas = page.locator("table.replicas tbody tr")
        assert replicas.count() == 2
        for k in range(2):  # each replica's memory, read by `sstat` at every refresh
            replicas.nth(k).locator("td.memory", has_text=" MB").wait_for(timeout=WAIT_MS)
        _shot(page, "slurm-two-replicas")
        page.locator("a.log-link").nth(1).click()  # replica 1's log, followed live
        assert "k=1" in page.url
        page.locator("#log", has_text="tick 1").wait_for(timeout=WAIT_MS)
        shown = page.locator("#log").inner_text().split("\n")
        last = max(int(x.split()[1]) for x in shown if x.startswith("tick "))
        page.locator("#log", has_text=f"tick {last + 3}").wait_for(timeout=WAIT_MS)
        _shot(page, "slurm-replica-1-log")
    finally:
        runner.cancel(handle)


def test_the_apps_page_fits_a_1280px_screen(page: Any, url: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(url + "/")
    page.locator("#apps-summary").wait_for()
    wide = page.evaluate(WIDER_THAN_1280)  # what overflows, when something does
    assert _no_horizontal_overflow(page) <= 1280, wide
