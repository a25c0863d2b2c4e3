"""TorchXHook and the ``torchx`` connection: parsing, the form, test_connection, and how the
operator, sensor and trigger use a connection (connections from ``AIRFLOW_CONN_*`` variables,
real Runners; no Airflow run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow_versions import TaskDeferred
from support.airflow_fakes import Cluster, FakeStore, make_context

from torchx_airflow import TorchXOperator, TorchXSensor
from torchx_airflow._airflow import AirflowFailException
from torchx_airflow.errors import InvalidConnectionError, TorchXAirflowError
from torchx_airflow.hook import ConnectionSettings, TorchXHook
from torchx_core.specs import AppDef, AppState

SECRET = "s3cr3t-token-value"


def _define(
    monkeypatch: pytest.MonkeyPatch,
    conn_id: str,
    extra: dict[str, Any],
    password: dict[str, str] | None = None,
    conn_type: str = "torchx",
) -> None:
    conn: dict[str, Any] = {"conn_type": conn_type, "extra": extra}
    if password is not None:
        conn["password"] = json.dumps(password)
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_settings_from_a_json_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    _define(
        monkeypatch,
        "tx",
        {
            "scheduler": "slurm",
            "cfg": {"partition": "gpu"},
            "session_name": "team",
            "env": {"SLURM_CONF": "/etc/s.conf"},
        },
        {"AWS_SECRET_ACCESS_KEY": SECRET},
    )
    s = TorchXHook("tx").settings()
    assert s == ConnectionSettings(
        "slurm",
        {"partition": "gpu"},
        "team",
        {"SLURM_CONF": "/etc/s.conf"},
        {"AWS_SECRET_ACCESS_KEY": SECRET},
    )
    assert SECRET not in repr(s)


def test_ui_prefixed_and_json_string_fields_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _define(
        monkeypatch,
        "tx",
        {
            "extra__torchx__scheduler": "kubernetes",
            "extra__torchx__cfg": '{"queue": "q"}',
            "env": "",
        },
    )
    s = TorchXHook("tx").settings()
    assert (s.scheduler, s.cfg, s.env) == ("kubernetes", {"queue": "q"}, {})


def test_every_problem_is_listed_and_secrets_are_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_BAD",
        json.dumps(
            {
                "conn_type": "torchx",
                "password": SECRET + "{not json",
                "extra": {"scheduler": 3, "cfg": "[1, 2]", "env": {"A": 1}, "queue": "x"},
            }
        ),
    )
    with pytest.raises(InvalidConnectionError) as ei:
        TorchXHook("bad").settings()
    msg = str(ei.value)
    for needle in (
        "unknown extra key 'queue'",
        "scheduler must be",
        "cfg must be a JSON object",
        "env must map",
        "password (secret environment) must be a JSON object",
    ):
        assert needle in msg
    assert SECRET not in msg
    assert isinstance(ei.value, TorchXAirflowError) and isinstance(ei.value, ValueError)


def test_a_connection_of_another_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _define(monkeypatch, "pg", {}, conn_type="postgres")
    with pytest.raises(InvalidConnectionError, match="type 'postgres'; TorchX needs type 'torchx'"):
        TorchXHook("pg").settings()


def test_missing_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        InvalidConnectionError, match=r"no connection 'absent'.*AIRFLOW_CONN_ABSENT"
    ):
        TorchXHook("absent").settings()
    assert TorchXHook("absent").settings(missing_ok=True) == ConnectionSettings()


def test_ui_field_behaviour() -> None:
    ui = TorchXHook.get_ui_field_behaviour()
    assert ui["hidden_fields"] == ["host", "schema", "port", "login"]
    assert ui["relabeling"] == {"password": "Secret environment (JSON)"}
    assert ui["placeholders"]["scheduler"] == "slurm"


def test_get_conn_applies_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHX_TEST_CLIENT_VAR", raising=False)
    monkeypatch.delenv("TORCHX_TEST_SECRET_VAR", raising=False)
    _define(
        monkeypatch,
        "tx",
        {
            "scheduler": "local_cwd",
            "session_name": "team",
            "env": {"TORCHX_TEST_CLIENT_VAR": "client"},
        },
        {"TORCHX_TEST_SECRET_VAR": SECRET},
    )
    import os

    with TorchXHook("tx").get_conn() as runner:
        assert runner.name() == "team"
    assert os.environ["TORCHX_TEST_CLIENT_VAR"] == "client"
    assert os.environ["TORCHX_TEST_SECRET_VAR"] == SECRET


def test_test_connection_lists_apps_or_says_what_failed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path))
    _define(monkeypatch, "ok", {"scheduler": "local_cwd", "cfg": {"grace_period": 2.0}})
    assert TorchXHook("ok").test_connection() == (
        True,
        "scheduler 'local_cwd' and its run options are valid; it is reachable and lists 0 app(s)",
    )
    _define(monkeypatch, "typo", {"scheduler": "slrum"})
    ok, msg = TorchXHook("typo").test_connection()
    assert not ok and msg.startswith("connection 'typo': scheduler 'slrum'") and "slurm" in msg
    _define(monkeypatch, "empty", {})
    ok, msg = TorchXHook("empty").test_connection()
    assert not ok and "names no scheduler" in msg


def test_a_test_through_airflows_api_names_the_edited_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35 item 10: Airflow's test API has the hook test a copy of the edited connection
    under a throw-away id (its handler holds ``transient_conn_id`` and ``test_body``); the
    message names the edited id. Elsewhere the id is the hook's own."""
    from types import SimpleNamespace

    _define(monkeypatch, "Xq7Zr2Lp", {"scheduler": "slrum"})

    def like_airflows_handler(test_body: Any) -> tuple[bool, str]:
        transient_conn_id = "Xq7Zr2Lp"
        return TorchXHook(transient_conn_id).test_connection()

    ok, msg = like_airflows_handler(SimpleNamespace(connection_id="torchx_edited"))
    assert not ok and msg.startswith("connection 'torchx_edited': scheduler 'slrum'"), msg
    ok, msg = TorchXHook("Xq7Zr2Lp").test_connection()
    assert msg.startswith("connection 'Xq7Zr2Lp': scheduler 'slrum'"), msg


