"""Helpers of the browser tests: a real ``torchx dashboard`` process and headless Chromium.

The dashboard process runs from ``build/dashboard-venv``: a plain ``python -m venv`` with only
``pip install -e '<checkout>[dashboard]'`` in it (rebuilt when ``pyproject.toml`` changes), so a
dependency the ``dashboard`` extra lacks fails these tests instead of being hidden by the dev venv.

The browser is Debian's ``/usr/bin/chromium`` (``scripts/services/browser/install.sh``) driven by
Playwright's Python package; Playwright never downloads a browser here. Screenshots go to
``$TORCHX_TEST_ARTIFACTS/dashboard`` (default ``<repo>/.test-artifacts/dashboard``, ignored by
git); the folder is printed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts_dir() -> Path:
    root = Path(os.environ.get("TORCHX_TEST_ARTIFACTS") or REPO / ".test-artifacts")
    out = root / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    return out


DASHBOARD_VENV = REPO / "build" / "dashboard-venv"


def dashboard_venv() -> Path:
    """``build/dashboard-venv`` (only the ``dashboard`` extra of this checkout); its python."""
    stamp = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    marker = DASHBOARD_VENV / ".pyproject-sha256"
    python = DASHBOARD_VENV / "bin" / "python"
    DASHBOARD_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(DASHBOARD_VENV.parent / ".dashboard-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time
        if marker.exists() and marker.read_text() == stamp and python.exists():
            return python
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--clear", str(DASHBOARD_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-e", f"{REPO}[dashboard]"],
            check=True,
            env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        )
        marker.write_text(stamp)
    return python


def venv_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process of the dashboard venv: no PYTHONPATH into another environment."""
    out = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out["PYTHONPATH"] = str(REPO)  # this checkout's sources (installed editable anyway)
    return out


@contextmanager
def dashboard_process(args: list[str], env: dict[str, str]) -> Iterator[str]:
    """Runs ``torchx dashboard --port 0 ARGS`` from the dashboard venv; yields the URL it
    prints; stops it by PID."""
    torchx = dashboard_venv().parent / "torchx"
    proc = subprocess.Popen(
        [str(torchx), "dashboard", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=venv_env(env),
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = None
        deadline = time.monotonic() + 60
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"(http://\S+)", line)
            if m:
                url = m.group(1).split("?", 1)[0].rstrip("/")
                break
        if url is None:
            pytest.fail(f"torchx dashboard did not start:\n{''.join(seen)}")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(20)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless system Chromium under Playwright (fails, never skips, when it is missing)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/services/browser/install.sh`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def processes_of(app_id: str) -> list[int]:
    """PIDs of live processes whose environment carries ``TORCHX_APP_ID=app_id``."""
    needle = f"TORCHX_APP_ID={app_id}\0".encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    out.append(int(pid))
        except OSError:
            continue
    return out


def sse_lines(body: str) -> tuple[list[list[Any]], int | None]:
    """The ``[number, text]`` pairs of every data event of a log follow's event stream, in
    order, and the last ``id:`` sent (however the server batched the lines into events)."""
    import json

    pairs: list[list[Any]] = []
    last = None
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line[:7])
        if "id" in fields:
            last = int(fields["id"])
        if "data" in fields and "event" not in fields:
            pairs += json.loads(fields["data"])
    return pairs, last
