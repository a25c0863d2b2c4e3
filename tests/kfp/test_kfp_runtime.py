"""The launcher step's run-time logic against a small stateful fake Runner."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from torchx_core import specs
from torchx_core.schedulers.api import ListAppResponse
from torchx_core.specs import AppState, AppStatus
from torchx_kfp.errors import AppFailedError, AppVanishedError, InvalidKfpOptionsError
from torchx_kfp.runtime import (
    Launcher,
    app_name_for_step,
    belongs_to_job,
    build_app,
    cancel_job_apps,
    resource_from_task_config,
    run_launcher,
    step_app_name,
)

pytestmark = pytest.mark.kfp


class FakeRunner:
    """Holds a table of apps; each app walks through a scripted list of states."""

    def __init__(self, script: list[AppState | None] | None = None) -> None:
        self.script = list(script or [AppState.RUNNING, AppState.SUCCEEDED])
        self.apps: dict[str, dict[str, Any]] = {}
        self.submitted: list[specs.AppDef] = []
        self.cancelled: list[str] = []
        self.closed = 0
        self.logs: dict[tuple[str, int], list[str]] = {}
        self.on_status: Any = None

    # -- helpers for tests
    def add_existing(self, name: str, state: AppState) -> str:
        handle = f"fake://kfp/{name}-old{len(self.apps)}"
        self.apps[handle] = {"name": name, "states": [state]}
        return handle

    # -- Runner API
    def run(self, app: specs.AppDef, scheduler: str, cfg: Any = None) -> str:
        handle = f"{scheduler}://kfp/{app.name}-{len(self.apps)}"
        self.apps[handle] = {"name": app.name, "states": list(self.script)}
        self.submitted.append(app)
        return handle

    def status(self, handle: str) -> AppStatus | None:
        if self.on_status is not None:
            self.on_status(handle)
        app = self.apps.get(handle)
        if app is None:
            return None
        states = app["states"]
        state = states.pop(0) if len(states) > 1 else states[0]
        if state is None:
            return None
        return AppStatus(state=state, structured_error_msg='{"message": "boom"}', ui_url="u://x")

    def list(self, scheduler: str, cfg: Any = None) -> list[ListAppResponse]:
        return [
            ListAppResponse(app_id=h.rsplit("/", 1)[1], state=a["states"][0], app_handle=h,
                            name=a["name"])
            for h, a in self.apps.items()
        ]

    def cancel(self, handle: str) -> None:
        self.cancelled.append(handle)
        if handle in self.apps:
            self.apps[handle]["states"] = [AppState.CANCELLED]

    def log_lines(self, handle: str, role: str, k: int = 0, **kwargs: Any) -> Iterator[str]:
        assert kwargs.get("should_tail") is True
        yield from self.logs.get((role, k), [])

    def materialize_component(self, name: str, args: list[str]) -> specs.AppDef:
        return specs.AppDef(
            name=name.replace(".", "_"),
            roles=[specs.Role("echo", image="img", entrypoint="echo", args=list(args))],
        )

    def close(self) -> None:
        self.closed += 1


def _app(num_replicas: int = 1) -> specs.AppDef:
    return specs.AppDef(
        name="train",
        roles=[
            specs.Role("trainer", image="img", entrypoint="python", num_replicas=num_replicas,
                       resource=specs.Resource(cpu=1, gpu=0, memMB=256))
        ],
    )


def _launcher(fake: FakeRunner, sink: list[str] | None = None, **kwargs: Any) -> Launcher:
    kwargs.setdefault("wait_interval", 0)
    return Launcher(
        runner_factory=lambda: fake,
        log_sink=(sink.append if sink is not None else (lambda line: None)),
        **kwargs,
    )


def test_success_returns_outputs_and_streams_logs() -> None:
    fake = FakeRunner([AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED])
    fake.logs = {("trainer", 0): ["hello\n", "done\n"], ("trainer", 1): ["other\n"]}
    sink: list[str] = []
    result = _launcher(fake, sink).run(_app(num_replicas=2), job_id="job-1", task_name="step-a")
    assert result.state == "SUCCEEDED"
    assert result.app_handle.startswith("local_cwd://kfp/train-step-a-")
    assert result.ui_url == "u://x"
    assert json.loads(result.status_json)["state"] == "SUCCEEDED"
    assert result.reattached is False
    assert sorted(sink) == ["[trainer/0] done", "[trainer/0] hello", "[trainer/1] other"]
    assert fake.closed == 1
    assert fake.cancelled == []


@pytest.mark.parametrize("final", [AppState.FAILED, AppState.CANCELLED])
def test_failed_or_cancelled_app_fails_the_step(final: AppState) -> None:
    fake = FakeRunner([AppState.RUNNING, final])
    with pytest.raises(AppFailedError, match=f"ended {final.name}.*boom") as info:
        _launcher(fake).run(_app())
    assert info.value.status is not None and info.value.status.state == final
    assert info.value.app_handle in fake.apps


def test_vanished_app_is_a_retryable_failure() -> None:
    fake = FakeRunner([AppState.RUNNING, None])
    with pytest.raises(AppVanishedError, match="no longer knows"):
        _launcher(fake).run(_app())


def test_unknown_within_grace_keeps_polling() -> None:
    fake = FakeRunner([AppState.UNKNOWN, AppState.UNKNOWN, AppState.RUNNING, AppState.SUCCEEDED])
    result = _launcher(fake, unknown_state_timeout=3600).run(_app())
    assert result.state == "SUCCEEDED"


def test_unknown_past_grace_fails_and_cancels() -> None:
    fake = FakeRunner([AppState.UNKNOWN])
    with pytest.raises(AppFailedError, match="stayed UNKNOWN"):
        _launcher(fake, unknown_state_timeout=0, cancel_timeout=1).run(_app())
    assert len(fake.cancelled) == 1


def test_same_job_and_task_give_same_name_and_reattach() -> None:
    fake = FakeRunner([AppState.RUNNING, AppState.SUCCEEDED])
    name = step_app_name(_app(), "job-1", "step-a")
    running = fake.add_existing(name, AppState.RUNNING)
    fake.apps[running]["states"] = [AppState.RUNNING, AppState.SUCCEEDED]
    result = _launcher(fake).run(_app(), job_id="job-1", task_name="step-a")
    assert result.app_handle == running
    assert result.reattached is True
    assert fake.submitted == []


def test_succeeded_app_is_reused_but_failed_one_is_resubmitted() -> None:
    fake = FakeRunner([AppState.SUCCEEDED])
    name = step_app_name(_app(), "job-1", "step-a")
    done = fake.add_existing(name, AppState.SUCCEEDED)
    assert _launcher(fake).run(_app(), job_id="job-1", task_name="step-a").app_handle == done

    fake = FakeRunner([AppState.SUCCEEDED])
    fake.add_existing(name, AppState.FAILED)
    result = _launcher(fake).run(_app(), job_id="job-1", task_name="step-a")
    assert result.reattached is False
    assert [a.name for a in fake.submitted] == [name]


def test_other_tasks_apps_are_not_reattached() -> None:
    fake = FakeRunner([AppState.SUCCEEDED])
    fake.add_existing(step_app_name(_app(), "job-1", "step-b"), AppState.RUNNING)
    fake.add_existing(step_app_name(_app(), "job-2", "step-a"), AppState.RUNNING)
    other_app = _app()
    other_app.roles[0].args = ["--lr", "0.1"]  # another ParallelFor iteration of the same task
    fake.add_existing(step_app_name(other_app, "job-1", "step-a"), AppState.RUNNING)
    result = _launcher(fake).run(_app(), job_id="job-1", task_name="step-a")
    assert result.reattached is False
    assert len(fake.submitted) == 1


def test_sigterm_cancels_the_app_and_exits_143() -> None:
    fake = FakeRunner([AppState.RUNNING])
    sent = threading.Event()

    def signal_once(handle: str) -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGTERM)

    fake.on_status = signal_once
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        _launcher(fake, wait_interval=0.01, cancel_timeout=1).run(_app())
    assert info.value.code == 143
    assert len(fake.cancelled) == 1
    assert signal.getsignal(signal.SIGTERM) is before
    assert fake.closed == 1


def test_a_second_sigterm_during_cancel_is_ignored() -> None:
    fake = FakeRunner([AppState.RUNNING])
    sent = threading.Event()
    real_cancel = fake.cancel

    def signal_once(handle: str) -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGTERM)

    def cancel_then_signal_again(handle: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the engine insists while we cancel
        real_cancel(handle)

    fake.on_status = signal_once
    fake.cancel = cancel_then_signal_again  # type: ignore[method-assign]
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        _launcher(fake, wait_interval=0.01, cancel_timeout=1).run(_app())
    assert info.value.code == 143
    assert len(fake.cancelled) == 1
    (handle,) = fake.apps
    assert fake.apps[handle]["states"] == [AppState.CANCELLED]
    assert signal.getsignal(signal.SIGTERM) is before


def test_app_name_is_deterministic_and_safe() -> None:
    a = app_name_for_step("My_Train", "5f0c-uuid", "torchx-launcher-2")
    assert a == app_name_for_step("My_Train", "5f0c-uuid", "torchx-launcher-2")
    assert a != app_name_for_step("My_Train", "5f0c-uuid", "torchx-launcher-3")
    assert a != app_name_for_step("My_Train", "other-uuid", "torchx-launcher-2")
    assert a.startswith("my-train-torchx-launcher-2-")
    long = app_name_for_step("x" * 200, "j", "t" * 100)
    assert len(long) <= 48 and long[0].isalpha()
    assert app_name_for_step("9lives", "j", "t")[0].isalpha()
    assert app_name_for_step("train", "", "task") == "train"
    assert app_name_for_step("train", "j", "t", spec="a") != app_name_for_step(
        "train", "j", "t", spec="b"
    )


def test_step_app_name_depends_on_what_the_step_launches() -> None:
    first, second = _app(), _app()
    second.roles[0].env = {"ITEM": "b"}
    assert step_app_name(first, "j", "t") == step_app_name(_app(), "j", "t")
    assert step_app_name(first, "j", "t") != step_app_name(second, "j", "t")
    assert belongs_to_job(step_app_name(second, "j", "t"), "j")


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


def test_run_launcher_from_json_applies_passed_resources() -> None:
    fake = FakeRunner([AppState.SUCCEEDED])
    result = run_launcher(
        app_json=json.dumps(_app().to_dict()),
        scheduler="local_cwd",
        resources={"limits": {"cpu": "4", "memory": "2Gi"}},
        wait_interval=0,
        stream_logs=False,
        runner_factory=lambda: fake,
    )
    assert result.state == "SUCCEEDED"
    (submitted,) = fake.submitted
    assert (submitted.roles[0].resource.cpu, submitted.roles[0].resource.memMB) == (4, 2048)


def test_run_launcher_from_component() -> None:
    fake = FakeRunner([AppState.SUCCEEDED])
    run_launcher(
        component="utils.echo",
        component_args=["--msg", "hi"],
        wait_interval=0,
        runner_factory=lambda: fake,
        job_id="j",
        task_name="t",
    )
    (submitted,) = fake.submitted
    assert submitted.roles[0].args == ["--msg", "hi"]
    assert submitted.name == step_app_name(
        replace(submitted, name="utils_echo"), "j", "t"
    )


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


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scheduler": ""}, "scheduler must be a non-empty str"),
        ({"wait_interval": -1}, "wait_interval must be a number >= 0"),
        ({"unknown_state_timeout": "5"}, "unknown_state_timeout must be a number"),
        ({"cfg": ["a"]}, "cfg must be a dict"),
    ],
)
def test_launcher_validates_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidKfpOptionsError, match=message):
        Launcher(**kwargs)


def test_belongs_to_job() -> None:
    name = app_name_for_step("train", "job-1", "torchx-launcher-3")
    assert belongs_to_job(name, "job-1")
    assert not belongs_to_job(name, "job-2")
    assert not belongs_to_job(name, "")
    assert not belongs_to_job("train", "job-1")


def test_cancel_job_apps_cancels_only_this_jobs_unfinished_apps() -> None:
    fake = FakeRunner()
    mine_running = fake.add_existing(app_name_for_step("a", "job-1", "t1"), AppState.RUNNING)
    fake.add_existing(app_name_for_step("b", "job-1", "t2"), AppState.SUCCEEDED)
    fake.add_existing(app_name_for_step("c", "job-2", "t1"), AppState.RUNNING)
    fake.add_existing("unrelated", AppState.RUNNING)
    cancelled = cancel_job_apps(job_id="job-1", runner_factory=lambda: fake)
    assert cancelled == [mine_running]
    assert fake.cancelled == [mine_running]
    assert fake.closed == 1
    with pytest.raises(InvalidKfpOptionsError, match="job_id is empty"):
        cancel_job_apps(job_id="", runner_factory=lambda: fake)
