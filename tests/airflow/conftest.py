"""Fixtures for the Airflow provider tests.

Unit tests use ``airflow_fakes.py``: real Runners over the shared fake scheduler
(``tests/support/fake_scheduler.py``) and a fake task context; no database, no Airflow run.

Integration tests (``integration`` + ``airflow``) run DAG files with ``dag.test()``, one
subprocess per run (``dag_runner.py``), against a real Airflow 3 with SQLite in a temporary
``AIRFLOW_HOME`` (migrated once per session) and real apps on the local scheduler under a
temporary ``TORCHX_LOCAL_ROOT``. Every integration test ends by checking that no app it started
is still running (leftovers are cancelled, then the test fails).

``airflow_deployment`` (session, ``airflow_deployment.py``) is a real deployment (PostgreSQL,
scheduler, dag-processor, triggerer, api-server) started by ``scripts/services/airflow/start.sh``
for ``test_airflow_deployment.py``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import AirflowEnv, DagRunResult
from airflow_versions import AIRFLOW_VERSION
from support.airflow_deployment import airflow_deployment  # noqa: F401  (the real deployment)
from support.airflow_fakes import Cluster

from torchx_core.specs import AppDef, Role

#: the executor needs Airflow >= 3.3 (torchx_airflow.executors.MIN_AIRFLOW); on older releases
#: test_airflow_executor_version.py checks that importing it says so, and its own tests (which
#: use 3.3's workload classes) are not collected
collect_ignore = (
    [
        "test_airflow_executor.py",
        "test_airflow_executor_ops.py",
        "test_airflow_executor_deployment.py",
    ]
    if AIRFLOW_VERSION < (3, 3)
    else []
)

if "airflow" not in sys.modules and "AIRFLOW_HOME" not in os.environ:
    # Unit tests import Airflow in this process: keep its config/log files out of ~/airflow.
    _home = tempfile.mkdtemp(prefix="torchx-airflow-unit-")
    os.environ["AIRFLOW_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)


@pytest.fixture
def cluster() -> Cluster:
    """The shared fake scheduler (``tests/support/fake_scheduler.py``) under real Runners."""
    return Cluster()


@pytest.fixture
def app() -> AppDef:
    return AppDef(name="train", roles=[Role("r", "img", entrypoint="/bin/echo", args=["hi"])])


# -- real Airflow ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def airflow_env() -> Iterator[AirflowEnv]:
    """A migrated Airflow (SQLite) in a temporary home; removed at session end."""
    root = Path(tempfile.mkdtemp(prefix="torchx-airflow-"))
    env = AirflowEnv(root)
    env.migrate()
    try:
        yield env
    finally:
        env.cancel_all()  # only matters after an interrupted run: tests cancel their own apps
        shutil.rmtree(root, ignore_errors=True)


#: The DAGs run together in one interpreter (the first test that needs one runs them all).
BATCH = ("tx_success", "tx_sensor", "tx_failure", "tx_deferrable", "tx_kill", "torchx_example")


@pytest.fixture
def dag_run(airflow_env: AirflowEnv, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Returns the ``dag.test()`` result of a DAG of :data:`BATCH` (run once per session)."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(airflow_env.local_root))
    if airflow_env.batch is None:
        airflow_env.batch = {}
        airflow_env.batch = airflow_env.run_dags(*BATCH)

    def get(dag_id: str) -> DagRunResult:
        assert airflow_env.batch, "the DAG batch failed earlier in this session"
        return airflow_env.batch[dag_id]

    return get


@pytest.fixture
def af(airflow_env: AirflowEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[AirflowEnv]:
    """The session's Airflow env; this test's process sees its local root; no app may survive."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(airflow_env.local_root))
    before = {a.app_handle for a in airflow_env.apps()}
    yield airflow_env
    from torchx_core.specs import is_terminal

    leftovers = [
        a for a in airflow_env.apps() if a.app_handle not in before and not is_terminal(a.state)
    ]
    if leftovers:
        with airflow_env.runner() as r:
            for a in leftovers:
                r.cancel(a.app_handle)
        pytest.fail(f"apps still running after the test: {[a.app_handle for a in leftovers]}")
