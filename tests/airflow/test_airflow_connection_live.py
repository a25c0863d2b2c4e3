"""The ``torchx`` connection type and ``TorchXHook`` on the real Airflow deployment.

Two connections: ``torchx_envjson`` from the deployment's ``AIRFLOW_CONN_TORCHX_ENVJSON`` (JSON
form) and ``torchx_cli`` added with ``airflow connections add``; each is used by a DAG with no
scheduler or cfg in its operators, deferred and on a worker (``dags/live_conn.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from support.airflow_deployment import CONN_SECRET, AirflowDeployment, no_leftover_apps, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

CLI_SECRET = "torchx-cli-secret-41d2e8"


@pytest.fixture(autouse=True)
def _no_leftover_apps(
    airflow_deployment: AirflowDeployment, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(airflow_deployment.local_root))
    with no_leftover_apps(airflow_deployment):
        yield


@pytest.fixture(scope="module")
def cli_conn(airflow_deployment: AirflowDeployment) -> str:
    """``torchx_cli``, added with ``airflow connections add`` (replaced if it exists)."""
    dep = airflow_deployment
    dep.cli("connections", "delete", "torchx_cli", check=False)
    dep.cli(
        "connections",
        "add",
        "torchx_cli",
        "--conn-type",
        "torchx",
        "--conn-password",
        json.dumps({"TORCHX_TEST_CLI_SECRET": CLI_SECRET}),
        "--conn-extra",
        json.dumps(
            {
                "scheduler": "local_cwd",
                "session_name": "clisession",
                "env": {"TORCHX_TEST_CONN_MARK": "from-cli"},
            }
        ),
    )
    return "torchx_cli"


@pytest.mark.parametrize(
    ("conn_id", "session", "secret"),
    [("torchx_envjson", "envjson", CONN_SECRET), ("torchx_cli", "clisession", CLI_SECRET)],
)
def test_a_dag_runs_on_the_connection_deferred_and_on_a_worker(
    airflow_deployment: AirflowDeployment, cli_conn: str, conn_id: str, session: str, secret: str
) -> None:
    dep = airflow_deployment
    dag = f"live_conn_{conn_id}"
    run = dep.trigger(dag)
    # the serialized trigger of the deferred task (its app waits for the release file)
    trigger = wait_until(
        lambda: dep.ti(dag, run, "deferred").get("trigger"), 300, f"{dag}.deferred to defer"
    )
    kwargs = dep.trigger_kwargs(trigger["id"])
    assert json.loads(kwargs)["torchx_conn_id"] == conn_id, kwargs
    assert secret not in kwargs and "from-" not in kwargs  # the id, never the values
    dep.wait_deferred(dag, run, "deferred")  # (see wait_deferred: an Airflow LocalExecutor race)
    (dep.work / f"{run}.release").touch()
    for task in ("deferred", "worker"):
        ti = dep.wait_ti(dag, run, task, {"success", "failed"})
        log = dep.task_log(dag, run, task, 1)
        assert ti["state"] == "success", log
        result = dep.xcom(dag, run, task, "return_value")
        # the connection's scheduler and session name (the DAG gives neither)
        assert re.match(rf"local_cwd://{session}/conn-{task}-[0-9a-f]{{10}}-", result["app_handle"])
        assert result["state"] == "SUCCEEDED"
        # its environment was applied (names are logged, values never)
        assert f"scheduler client environment from connection {conn_id}:" in log
        assert "TORCHX_TEST_CONN_MARK" in log
        for text in (log, json.dumps(result), json.dumps(dep.xcom(dag, run, task, "app_handle"))):
            assert secret not in text
    # the trigger in the triggerer resolved the connection too (its log is the task's)
    assert "scheduler client environment from connection" in dep.task_log(dag, run, "deferred", 1)


def test_airflow_connections_test_succeeds_for_a_reachable_scheduler(
    airflow_deployment: AirflowDeployment, cli_conn: str
) -> None:
    out = airflow_deployment.cli("connections", "test", cli_conn)
    text = out.stdout + out.stderr
    assert "Connection success!" in text, text  # the CLI prints the hook's message on failure only
    assert CLI_SECRET not in text


def test_airflow_connections_test_fails_clearly_for_a_wrong_one(
    airflow_deployment: AirflowDeployment,
) -> None:
    dep = airflow_deployment
    dep.cli("connections", "delete", "torchx_wrong", check=False)
    dep.cli(
        "connections",
        "add",
        "torchx_wrong",
        "--conn-type",
        "torchx",
        "--conn-extra",
        json.dumps({"scheduler": "slrum"}),
    )
    out = dep.cli("connections", "test", "torchx_wrong", check=False)
    text = out.stdout + out.stderr
    assert "Connection failed!" in text, text
    # checked as a task checks it: the unknown scheduler is named, with the valid ones
    assert "connection 'torchx_wrong': scheduler 'slrum'" in text and "slurm" in text, text


def test_the_provider_lists_the_hook_and_the_connection_type(
    airflow_deployment: AirflowDeployment,
) -> None:
    out = airflow_deployment.cli("providers", "hooks", "-o", "json").stdout
    hooks = json.loads(out[out.index("[") :])
    ours = [h for h in hooks if h.get("connection_type") == "torchx"]
    assert len(ours) == 1, hooks
    assert ours[0]["class"] == "torchx_airflow.hook.TorchXHook"
    assert ours[0]["package_name"] == "torchx-suite" and ours[0]["hook_name"] == "TorchX"


def test_the_ui_test_button_names_the_edited_connection(
    airflow_deployment: AirflowDeployment,
) -> None:
    """Issue 35 item 10: the UI's Test button posts the edited form to the API, which has
    Airflow test a copy under a throw-away id; the message named that id."""
    got = airflow_deployment.api(
        "POST",
        "/connections/test",
        {
            "connection_id": "torchx_edited",
            "conn_type": "torchx",
            "extra": json.dumps({"scheduler": "slrum"}),
        },
    )
    assert got["status"] is False, got
    assert "connection 'torchx_edited': scheduler 'slrum'" in got["message"], got
