"""The launcher step's KFP glue (identity, owner, signals, outputs, cfg, resources) over the
shared fake scheduler under a real Runner; the lifecycle's own decisions are tested once in
tests/runner/test_lifecycle.py."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kfp_helpers import wait_until
from support.fake_scheduler import JobTable, make_runner

from torchx_core import specs
from torchx_core.runner import AppCancelledError, AppFailedError, AppVanishedError
from torchx_core.specs import AppState
from torchx_kfp.errors import InvalidKfpOptionsError
from torchx_kfp.runtime import (
    build_app,
    cancel_job_apps,
    parse_cfg_json,
    resource_from_task_config,
    run_launcher,
    step_owner,
)

pytestmark = pytest.mark.kfp


def _app(num_replicas: int = 1, name: str = "train") -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                "trainer",
                image="img",
                entrypoint="python",
                num_replicas=num_replicas,
                resource=specs.Resource(cpu=1, gpu=0, memMB=256),
            )
        ],
    )


def _launch(
    table: JobTable, app: specs.AppDef | None = None, sink: list[str] | None = None, **kwargs: Any
) -> Any:
    kwargs.setdefault("wait_interval", 0.01)
    if "component" not in kwargs:
        kwargs["app_json"] = json.dumps((app or _app()).to_dict())
    return run_launcher(
        scheduler="fake",
        runner_factory=lambda: make_runner(table),
        log_sink=(sink.append if sink is not None else (lambda line: None)),
        **kwargs,
    )


def test_success_returns_the_outputs_and_streams_every_replica() -> None:
    table = JobTable()
    table.steps = 3
    sink: list[str] = []
    result = _launch(table, _app(num_replicas=2), sink, job_id="job-1", task_name="step-a")
    (app_id,) = table.jobs
    assert result.app_handle == f"fake://test/{app_id}"
    assert re.fullmatch(r"train-[0-9a-f]{10}-\d+", app_id)
    assert (result.state, result.ui_url, result.reattached) == ("SUCCEEDED", "", False)
    assert json.loads(result.status_json)["state"] == "SUCCEEDED"
    assert sorted(sink) == [f"[trainer/{k}] trainer {k} line {i}" for k in (0, 1) for i in range(3)]
    assert table.job(app_id).owner == step_owner("job-1", "step-a")
    assert table.closed >= 1  # the step's Runner was closed


@pytest.mark.parametrize(
    "final, error", [(AppState.FAILED, AppFailedError), (AppState.CANCELLED, AppCancelledError)]
)
def test_failed_or_cancelled_app_fails_the_step(final: AppState, error: type) -> None:
    table = JobTable()
    table.final = final
    with pytest.raises(error) as info:
        _launch(table)
    (app_id,) = table.jobs
    assert type(info.value) is error
    assert info.value.app_handle == f"fake://test/{app_id}"
    assert f"ended {final.name}" in str(info.value)
    # the step's names are the lifecycle's, re-exported where users import them
    import torchx_kfp

    assert (torchx_kfp.AppFailedError, torchx_kfp.AppVanishedError) == (
        AppFailedError,
        AppVanishedError,
    )


def _running_app(table: JobTable, **ids: str) -> tuple[str, threading.Thread, list[Any]]:
    """Starts a step in a thread over an app held RUNNING; returns its app id once submitted."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(_launch(table, **ids)))
    thread.start()
    wait_until(lambda: len(table.jobs) == 1, 30, "the step to submit its app")
    (app_id,) = table.jobs
    return app_id, thread, results


def test_a_retried_step_reattaches_and_a_sibling_iteration_does_not() -> None:
    table = JobTable()
    table.hold = True
    ids = {"job_id": "job-1", "task_name": "step-a", "task_id": "iteration-1"}
    app_id, first, _ = _running_app(table, **ids)
    retry_results: list[Any] = []
    retry = threading.Thread(target=lambda: retry_results.append(_launch(table, **ids)))
    retry.start()
    # the retry adopted the running app: it recorded its owner (same pid here, so the same
    # token) and submitted nothing; a sibling iteration (another task id) gets its own app
    sibling = threading.Thread(target=lambda: _launch(table, **{**ids, "task_id": "iteration-2"}))
    sibling.start()
    wait_until(lambda: len(table.jobs) == 2, 30, "the sibling iteration to submit its app")
    table.hold = False
    for app in list(table.jobs):
        table.set_state(app, AppState.SUCCEEDED)
    for t in (first, retry, sibling):
        t.join(30)
    (result,) = retry_results
    assert result.app_handle == f"fake://test/{app_id}"
    assert result.reattached is True
    assert len(table.jobs) == 2


