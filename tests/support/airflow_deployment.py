"""The real Airflow deployment of the tests (``scripts/services/airflow``) and a REST client.

:func:`airflow_deployment` (session fixture) starts the deployment with the repository's
``start.sh`` (PostgreSQL, ``airflow db migrate``, api-server, scheduler with LocalExecutor,
dag-processor, triggerer, all on loopback) and stops it by PID at the end if this session started
it. A deployment that cannot start fails the tests (never skips them).

:class:`AirflowDeployment` drives it through the REST API (``/api/v2``): unpause and trigger DAGs,
read, mark and clear task instances, read XComs and task logs. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parents[1] / "airflow"  # the Airflow tests (their dags/)
REPO = HERE.parents[1]
SCRIPTS = REPO / "scripts" / "services" / "airflow"
RUN_DIR = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci"))
STATE_DIR = Path(os.environ.get("CI_STATE_DIR", "/var/lib/torchx-ci"))
#: the deployment's name (``scripts/services/airflow/env.sh``): its home and PID files follow it
DEPLOYMENT = os.environ.get("AIRFLOW_DEPLOYMENT", "airflow")
LIVE_DAGS = ("live_dags.py", "live_conn.py")
#: modules the DAGs and the triggerer import: the plugins folder is on every Airflow process's path
LIVE_MODULES = ("live_triggers.py",)

#: Generous bounds: the machine is shared and slow; a wait that runs out fails the test.
START_TIMEOUT_S = 600
PARSE_TIMEOUT_S = 180
TASK_TIMEOUT_S = 300

#: A secret kept in the test connections (it must never show in logs, XCom or triggers).
CONN_SECRET = "torchx-conn-secret-7f3a9c"
#: Extra environment of every Airflow process of the test deployment: a ``torchx`` connection in
#: JSON form (``torchx_envjson``).
DEPLOYMENT_ENV: dict[str, str] = {
    "AIRFLOW_CONN_TORCHX_ENVJSON": json.dumps(
        {
            "conn_type": "torchx",
            "password": json.dumps({"TORCHX_TEST_CONN_SECRET": CONN_SECRET}),
            "extra": {
                "scheduler": "local_cwd",
                "session_name": "envjson",
                "cfg": {"grace_period": 2.0},
                "env": {"TORCHX_TEST_CONN_MARK": "from-envjson"},
            },
        }
    ),
}


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5
) -> Any:
    """Returns the first truthy ``predicate()``; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (as written by ``start.sh``)."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


