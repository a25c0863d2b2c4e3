"""``torchx dashboard`` as a real process: the token on a non-loopback bind, bad arguments."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from dashboard_browser import dashboard_process

pytestmark = [pytest.mark.integration, pytest.mark.local]


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_a_non_loopback_bind_prints_a_token_and_answers_401_without_it(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path)}
    env.pop("TORCHX_DASHBOARD_TOKEN", None)
    with dashboard_process(["--host", "0.0.0.0", "-s", "local_cwd"], env) as url:
        port = url.rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"
        assert _status(base + "/") == 401
        assert _status(base + "/static/dashboard.css") == 401
        assert _status(base + "/", {"Authorization": "Bearer wrong"}) == 401
    # the token printed at start is the one that works (the URL printed carries it)
    with dashboard_process(
        ["--host", "0.0.0.0", "-s", "local_cwd", "--token", "given-t0k"], env
    ) as url:
        port = url.rsplit(":", 1)[1]
        assert _status(f"http://127.0.0.1:{port}/", {"Authorization": "Bearer given-t0k"}) == 200
        assert _status(f"http://127.0.0.1:{port}/") == 401


def test_the_generated_token_is_printed(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path)}
    env.pop("TORCHX_DASHBOARD_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torchx_core.cli.main",
            "dashboard",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "-s",
            "local_cwd",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.search(r"http://0\.0\.0\.0:(\d+)/\?token=(\S+)", first)
        assert m, first
        assert f"token (generated): {m.group(2)}" in proc.stdout.readline()
        assert (
            _status(f"http://127.0.0.1:{m.group(1)}/", {"Authorization": f"Bearer {m.group(2)}"})
            == 200
        )
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", "nosuch"], "unknown scheduler(s) nosuch; registered:"),
        (["--refresh", "0"], "--refresh must be > 0, got 0.0"),
        (
            ["--max-follows", "0", "--filter-timeout", "nan"],
            "--filter-timeout must be > 0, got nan",
        ),
        (["--engine-url", "jenkins=http://x"], "--engine-url 'jenkins=http://x' must be ENGINE="),
    ],
)
def test_bad_arguments_are_clear_errors(args: list[str], message: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "dashboard", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1 and message in out.stderr, out.stderr


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_cancel_and_delete_work_with_only_the_dashboard_extra_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Form posts need python-multipart: the dashboard venv has the ``dashboard`` extra only."""
    from torchx_core.runner import get_runner
    from torchx_core.specs import AppDef, AppState, Role

    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path))
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path)}
    role = Role(
        "main", os.getcwd(), entrypoint=sys.executable, args=["-c", "import time; time.sleep(600)"]
    )
    with get_runner("dashcli") as runner:
        handle = runner.run(AppDef("dash-venv", [role]), "local_cwd")
        try:
            with dashboard_process(["-s", "local_cwd"], env) as url:
                opener = urllib.request.build_opener(_NoRedirect)
                q = urllib.parse.quote(handle, safe="")
                for action in ("cancel", "delete"):
                    with opener.open(f"{url}/app/confirm?action={action}&handle={q}") as resp:
                        page = resp.read().decode()
                    m = re.search(r'name="csrf" value="([^"]+)"', page)
                    assert m, page
                    body = urllib.parse.urlencode(
                        {"action": action, "handle": handle, "csrf": m.group(1)}
                    ).encode()
                    req = urllib.request.Request(f"{url}/app/action", data=body, method="POST")
                    try:
                        opener.open(req, timeout=60)
                        code, text = 200, ""
                    except urllib.error.HTTPError as e:
                        code, text = e.code, e.read().decode(errors="replace")
                    assert code == 303, text
                    if action == "cancel":
                        status = runner.wait(handle, wait_interval=0.2)
                        assert status is not None and status.state == AppState.CANCELLED
                assert runner.status(handle) is None
        finally:
            runner.cancel(handle)


def test_a_slow_filter_leaves_the_other_pages_served_and_downloads_are_the_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A+)+B over a 100 kB line runs in a worker process: /rows answers meanwhile."""
    import threading
    import time

    from torchx_core.runner import get_runner
    from torchx_core.specs import AppDef, AppState, Role

    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path))
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path)}
    code = "import sys; sys.stdout.buffer.write(b'A' * 100_000 + b'\\n\\xff\\xfe raw\\n')"
    role = Role("main", os.getcwd(), entrypoint=sys.executable, args=["-c", code])
    with get_runner("dashcli") as runner:
        handle = runner.run(AppDef("dash-filter", [role]), "local_cwd")
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state == AppState.SUCCEEDED
        (listed,) = [a for a in runner.list("local_cwd") if a.app_handle == handle]
        assert listed.created is not None and listed.ended is not None  # the Ended column
        assert listed.ended >= listed.created
        files = runner.log_files(handle, "main", 0)
        assert files is not None
        expected = Path(files[0]).read_bytes()
        assert b"\xff\xfe raw" in expected
        with dashboard_process(["-s", "local_cwd", "--filter-timeout", "20"], env) as url:
            q = urllib.parse.quote(handle, safe="")
            with urllib.request.urlopen(f"{url}/logs/download?handle={q}&role=main") as resp:
                assert resp.read() == expected
            done: list[float] = []
            slow = f"{url}/logs?handle={q}&role=main&regex=" + urllib.parse.quote("(A+)+B")

            def run_filter() -> None:
                with urllib.request.urlopen(slow, timeout=120) as resp:
                    page = resp.read().decode()
                assert "the filter was stopped after 20 s" in page
                done.append(time.monotonic())

            filtering = threading.Thread(target=run_filter, daemon=True)
            filtering.start()
            time.sleep(1.0)  # the filter is running in its worker by now
            started = time.monotonic()
            assert _status(f"{url}/rows") == 200
            took = time.monotonic() - started
            assert filtering.is_alive() and not done, "the filter ended before /rows was asked"
            assert took <= 5.0, f"/rows took {took:.1f} s while a filter ran"
            filtering.join(120)
            assert done, "the filter was never cut off"