def test_a_succeeded_step_is_reused_and_a_standalone_call_always_submits() -> None:
    table = JobTable()
    first = _launch(table, job_id="job-1", task_name="step-a")
    again = _launch(table, job_id="job-1", task_name="step-a")
    assert (again.app_handle, again.reattached) == (first.app_handle, True)
    _launch(table)
    _launch(table)  # no job id: not in a pipeline, nothing to reattach to
    assert len(table.jobs) == 3


def test_int_run_options_reach_the_scheduler_as_ints() -> None:
    table = JobTable()
    _launch(table, cfg_json=json.dumps({"priority": 5, "tags": ["a", "b"]}))
    (job,) = table.jobs.values()
    assert job.request.cfg["priority"] == 5
    assert type(job.request.cfg["priority"]) is int
    assert job.request.cfg["tags"] == ["a", "b"]


def _terminate_on_first_log_line(table: JobTable) -> Callable[[str], None]:
    sent = threading.Event()

    def sink(line: str) -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGTERM)

    return sink


def test_sigterm_cancels_the_owned_app_and_exits_143() -> None:
    table = JobTable()
    table.hold = True
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        run_launcher(
            app_json=json.dumps(_app().to_dict()),
            scheduler="fake",
            job_id="j",
            task_name="t",
            wait_interval=0.01,
            runner_factory=lambda: make_runner(table),
            log_sink=_terminate_on_first_log_line(table),
        )
    assert info.value.code == 128 + signal.SIGTERM
    (job,) = table.jobs.values()
    assert (job.state, job.cancelled) == (AppState.CANCELLED, 1)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_leaves_an_app_another_attempt_adopted() -> None:
    """The app's recorded owner changed (a newer attempt adopted it): no cancel."""
    table = JobTable()
    table.hold = True
    sink = _terminate_on_first_log_line(table)

    def adopted_then_signalled(line: str) -> None:
        (job,) = table.jobs.values()
        job.owner = "kfp:j/t/@other-pod/1"
        sink(line)

    with pytest.raises(SystemExit):
        run_launcher(
            app_json=json.dumps(_app().to_dict()),
            scheduler="fake",
            job_id="j",
            task_name="t",
            wait_interval=0.01,
            runner_factory=lambda: make_runner(table),
            log_sink=adopted_then_signalled,
        )
    (job,) = table.jobs.values()
    assert (job.state, job.cancelled) == (AppState.SUBMITTED, 0)  # held, never cancelled


def test_a_second_sigterm_during_the_cancel_is_ignored() -> None:
    table = JobTable()
    table.hold = True
    table.cancel_gate = threading.Event()
    seen: list[Any] = []

    def insist_while_cancelling() -> None:
        # the engine signals again while the cancel hangs; it must not interrupt it
        wait_until(lambda: bool(table.jobs), 30, "the step to submit its app")
        while not any(j.cancelled for j in table.jobs.values()) and not table.cancel_gate.is_set():
            if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
                seen.append(signal.SIG_IGN)
                os.kill(os.getpid(), signal.SIGTERM)
                table.cancel_gate.set()
                return
            table.cancel_gate.wait(0.01)

    helper = threading.Thread(target=insist_while_cancelling)
    helper.start()
    with pytest.raises(SystemExit) as info:
        run_launcher(
            app_json=json.dumps(_app().to_dict()),
            scheduler="fake",
            job_id="j",
            task_name="t",
            wait_interval=0.01,
            runner_factory=lambda: make_runner(table),
            log_sink=_terminate_on_first_log_line(table),
        )
    helper.join(30)
    assert info.value.code == 143
    assert seen == [signal.SIG_IGN]
    (job,) = table.jobs.values()
    assert (job.state, job.cancelled) == (AppState.CANCELLED, 1)


def test_resource_from_task_config() -> None:
    base = specs.Resource(cpu=1, gpu=0, memMB=512, capabilities={"x": 1})
    res = resource_from_task_config(
        {"requests": {"cpu": "500m", "memory": "1G"}, "limits": {"nvidia.com/gpu": "2"}}, base
    )
    assert (res.cpu, res.gpu, res.memMB) == (1, 2, 954)
    assert res.capabilities == {"x": 1, "accelerator_type": "nvidia.com/gpu"}
    assert resource_from_task_config(None, base) is base
    limits_win = resource_from_task_config(
        {"requests": {"cpu": "1"}, "limits": {"cpu": "3", "memory": "4Gi"}}, base
    )
    assert (limits_win.cpu, limits_win.memMB) == (3, 4096)
    with pytest.raises(InvalidKfpOptionsError, match="not a Kubernetes quantity"):
        resource_from_task_config({"limits": {"memory": "lots"}}, base)


