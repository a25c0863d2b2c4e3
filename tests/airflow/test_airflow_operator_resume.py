"""TorchXOperator: reattaching across the crash windows, kills during submission, failure logs.

Fake Runner, fake task context (no Airflow run).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout
from airflow_fakes import FakeRunner, FakeStore, FakeTI, make_context

from torchx_airflow import TorchXOperator
from torchx_airflow._runtime import STREAM_DRAIN_TIMEOUT_S, deterministic_app_name
from torchx_core.specs import AppDef, AppState
from torchx_core.specs.errors import InvalidRunConfigException

# the name the operator gives the ``app`` fixture for FakeTI's task identity
NAME = deterministic_app_name("train", dag_id="dag", task_id="task", run_id="manual__1")


def _op(runner: FakeRunner, app: AppDef, **kwargs: Any) -> TorchXOperator:
    kwargs.setdefault("poll_interval", 0.001)
    kwargs.setdefault("stream_logs", False)
    return TorchXOperator(task_id="task", app=app, runner_factory=lambda: runner, **kwargs)


def _retry_ti() -> FakeTI:
    ti = FakeTI()
    ti.try_number = 2
    return ti


def test_retry_finds_the_app_submitted_just_before_a_crash(app: AppDef) -> None:
    """The worker died between submitting and storing the handle: the store still holds the
    failed app of the try before, but the running one is found by its deterministic name."""
    r = FakeRunner()
    failed = r.add_app(NAME, [AppState.FAILED])
    running = r.add_app(NAME, [AppState.RUNNING, AppState.SUCCEEDED])
    store = FakeStore()
    store.set("torchx_app_handle", failed)
    result = _op(r, app).execute(make_context(store, _retry_ti()))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert r.count("run") == 0
    assert store.data["torchx_app_handle"] == running


def test_first_try_with_a_store_does_not_list_apps(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    _op(r, app).execute(make_context(FakeStore()))
    assert r.count("list") == 0 and r.count("run") == 1


def test_a_scheduler_without_list_still_submits(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])

    def no_list(scheduler: str) -> list[Any]:
        raise NotImplementedError("list is not supported")

    r.list = no_list  # type: ignore[method-assign]
    assert _op(r, app).execute(make_context(None))["state"] == "SUCCEEDED"
    assert r.count("run") == 1


def test_unreadable_status_at_reattach_waits_instead_of_resubmitting(app: AppDef) -> None:
    r = FakeRunner()
    running = r.add_app(NAME, [AppState.RUNNING, AppState.SUCCEEDED])
    store = FakeStore()
    store.set("torchx_app_handle", running)
    fails = [ConnectionError("scheduler unreachable")] * 2

    def flaky(handle: str) -> None:
        r.status_error = fails.pop() if fails else None

    r.status_hook = flaky
    result = _op(r, app).execute(make_context(store, _retry_ti()))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert r.count("run") == 0


def test_sigterm_during_submission_cancels_the_app_once_submitted(app: AppDef) -> None:
    """SIGTERM runs on_kill while runner.run() is in flight (no handle yet); Airflow then lets
    the submission finish, so the operator cancels the new app right away."""
    r = FakeRunner([AppState.RUNNING])
    op = _op(r, app)
    r.run_hook = lambda handle: op.on_kill()
    store = FakeStore()
    with pytest.raises(AirflowException, match="killed while submitting"):
        op.execute(make_context(store))
    (handle,) = r.apps
    assert ("cancel", handle) in r.calls and r.apps[handle].cancelled
    assert r.count("run") == 1


def test_execution_timeout_during_submission_cancels_by_name(app: AppDef) -> None:
    """execution_timeout raises inside runner.run() (the app exists, its handle never came
    back); Airflow then calls on_kill, which finds the app by its name."""
    r = FakeRunner([AppState.RUNNING])
    other = r.add_app("someone-else", [AppState.RUNNING])
    op = _op(r, app)

    def timeout(handle: str) -> None:
        raise AirflowTaskTimeout("execution_timeout")

    r.run_hook = timeout
    with pytest.raises(AirflowTaskTimeout):
        op.execute(make_context(FakeStore()))
    op.on_kill()
    (mine,) = [h for h in r.apps if h != other]
    assert r.apps[mine].cancelled and not r.apps[other].cancelled


def test_kill_during_submission_respects_cancel_on_kill(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    op = _op(r, app, cancel_on_kill=False)
    r.run_hook = lambda handle: op.on_kill()
    assert op.execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    assert r.count("cancel") == 0


def test_failure_while_streaming_logs_a_tail_and_the_structured_error(
    app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    r = FakeRunner(
        [AppState.RUNNING, AppState.FAILED],
        logs={("r", 0): [f"line {i}\n" for i in range(100)]},
    )
    with pytest.raises(AirflowException, match="FAILED"):
        _op(r, app, stream_logs=True, log_tail_lines=3).execute(make_context(FakeStore()))
    out = capfd.readouterr()
    text = out.out + out.err
    assert "[r/0] line 0" in text  # streamed
    assert "::group::TorchX logs r/0 (last 3 lines)" in text  # plus a bounded tail
    assert "TorchX structured error" in text and '{"message": "exit 3"}' in text


def test_success_while_streaming_prints_no_extra_tail(
    app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    r = FakeRunner([AppState.RUNNING, AppState.SUCCEEDED])
    _op(r, app, stream_logs=True).execute(make_context(FakeStore()))
    out = capfd.readouterr()
    text = out.out + out.err
    assert "[r/0] line 9" in text and "::group::TorchX logs" not in text


class _StreamUntilCancelled(FakeRunner):
    """Followed log streams last until the app is cancelled, like those of a real app; a stream
    still open after ``give_up`` seconds records it and ends."""

    def __init__(self, give_up: float) -> None:
        super().__init__([AppState.RUNNING])
        self.cancelled = threading.Event()
        self.gave_up = False
        self._give_up = give_up

    def log_lines(self, app_handle: str, role_name: str, k: int = 0, *a: Any, **kw: Any) -> Any:
        if kw.get("should_tail"):
            yield "started\n"
            self.gave_up = not self.cancelled.wait(self._give_up)
            return
        yield from super().log_lines(app_handle, role_name, k)

    def cancel(self, app_handle: str) -> None:
        super().cancel(app_handle)
        self.cancelled.set()


def test_execution_timeout_reaches_on_kill_without_draining_the_logs(app: AppDef) -> None:
    """A timeout while waiting must not wait for log streams that only end with the app."""
    r = _StreamUntilCancelled(give_up=min(10, STREAM_DRAIN_TIMEOUT_S / 2))
    op = _op(r, app, stream_logs=True, poll_interval=0.01)

    def timeout_on_third_poll(handle: str) -> None:
        if r.count("status") >= 3:
            raise AirflowTaskTimeout("execution_timeout")

    r.status_hook = timeout_on_third_poll
    with pytest.raises(AirflowTaskTimeout):
        op.execute(make_context(FakeStore()))
    op.on_kill()  # what Airflow does next
    assert r.cancelled.wait(30)
    assert r.gave_up is False  # on_kill came while the stream was still open


def test_unknown_cfg_key_fails_before_submitting(app: AppDef) -> None:
    r = FakeRunner([AppState.SUCCEEDED])
    with pytest.raises(InvalidRunConfigException, match="log_dri.*Did you mean.*log_dir"):
        _op(r, app, cfg={"log_dri": "/tmp/x"}).execute(make_context(FakeStore()))
    assert r.count("run") == 0
    assert _op(r, app, cfg={"log_dir": "/tmp/x"}).execute(make_context(FakeStore()))["state"]


def _old_airflow_operator(stand_in: str) -> type[TorchXOperator]:
    """TorchXOperator as built on Airflow 3.0-3.2 (the stand-in mixin first in the MRO)."""
    if stand_in == "common.compat":
        from airflow.providers.common.compat._resumable_job_mixin import ResumableJobMixin
    else:
        from torchx_airflow._resumable_fallback import ResumableJobMixin  # type: ignore[assignment]

    class OldTorchXOperator(ResumableJobMixin, TorchXOperator):  # type: ignore[misc,valid-type]
        def __init__(self, **kwargs: Any) -> None:  # wrapped by Airflow's operator metaclass
            super().__init__(**kwargs)

    return OldTorchXOperator


@pytest.mark.parametrize("stand_in", ["common.compat", "torchx_airflow"])
def test_older_airflow_retry_reattaches_by_name(app: AppDef, stand_in: str) -> None:
    """Before 3.3 every try calls submit_job (no state store): the retry after a worker crash
    finds the running app by its name instead of submitting it again."""
    cls = _old_airflow_operator(stand_in)
    r = FakeRunner([AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    first = cls(task_id="task", app=app, runner_factory=lambda: r, wait=False)
    handle = first.execute(make_context(None))["app_handle"]  # then the worker dies
    second = cls(task_id="task", app=app, runner_factory=lambda: r, poll_interval=0.001)
    result = second.execute(make_context(None, _retry_ti()))
    assert result["app_handle"] == handle and result["state"] == "SUCCEEDED"
    assert r.count("run") == 1
    # a failed app is resubmitted
    r.apps[handle].states = [AppState.FAILED]
    r.script = [AppState.SUCCEEDED]
    third = cls(task_id="task", app=app, runner_factory=lambda: r, poll_interval=0.001)
    assert third.execute(make_context(None, _retry_ti()))["app_handle"] != handle
    assert r.count("run") == 2
