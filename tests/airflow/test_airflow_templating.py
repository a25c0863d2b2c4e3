"""Jinja templating of the operator's fields (Airflow's own renderer, no DAG run), and the link."""

from __future__ import annotations

from typing import Any

from support.airflow_fakes import Cluster, FakeStore, make_context

from torchx_airflow import TorchXAppLink, TorchXOperator
from torchx_core.specs import AppDef, AppState, Role

CTX = {"ds": "2024-06-01", "run_id": "manual__x"}


def _app() -> AppDef:
    return AppDef(
        name="train-{{ ds }}",
        roles=[
            Role(
                name="trainer",
                image="img:{{ ds }}",
                entrypoint="/bin/{{ ds }}",
                args=["--run", "{{ run_id }}"],
                env={"DAY": "{{ ds }}"},
                metadata={"m": "{{ ds }}"},
            )
        ],
        metadata={"owner": "{{ run_id }}"},
    )


def test_appdef_fields_cfg_workspace_and_scheduler_are_rendered() -> None:
    op = TorchXOperator(
        task_id="t",
        app=_app(),
        scheduler="{{ 'local_cwd' }}",
        cfg={"log_dir": "/logs/{{ ds }}", "n": 3},
        workspace="/ws/{{ ds }}",
    )
    op.render_template_fields(CTX)
    assert op.app is not None
    role = op.app.roles[0]
    assert op.app.name == "train-2024-06-01"
    assert op.app.metadata == {"owner": "manual__x"}
    assert role.image == "img:2024-06-01" and role.entrypoint == "/bin/2024-06-01"
    assert role.args == ["--run", "manual__x"]
    assert role.env == {"DAY": "2024-06-01"} and role.metadata == {"m": "2024-06-01"}
    assert op.cfg == {"log_dir": "/logs/2024-06-01", "n": 3}
    assert op.workspace == "/ws/2024-06-01" and op.scheduler == "local_cwd"


def test_component_args_are_rendered_as_list_or_dict() -> None:
    as_list = TorchXOperator(task_id="a", component="utils.echo", component_args=["{{ ds }}"])
    as_dict = TorchXOperator(task_id="b", component="utils.echo", component_args={"m": "{{ ds }}"})
    as_list.render_template_fields(CTX)
    as_dict.render_template_fields(CTX)
    assert as_list.component_args == ["2024-06-01"]
    assert as_dict.component_args == {"m": "2024-06-01"}


def test_rendering_never_touches_a_shared_appdef() -> None:
    """Airflow renders nested objects in place: each operator renders its own copy."""
    shared = AppDef(name="x", roles=[Role("r", "img", args=["{{ task.task_id }}"])])
    a = TorchXOperator(task_id="a", app=shared)
    b = TorchXOperator(task_id="b", app=shared)
    a.render_template_fields({"task": a})
    b.render_template_fields({"task": b})
    assert a.app is not None and b.app is not None
    assert a.app.roles[0].args == ["a"] and b.app.roles[0].args == ["b"]
    assert shared.roles[0].args == ["{{ task.task_id }}"]


def test_the_link_points_at_the_apps_ui(cluster: Cluster) -> None:
    cluster.ui_url = "http://dashboard/app"
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    op = TorchXOperator(
        task_id="t",
        app=_app(),
        scheduler="fake",
        runner_factory=cluster.factory,
        poll_interval=0.001,
        stream_logs=False,
    )
    link = TorchXAppLink()
    key: Any = None
    assert link.get_link(op, ti_key=key) == ""  # nothing submitted yet
    ctx = make_context(FakeStore())
    op.execute(ctx)
    assert link.get_link(op, ti_key=key) == "http://dashboard/app"
    assert ctx["ti"].xcoms[link.xcom_key] == "http://dashboard/app"


def test_the_link_points_at_the_dashboard_when_one_is_configured(
    cluster: Cluster, monkeypatch: Any
) -> None:
    from urllib.parse import quote

    import pytest

    from torchx_airflow.hook import ConnectionSettings
    from torchx_airflow.links import app_link

    cluster.ui_url = "http://scheduler-ui/app"
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    monkeypatch.setenv("TORCHX_DASHBOARD_URL", "http://dash:8288/")
    op = TorchXOperator(
        task_id="t",
        app=_app(),
        scheduler="fake",
        runner_factory=cluster.factory,
        poll_interval=0.001,
        stream_logs=False,
    )
    ctx = make_context(FakeStore())
    op.execute(ctx)
    link = TorchXAppLink()
    (handle,) = cluster.handles
    expected = f"http://dash:8288/app?handle={quote(handle, safe='')}"
    assert link.get_link(op, ti_key=None) == expected
    assert ctx["ti"].xcoms[link.xcom_key] == expected
    assert ctx["ti"].xcoms["ui_url"] == "http://scheduler-ui/app"  # the scheduler's own UI stays
    # the connection's field wins over the environment; a malformed environment is ignored
    assert (
        app_link(handle, "u", "http://conn-dash")
        == f"http://conn-dash/app?handle={quote(handle, safe='')}"
    )
    monkeypatch.setenv("TORCHX_DASHBOARD_URL", "ftp://nope")
    assert app_link(handle, "http://scheduler-ui/app", None) == "http://scheduler-ui/app"
    with pytest.raises(Exception, match="dashboard_url: the dashboard URL 'dash:8288' is not"):
        ConnectionSettings.parse("c", {"dashboard_url": "dash:8288"}, None)
    assert (
        ConnectionSettings.parse("c", {"dashboard_url": "http://d:1"}, None).dashboard_url
        == "http://d:1"
    )
