"""Session fixtures for a real Prefect deployment: the API server and served flows.

* ``prefect_api`` (session): a real ``prefect server start`` on 127.0.0.1 (SQLite, no UI,
  analytics off) started by ``scripts/services/prefect/start.sh`` with a temporary PREFECT_HOME
  and result storage, stopped at the end by ``stop.sh`` (by PID) if this session started it.
  Yields a :class:`PrefectAPI` (``.url`` is the API URL, ``.env`` the variables a client process
  needs). Port: ``TORCHX_TEST_PREFECT_PORT`` (default 14200).
* ``prefect_server`` (session): points this process's Prefect settings (and the environment its
  subprocesses inherit) at that server.
* :class:`ServedProcess`: a background Python process (e.g. ``prefect.serve(...)`` or a worker)
  started and stopped by PID, in its own process group; :func:`wait_for_deployment` waits for its
  deployments to be registered.

A server that cannot start fails the tests (never skips them). Other fixture modules (a Prefect
worker, blocks) reuse ``prefect_api``/``prefect_server``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "services" / "prefect"
RUN_DIR = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci"))


@dataclass(frozen=True)
class PrefectAPI:
    """A running Prefect API server.

    Args:
        url: the API URL (``http://127.0.0.1:<port>/api``)
        home: the PREFECT_HOME the server (and its clients) use
        started_here: True if this session started it (and stops it)
    """

    url: str
    home: Path
    started_here: bool

    @property
    def env(self) -> dict[str, str]:
        """The environment a client process (runner, worker, CLI) needs to use this server."""
        return {
            "PREFECT_API_URL": self.url,
            "PREFECT_HOME": str(self.home),
            "PREFECT_LOCAL_STORAGE_PATH": str(self.home / "storage"),
            "PREFECT_MEMO_STORE_PATH": str(self.home / "memo_store.toml"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pidfile_alive(path: Path) -> bool:
    try:
        return _pid_alive(int(path.read_text().strip()))
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectAPI]:
    """A real Prefect API server for the session (see the module docstring)."""
    port = os.environ.get("TORCHX_TEST_PREFECT_PORT", "14200")
    home = tmp_path_factory.mktemp("prefect-server-home")
    pidfile = RUN_DIR / f"prefect-{port}.pid"
    running_before = _pidfile_alive(pidfile)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    bin_dir = Path(sys.executable).parent  # the server from this interpreter's environment
    env.update(
        PREFECT_PORT=port,
        PREFECT_HOME=str(home),
        PREFECT_BIN=str(bin_dir / "prefect"),
        PYTHON=sys.executable,
    )
    proc = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"the Prefect server did not start (scripts/services/prefect/start.sh exit"
            f" {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    url = next(
        line.split("=", 1)[1]
        for line in proc.stdout.splitlines()
        if line.startswith("PREFECT_API_URL=")
    )
    started = not running_before and _pidfile_alive(pidfile)
    try:
        yield PrefectAPI(url=url, home=home, started_here=started)
    finally:
        if started:
            subprocess.run(
                ["bash", str(SCRIPTS / "stop.sh")],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )


@pytest.fixture(scope="session")
def prefect_server(prefect_api: PrefectAPI) -> Iterator[PrefectAPI]:
    """This process's Prefect settings and environment point at the session's real server."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_HOME,
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_MEMO_STORE_PATH,
        PREFECT_SERVER_ANALYTICS_ENABLED,
        temporary_settings,
    )

    saved = {k: os.environ.get(k) for k in prefect_api.env}
    os.environ.update(prefect_api.env)
    try:
        with temporary_settings(
            updates={
                PREFECT_API_URL: prefect_api.url,
                PREFECT_HOME: prefect_api.home,
                PREFECT_LOCAL_STORAGE_PATH: prefect_api.home / "storage",
                PREFECT_MEMO_STORE_PATH: prefect_api.home / "memo_store.toml",
                PREFECT_SERVER_ANALYTICS_ENABLED: False,
            }
        ):
            yield prefect_api
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class ServedProcess:
    """A background Python process (``python <script> <args>``) in its own process group.

    Started by :meth:`start`, stopped by :meth:`stop` (SIGTERM to its process group, SIGKILL
    after ``grace`` seconds), by its PID only. Its output goes to ``log``.
    """

    script: Path
    env: Mapping[str, str]
    log: Path
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServedProcess:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(self.script), *self.args],
                cwd=REPO,
                env=dict(self.env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, grace: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def wait_for_deployment(served: ServedProcess, name: str, timeout: float = 300.0) -> Any:
    """Waits (bounded) until the deployment ``<flow name>/<deployment name>`` exists; fails at
    once if the serving process died."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout
    while True:
        if not served.alive():
            raise AssertionError(f"{served.script.name} exited:\n{served.output()}")
        try:
            with get_client(sync_client=True) as client:
                return client.read_deployment_by_name(name)
        except ObjectNotFound:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(
                f"deployment {name} not registered after {timeout}s:\n{served.output()}"
            )
        time.sleep(0.5)