def test_env_and_passed_resources_reach_every_role() -> None:
    table = JobTable()
    _launch(
        table,
        _app(num_replicas=2),
        env={"UPSTREAM": "fake://x/y"},
        resources={"limits": {"cpu": "4", "memory": "2Gi"}},
    )
    (job,) = table.jobs.values()
    (role,) = job.app.roles
    assert (role.resource.cpu, role.resource.memMB) == (4, 2048)
    # TORCHX_JOB_ID: the runner gives every app its handle (the scheduler fills in ${app_id})
    assert role.env == {"UPSTREAM": "fake://x/y", "TORCHX_JOB_ID": "fake://test/${app_id}"}


def test_a_component_step_is_named_from_the_component() -> None:
    table = JobTable()
    result = _launch(
        table, component="utils.echo", component_args=["--msg", "hi"], job_id="j", task_name="t"
    )
    (job,) = table.jobs.values()
    assert job.request.roles[0][3] == ["hi"]
    assert re.fullmatch(r"echo-[0-9a-f]{10}", job.app.name)
    again = _launch(
        table, component="utils.echo", component_args=["--msg", "hi"], job_id="j", task_name="t"
    )
    assert again.app_handle == result.app_handle  # the same step: reused, not resubmitted
    other = _launch(
        table, component="utils.echo", component_args=["--msg", "hi"], job_id="j", task_name="t2"
    )
    assert other.app_handle != result.app_handle


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "exactly one of app_json"),
        ({"app_json": "{}", "component": "utils.echo"}, "exactly one of app_json"),
        ({"app_json": "{not json"}, "not valid JSON"),
        ({"app_json": "[1]"}, "JSON object"),
    ],
)
def test_build_app_validates(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidKfpOptionsError, match=message):
        build_app(**kwargs)


def test_parse_cfg_json() -> None:
    assert parse_cfg_json("") == {}
    assert parse_cfg_json('{"priority": 5}') == {"priority": 5}
    with pytest.raises(InvalidKfpOptionsError, match="is not JSON"):
        parse_cfg_json("priority=5")
    with pytest.raises(InvalidKfpOptionsError, match="must hold a JSON object"):
        parse_cfg_json("[5]")


def test_cancel_job_apps_cancels_only_this_jobs_unfinished_apps() -> None:
    table = JobTable()
    table.hold = True
    runner = make_runner(table)
    handles = {}
    for label, owner in [
        ("mine", step_owner("job-1", "t1")),
        ("done", step_owner("job-1", "t2")),
        ("other-job", step_owner("job-2", "t1")),
        ("unowned", None),
        ("prefix-only", step_owner("job-10", "t1")),
    ]:
        handle = runner.run(_app(name=label), "fake")
        if owner:
            runner.set_owner(handle, owner)
        handles[label] = handle
    table.set_state(handles["done"].rsplit("/", 1)[1], AppState.SUCCEEDED)
    cancelled = cancel_job_apps(
        job_id="job-1", scheduler="fake", runner_factory=lambda: make_runner(table)
    )
    assert cancelled == [handles["mine"]]
    assert {h: table.job(h.rsplit("/", 1)[1]).cancelled for h in handles.values()} == {
        h: int(label == "mine") for label, h in handles.items()
    }
    with pytest.raises(InvalidKfpOptionsError, match="job_id is empty"):
        cancel_job_apps(job_id="", runner_factory=lambda: make_runner(table))


def test_ui_url_links_the_dashboard_when_one_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import quote

    from torchx_kfp.launcher import launch

    table = JobTable()
    result = _launch(table, job_id="job-1", task_name="step-a", dashboard_url="http://dash:8288")
    assert result.ui_url == f"http://dash:8288/app?handle={quote(result.app_handle, safe='')}"
    monkeypatch.setenv("TORCHX_DASHBOARD_URL", "http://env-dash")
    from_env = _launch(table, job_id="job-2", task_name="step-a")
    assert from_env.ui_url.startswith("http://env-dash/app?handle=")
    monkeypatch.setenv("TORCHX_DASHBOARD_URL", "not a url")  # ignored, never fails the step
    assert _launch(table, job_id="job-3", task_name="step-a").ui_url == ""
    with pytest.raises(InvalidKfpOptionsError, match="dashboard URL 'ml-host:8288' is not"):
        launch(_app(), dashboard_url="ml-host:8288")
