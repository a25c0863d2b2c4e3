"""``torchx dashboard --public-url`` behind a real nginx (TLS, path prefix ``/torchx/``), in
headless Chromium: styles and scripts load, every link stays under the prefix, a log is followed
over the proxy and Cancel works (the browser's origin is the proxy's, not the dashboard's).

nginx comes from Debian (``scripts/services/browser/install.sh``) and is started here, on a free
loopback port, with the README's recipe; it is stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from dashboard_browser import artifacts_dir, chromium, dashboard_process, processes_of
from support.service_helpers import free_port

from torchx_core.runner import Runner, get_runner
from torchx_core.specs import AppDef, AppState, Resource, Role

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.local]

NGINX = "/usr/sbin/nginx"
WAIT_MS = 90_000

#: the README's recipe (a location under a prefix, streaming without buffering), with test paths
NGINX_CONF = """
worker_processes 1;
user root;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {run}/body;
  proxy_temp_path {run}/proxy;
  fastcgi_temp_path {run}/fastcgi;
  uwsgi_temp_path {run}/uwsgi;
  scgi_temp_path {run}/scgi;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {run}/cert.pem;
    ssl_certificate_key {run}/key.pem;
    location /torchx/ {{
      proxy_pass http://127.0.0.1:{upstream}/;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 1h;
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("proxy-root")
    saved = os.environ.get("TORCHX_LOCAL_ROOT")
    os.environ["TORCHX_LOCAL_ROOT"] = str(root)
    yield {**os.environ, "TORCHX_LOCAL_ROOT": str(root)}
    if saved is None:
        os.environ.pop("TORCHX_LOCAL_ROOT", None)
    else:
        os.environ["TORCHX_LOCAL_ROOT"] = saved


@pytest.fixture(scope="module")
def public(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The public URL (``https://127.0.0.1:<nginx port>/torchx``) of a dashboard behind nginx."""
    if not os.path.exists(NGINX):
        pytest.fail(f"{NGINX} is missing: run `bash scripts/services/browser/install.sh`")
    run = tmp_path_factory.mktemp("nginx")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-keyout", str(run / "key.pem")),
            *("-out", str(run / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    url = f"https://127.0.0.1:{port}/torchx"
    with dashboard_process(
        ["-s", "local_cwd", "--refresh", "1", "--public-url", url], env
    ) as local:
        upstream = int(local.rsplit(":", 1)[1])
        conf = run / "nginx.conf"
        conf.write_text(NGINX_CONF.format(run=run, port=port, upstream=upstream))
        proc = subprocess.Popen(
            [NGINX, "-c", str(conf), "-p", str(run), "-g", "daemon off;"],
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if proc.poll() is not None:
                    pytest.fail(f"nginx did not start: {proc.stderr.read()!r}")  # type: ignore[union-attr]
                time.sleep(0.1)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)


@pytest.fixture
def page() -> Iterator[Any]:
    with chromium() as browser:
        context = browser.new_context(ignore_https_errors=True)  # the test's self-signed cert
        yield context.new_page()
        context.close()


@pytest.fixture
def runner(env: dict[str, str]) -> Iterator[Runner]:
    with get_runner("dashproxy") as r:
        yield r


def _role(code: str) -> Role:
    return Role(
        "main",
        image=os.getcwd(),
        entrypoint=sys.executable,
        args=["-u", "-c", code],
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )


def test_behind_nginx_with_a_prefix_pages_styles_follow_and_cancel_work(
    page: Any, public: str, runner: Runner
) -> None:
    code = (
        "import time\nfor i in range(600):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)"
    )
    handle = runner.run(AppDef("dash-proxy", [_role(code)]), "local_cwd")
    app_id = handle.rsplit("/", 1)[1]
    try:
        page.goto(public + "/")
        header_bg = page.evaluate(
            "getComputedStyle(document.querySelector('header')).backgroundColor"
        )
        assert header_bg == "rgb(35, 39, 46)", "dashboard.css did not load through the proxy"
        page.locator(f'tr[data-handle$="/{app_id}"] a').click()
        assert page.url.startswith(public + "/app?"), page.url
        page.locator("#app-state", has_text="RUNNING").wait_for(timeout=WAIT_MS)
        page.locator("a.log-link").first.click()
        assert page.url.startswith(public + "/logs?"), page.url
        page.locator("#log").wait_for()
        shown = page.locator("#log").inner_text()
        last = max(
            (int(x.split()[1]) for x in shown.split("\n") if x.startswith("tick ")), default=-1
        )
        page.locator("#log", has_text=f"tick {last + 3}").wait_for(timeout=WAIT_MS)  # over SSE
        page.screenshot(path=str(artifacts_dir() / "proxy-log.png"), full_page=True)
        page.go_back()
        page.locator("#cancel-link").click()
        page.locator("#confirm-button").click()
        page.locator("#app-state", has_text="CANCELLED").wait_for(timeout=WAIT_MS)
        assert page.url.startswith(public + "/app?"), page.url
        status = runner.status(handle)
        assert status is not None and status.state == AppState.CANCELLED
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and processes_of(app_id):
            time.sleep(0.2)
        assert processes_of(app_id) == []
    finally:
        runner.cancel(handle)
