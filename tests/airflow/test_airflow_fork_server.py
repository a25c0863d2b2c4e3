"""The warm fork server and its client (issue 35, finding 5), with a real server process: what it
declines, the exit code relayed from the forked task, the fallback without a server, its end
with its lifeline. The deployment tests run real tasks through it
(``test_airflow_executor_deployment.py``)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchx_airflow import _fork_server
from torchx_airflow.task_entry import SERVER_ENV, TOKEN_ENV


def test_declined_names_what_differs_never_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", "/server/dags")
    env = dict(os.environ)
    assert _fork_server.declined(env, sys.prefix) == ""
    # per task: read when the task runs
    per_task = {**env, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://elsewhere/"}
    assert _fork_server.declined(per_task, sys.prefix) == ""
    assert _fork_server.declined({**env, "TORCHX_APP_ID": "x", "PYTHONUNBUFFERED": "1"},
                                 sys.prefix) == ""  # fmt: skip
    other = {**env, "AIRFLOW__CORE__DAGS_FOLDER": "/secret/value", "PYTHONPATH": "/p"}
    why = _fork_server.declined(other, sys.prefix)
    assert why == "environment differs: AIRFLOW__CORE__DAGS_FOLDER, PYTHONPATH", why
    assert "/secret/value" not in why
    assert _fork_server.declined(env, "/another/venv").startswith("another interpreter")


def test_the_warm_heap_is_frozen_before_any_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked task's collections must not walk (CPU) or touch (copied pages) the warm heap."""
    warmed: list[object] = []
    monkeypatch.setattr(_fork_server, "warm", lambda: warmed.append([{"imported": "modules"}]))
    gc.unfreeze()
    try:
        _fork_server.prepare()
        assert warmed and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    directory = tmp_path / "srv"
    directory.mkdir(mode=0o700)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchx_airflow._fork_server", str(directory)],
        stdin=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    sock = directory / _fork_server.SOCKET_NAME
    try:
        deadline = time.monotonic() + 120  # it imports the Task SDK first
        while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sock.exists(), "the server never listened"
        yield proc, sock
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _entry(sock: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), SERVER_ENV: str(sock), **env}
    return subprocess.run([sys.executable, "-m", "torchx_airflow.task_entry", *args], env=full,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.integration
def test_the_forked_tasks_exit_code_comes_back_and_a_stranger_starts_cold(
    server: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, sock = server
    # forked: task_entry without a token exits 2 (usage), in the child, relayed by the client
    got = _entry(sock, "{}")
    assert got.returncode == 2, got.stderr
    assert "forked from the warm server" in got.stderr and "usage:" in got.stderr, got.stderr
    # an Airflow setting the server was not started with: declined, run here (same exit code)
    got = _entry(sock, "{}", AIRFLOW__CORE__PARALLELISM="7", **{TOKEN_ENV: ""})
    assert got.returncode == 2, got.stderr
    assert "declined (environment differs: AIRFLOW__CORE__PARALLELISM)" in got.stderr
    assert "forked from" not in got.stderr
    # its lifeline closes: the server ends and removes its socket
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(30) == 0
    assert not sock.exists()
    got = _entry(sock, "{}")
    assert got.returncode == 2 and "no warm server" in got.stderr, got.stderr


_PARSE_AFTER_WARM = """
import json, sys
from torchx_airflow._fork_server import warm
warm()
before = set(sys.modules)
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow < 3.1
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False, load_op_links=False)
assert list(bag.dags) == ["warm_parse"], (bag.dags, bag.import_errors)
new = sorted(m for m in set(sys.modules) - before if not m.startswith("unusual_prefix_"))
import ssl
made = []
create = ssl.create_default_context
ssl.create_default_context = lambda *a, **k: made.append(a) or create(*a, **k)
from airflow.sdk.api.client import Client
Client(base_url="http://127.0.0.1:9", token="t").close()  # as the forked supervisor does
print(json.dumps({"imported": new, "ssl_contexts": len(made)}))
"""


@pytest.mark.integration
def test_after_the_warm_up_a_task_parses_its_dag_and_reaches_the_api_at_no_start_cost(
    tmp_path: Path,
) -> None:
    """The forked task runner parses its DAG file: what that imports (the DagBag, serialization,
    the ``@task`` decorators; about 0.2 s of CPU) must already be in the warm heap. The forked
    supervisor's Execution API client must find its SSL context (the CA store, ~50 ms of CPU)
    built."""
    dag = tmp_path / "warm_parse.py"
    dag.write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG, task\n"
        "with DAG('warm_parse', schedule=None, start_date=datetime(2024, 1, 1)):\n"
        "    @task\n"
        "    def hello() -> int:\n"
        "        return 1\n"
        "    hello()\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", _PARSE_AFTER_WARM, str(dag)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout.strip().splitlines()[-1]) == {"imported": [], "ssl_contexts": 0}