class AirflowDeployment:
    """A running deployment: its settings (``airflow.env``), folders and REST API."""

    def __init__(self, home: Path) -> None:
        self.settings = read_env_file(home / "airflow.env")
        self.home = home
        self.url = self.settings["AIRFLOW__API__BASE_URL"].rstrip("/")
        self.dags = Path(self.settings["AIRFLOW__CORE__DAGS_FOLDER"])
        self.plugins = Path(self.settings["AIRFLOW__CORE__PLUGINS_FOLDER"])
        self.work = Path(self.settings["TORCHX_AF_WORK"])
        self.local_root = Path(self.settings["TORCHX_LOCAL_ROOT"])

    # -- processes --------------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        """An environment for ``airflow`` CLI calls against this deployment."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(self.settings)
        env.update(extra)
        env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def cli(
        self, *args: str, check: bool = True, timeout: float = 300, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``airflow <args>`` against this deployment."""
        proc = subprocess.run(
            [str(REPO / ".venv" / "bin" / "airflow"), *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def service_log(self, name: str) -> str:
        """The output of one Airflow process (``scheduler``, ``triggerer``...)."""
        return (self.home / "service-logs" / f"{name}.log").read_text(errors="replace")

    # -- REST -------------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200,)) -> Any:
        """One REST call (``/api/v2`` + ``path``); returns the decoded JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode(errors="replace")
        if status not in ok:
            raise AssertionError(f"{method} {path} -> HTTP {status}: {text}")
        return json.loads(text) if text else None

    def wait_parsed(self, dag_id: str) -> None:
        """Waits until the dag-processor has parsed ``dag_id`` and unpauses it."""
        wait_until(
            lambda: self.api("GET", f"/dags/{dag_id}", ok=(200, 404)).get("dag_id") == dag_id,
            PARSE_TIMEOUT_S,
            f"the dag-processor to parse {dag_id}",
            interval=1,
        )
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str) -> str:
        """Creates a DAG run (with a logical date: templates may use it); returns its run id."""
        self.wait_parsed(dag_id)
        run_id = f"t{uuid.uuid4().hex[:12]}"
        now = datetime.now(timezone.utc).isoformat()
        self.api("POST", f"/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": now})
        return run_id

    def ti(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """The task instance (``state``, ``try_number``...)."""
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def wait_ti(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        states: set[str],
        *,
        min_try: int = 1,
        timeout: float = TASK_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Waits until the task instance is in one of ``states`` on try ``min_try`` or later."""
        last: dict[str, Any] = {}

        def reached() -> bool:
            last.update(self.ti(dag_id, run_id, task_id))
            return last.get("state") in states and int(last.get("try_number") or 0) >= min_try

        try:
            wait_until(
                reached, timeout, f"{dag_id}.{task_id} in {sorted(states)} (try >= {min_try})"
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}; last seen {last.get('state')} try {last.get('try_number')}:\n"
                f"{self.task_log(dag_id, run_id, task_id, int(last.get('try_number') or 1))}"
            ) from None
        return dict(last)

    def wait_deferred(
        self, dag_id: str, run_id: str, task_id: str = "train", try_number: int = 1
    ) -> None:
        """Waits until the task is deferred, a triggerer runs its trigger and the scheduler has
        processed the end of the worker run that deferred.

        A user action before the triggerer picked the trigger up finds no trigger to run ``on_kill``
        on (Airflow only kills triggers a triggerer runs). And the deferring worker run's exit may
        reach the scheduler seconds late (LocalExecutor): if the resumed task is running by then,
        the scheduler marks it failed ("finished with state success, but the task instance's state
        attribute is running", an Airflow race independent of our code), so the tests let the apps
        end only after it.
        """
        self.wait_ti(dag_id, run_id, task_id, {"deferred"}, min_try=try_number)
        wait_until(
            lambda: self.ti(dag_id, run_id, task_id).get("triggerer_job"),
            180,
            f"a triggerer to pick up the trigger of {dag_id}.{task_id}",
        )
        event = (
            f"Received executor event with state success for task instance TaskInstanceKey("
            f"dag_id='{dag_id}', task_id='{task_id}', run_id='{run_id}', try_number={try_number}"
        )
        wait_until(
            lambda: event in self.service_log("scheduler"),
            180,
            f"the scheduler to see the deferring run of {dag_id}.{task_id} end",
        )

    def set_ti_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """Marks a task instance (``failed``/``success``), as a user does in the UI."""
        self.api(
            "PATCH",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}",
            {"new_state": state},
        )

    def clear_ti(self, dag_id: str, run_id: str, task_id: str) -> None:
        """Clears a task instance (it runs again as a new try), as a user does in the UI."""
        self.api(
            "POST",
            f"/dags/{dag_id}/clearTaskInstances",
            {
                "dry_run": False,
                "dag_run_id": run_id,
                "task_ids": [task_id],
                "only_failed": False,
                "reset_dag_runs": True,
            },
        )

    def trigger_kwargs(self, trigger_id: int) -> str:
        """The stored (serialized) kwargs of a trigger, as the triggerer reads them (the REST
        API hides them), decrypted if Airflow encrypted them."""
        import psycopg2  # the dev extra; the deployment's database is PostgreSQL

        url = urllib.parse.urlsplit(self.settings["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        con = psycopg2.connect(
            host=url.hostname, port=url.port, user=url.username, dbname=url.path.lstrip("/")
        )
        try:
            with con.cursor() as cur:
                cur.execute("SELECT kwargs FROM trigger WHERE id = %s", (trigger_id,))
                (stored,) = cur.fetchone()
        finally:
            con.close()
        if not stored.lstrip().startswith("{"):
            from cryptography.fernet import Fernet

            key = self.settings["AIRFLOW__CORE__FERNET_KEY"].encode()
            stored = Fernet(key).decrypt(stored.encode()).decode()
        return stored

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> Any:
        """An XCom value (None when absent)."""
        got = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
            ok=(200, 404),
        )
        return got.get("value") if got and "value" in got else None

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The task log of one try, as text."""
        got = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
            "?full_content=true",
            ok=(200, 404),
        )
        content = (got or {}).get("content") or []
        if isinstance(content, str):
            return content
        return "\n".join(_log_entry(c) for c in content)


def _log_entry(entry: Any) -> str:
    """One task-log entry as text: its message, then its exception's type and value, if any."""
    if not isinstance(entry, dict):
        return str(entry)
    lines = [str(entry.get("event", ""))]
    for exc in entry.get("error_detail") or []:
        if isinstance(exc, dict):
            lines.append(f"{exc.get('exc_type')}: {exc.get('exc_value')}")
    return "\n".join(lines)


@contextmanager
def no_leftover_apps(dep: AirflowDeployment) -> Iterator[None]:
    """Fails the test (after cancelling them) if apps it started on the deployment's local
    scheduler root are still running at its end; ``TORCHX_LOCAL_ROOT`` must name that root."""
    from torchx_core.runner import get_runner
    from torchx_core.specs import is_terminal

    with get_runner() as r:
        before = {a.app_handle for a in r.list("local_cwd")}
    yield
    with get_runner() as r:
        leftovers = [
            a.app_handle
            for a in r.list("local_cwd")
            if a.app_handle not in before and not is_terminal(a.state)
        ]
        for handle in leftovers:
            r.cancel(handle)
    if leftovers:
        pytest.fail(f"apps still running after the test: {leftovers}")


def _start(extra_env: dict[str, str], deployment: str = DEPLOYMENT) -> tuple[Path, bool]:
    """Runs ``start.sh``; returns the deployment home and whether this call started it.

    ``deployment`` names another deployment (give its own ``AIRFLOW_API_PORT``/``AIRFLOW_PG_PORT``
    in ``extra_env``); ``extra_env`` may override any setting of ``env.sh``.
    """
    pidfile = RUN_DIR / f"{deployment}-api-server.pid"

    def running() -> bool:
        try:
            pid = int(pidfile.read_text().strip())
            return Path(f"/proc/{pid}").exists()
        except (OSError, ValueError):
            return False

    before = running()
    # the unit tests' AIRFLOW_HOME (conftest) must not leak into the deployment; its own
    # settings (AIRFLOW_API_PORT, AIRFLOW_PG_PORT, CI_STATE_DIR...) do
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AIRFLOW_HOME", "AIRFLOW_CONFIG") and not k.startswith("AIRFLOW__")
    }
    env.update(extra_env)
    env["AIRFLOW_DEPLOYMENT"] = deployment
    proc = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"the Airflow deployment did not start (scripts/services/airflow/start.sh exit"
            f" {proc.returncode}; install with scripts/services/airflow/install.sh):\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    home = Path(extra_env.get("AIRFLOW_HOME") or STATE_DIR / deployment)
    return home, not before and running()


@pytest.fixture(scope="session")
def airflow_deployment() -> Iterator[AirflowDeployment]:
    """The real deployment, with the live DAGs in its DAGs folder."""
    home, started = _start(DEPLOYMENT_ENV)
    dep = AirflowDeployment(home)
    for name in LIVE_MODULES:
        shutil.copy(HERE / "dags" / name, dep.plugins / name)
    for name in LIVE_DAGS:
        shutil.copy(HERE / "dags" / name, dep.dags / name)
    try:
        yield dep
    finally:
        if started:
            subprocess.run(
                ["bash", str(SCRIPTS / "stop.sh")], capture_output=True, timeout=300, check=False
            )