@pytest.mark.parametrize(
    ("cfg", "says"),
    [
        ({"grace_periodd": 2}, "unknown run option 'grace_periodd'. Did you mean: 'grace_period'?"),
        ({"grace_period": "soon"}, "grace_period, must be of type: float, but was: 'soon'"),
    ],
)
def test_test_connection_checks_run_options_as_a_task_does(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    app: AppDef,
    cfg: dict[str, Any],
    says: str,
) -> None:
    """Issue 22 item 2: what fails a task fails the connection test, with the same words."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path))
    _define(monkeypatch, "bad", {"scheduler": "local_cwd", "cfg": cfg})
    ok, msg = TorchXHook("bad").test_connection()
    assert not ok, msg
    assert msg.startswith(
        f"connection 'bad': scheduler 'local_cwd' with run options {sorted(cfg)}: "
    )
    assert says in msg
    op = TorchXOperator(task_id="task", app=app, torchx_conn_id="bad")
    with pytest.raises(AirflowFailException) as ei:
        op.execute(make_context(FakeStore()))
    assert says in str(ei.value) and "connection 'bad' (scheduler 'local_cwd'" in str(ei.value)
    with TorchXHook("bad").get_conn() as runner:
        assert runner.list("local_cwd") == []  # nothing was submitted


# -- the operator, sensor and trigger use the connection ---------------------------------------


def test_the_operator_takes_scheduler_and_cfg_from_the_connection(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster, app: AppDef
) -> None:
    _define(
        monkeypatch, "torchx_default", {"scheduler": "fake", "cfg": {"queue": "q1", "priority": 1}}
    )
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    op = TorchXOperator(
        task_id="task",
        app=app,
        runner_factory=cluster.factory,
        cfg={"priority": 7},
        poll_interval=0.001,
        stream_logs=False,
    )
    assert op.execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    (handle,) = cluster.handles
    assert handle.startswith("fake://")  # the connection's scheduler
    assert cluster.job(handle).request.cfg == {
        "queue": "q1",
        "priority": 7,
        "tags": None,
        "api_token": None,
    }


def test_an_explicit_scheduler_overrides_the_connection(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster, app: AppDef
) -> None:
    _define(monkeypatch, "cluster_a", {"scheduler": "slurm"})
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    op = TorchXOperator(
        task_id="task",
        app=app,
        runner_factory=cluster.factory,
        scheduler="fake",
        torchx_conn_id="cluster_a",
        poll_interval=0.001,
        stream_logs=False,
    )
    assert op.execute(make_context(FakeStore()))["app_handle"].startswith("fake://")


def test_a_missing_named_connection_fails_before_submitting(cluster: Cluster, app: AppDef) -> None:
    op = TorchXOperator(
        task_id="task", app=app, runner_factory=cluster.factory, torchx_conn_id="no_such_conn"
    )
    with pytest.raises(AirflowFailException, match="no connection 'no_such_conn'") as ei:
        op.execute(make_context(FakeStore()))
    assert isinstance(ei.value.__cause__, InvalidConnectionError)  # permanent: not retried
    assert cluster.handles == []


def test_without_a_connection_the_default_scheduler_is_local_cwd(app: AppDef) -> None:
    op = TorchXOperator(task_id="task", app=app)
    op._start_try(make_context())
    assert op._scheduler == "local_cwd" and op._cfg == {}


def test_the_trigger_carries_the_connection_id_never_its_secrets(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster, app: AppDef
) -> None:
    _define(monkeypatch, "team", {"scheduler": "fake"}, {"TOKEN": SECRET})
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    op = TorchXOperator(
        task_id="task",
        app=app,
        runner_factory=cluster.factory,
        torchx_conn_id="team",
        deferrable=True,
        poll_interval=0.001,
    )
    ctx = make_context(FakeStore())
    with pytest.raises(TaskDeferred) as ei:
        op.execute(ctx)
    _, kwargs = ei.value.trigger.serialize()
    assert kwargs["torchx_conn_id"] == "team"
    assert SECRET not in json.dumps(kwargs) and SECRET not in json.dumps(ctx["ti"].xcoms)
    sensor = TorchXSensor(
        task_id="s",
        app_handle=cluster.handles[0],
        torchx_conn_id="team",
        deferrable=True,
        runner_factory=cluster.factory,
    )
    with pytest.raises(TaskDeferred) as ei:
        sensor.execute(make_context())
    assert ei.value.trigger.serialize()[1]["torchx_conn_id"] == "team"


def test_bad_conn_id_arguments(app: AppDef) -> None:
    from torchx_airflow.errors import InvalidTaskArgumentError

    with pytest.raises(InvalidTaskArgumentError, match="torchx_conn_id"):
        TorchXOperator(task_id="t", app=app, torchx_conn_id="")
    with pytest.raises(InvalidTaskArgumentError, match="torchx_conn_id"):
        TorchXSensor(task_id="s", app_handle="x://y/z", torchx_conn_id=3)
