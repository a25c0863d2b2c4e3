"""TorchXOperator: reattaching across the crash windows, ownership, kills during submission, and
logs (real Runners over the shared fake scheduler, a fake task context; no Airflow run)."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from airflow_versions import HAS_TASK_STATE_STORE
from support.airflow_fakes import Cluster, FakeStore, FakeTI, make_context

from torchx_airflow import TorchXOperator
from torchx_airflow._airflow import AirflowException, AirflowFailException, AirflowTaskTimeout
from torchx_airflow.operator import STREAM_DRAIN_TIMEOUT_S
from torchx_core.runner.lifecycle import app_name
from torchx_core.specs import AppDef, AppState
from torchx_core.specs.errors import InvalidRunConfigException

# the name the operator gives the ``app`` fixture for FakeTI's task identity
NAME = app_name("train", ("dag", "task", "manual__1", -1))
TRY2 = "airflow:dag/task/manual__1/-1#try=2"

#: Below Airflow 3.3 there is no task state store: the fake store is never read or written, and
#: a retry finds its app by the deterministic name instead (the same outcome is asserted).


def _op(cluster: Cluster, app: AppDef, **kwargs: Any) -> TorchXOperator:
    kwargs.setdefault("poll_interval", 0.001)
    kwargs.setdefault("stream_logs", False)
    return TorchXOperator(
        task_id="task", app=app, scheduler="fake", runner_factory=cluster.factory, **kwargs
    )


def _finish_after(cluster: Cluster, reads: int) -> None:
    """Every app of the test SUCCEEDS after ``reads`` more status reads."""
    left = {"n": reads}

    def count() -> None:
        left["n"] -= 1
        if left["n"] <= 0:
            for h in cluster.handles:
                if cluster.state(h) == AppState.RUNNING:
                    cluster.set_state(h, AppState.SUCCEEDED)

    cluster.table.on_describe = count


def test_retry_reattaches_to_the_stored_running_app_and_owns_it(
    cluster: Cluster, app: AppDef
) -> None:
    running = cluster.add(NAME, AppState.RUNNING)
    cluster.job(running).owner = "airflow:dag/task/manual__1/-1#try=1"
    store = FakeStore()
    store.set("torchx_app_handle", running)
    _finish_after(cluster, 4)
    result = _op(cluster, app).execute(make_context(store, FakeTI(try_number=2)))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert cluster.handles == [running]  # nothing submitted
    assert cluster.job(running).owner == TRY2  # the new try adopted it


def test_retry_after_success_returns_without_resubmitting(cluster: Cluster, app: AppDef) -> None:
    done = cluster.add(NAME, AppState.SUCCEEDED)
    store = FakeStore()
    store.set("torchx_app_handle", done)
    ti = FakeTI(try_number=2)
    result = _op(cluster, app).execute(make_context(store, ti))
    assert result["state"] == "SUCCEEDED" and result["app_handle"] == done
    assert cluster.handles == [done] and ti.xcoms["app_handle"] == done


def test_retry_after_failure_resubmits_and_stores_the_new_handle(
    cluster: Cluster, app: AppDef
) -> None:
    failed = cluster.add(NAME, AppState.FAILED)
    store = FakeStore()
    store.set("torchx_app_handle", failed)
    _finish_after(cluster, 2)
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    result = _op(cluster, app).execute(make_context(store, FakeTI(try_number=2)))
    (_, new) = cluster.handles
    assert result["app_handle"] == new and cluster.job(new).app.name == NAME
    if HAS_TASK_STATE_STORE:
        assert store.data["torchx_app_handle"] == new


def test_retry_resubmits_a_vanished_stored_app(cluster: Cluster, app: AppDef) -> None:
    store = FakeStore()
    store.set("torchx_app_handle", "fake://test/gone-1")
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    result = _op(cluster, app).execute(make_context(store, FakeTI(try_number=2)))
    (new,) = cluster.handles
    assert result["app_handle"] == new
    if HAS_TASK_STATE_STORE:
        assert store.data["torchx_app_handle"] == new


def test_retry_finds_the_app_submitted_just_before_a_crash(cluster: Cluster, app: AppDef) -> None:
    """The worker died between submitting and storing the handle: the store still holds the
    failed app of the try before, but the running one is found by its deterministic name."""
    failed = cluster.add(NAME, AppState.FAILED)
    running = cluster.add(NAME, AppState.RUNNING)
    store = FakeStore()
    store.set("torchx_app_handle", failed)
    _finish_after(cluster, 4)
    result = _op(cluster, app).execute(make_context(store, FakeTI(try_number=2)))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert cluster.handles == [failed, running]
    if HAS_TASK_STATE_STORE:
        assert store.data["torchx_app_handle"] == running


def test_a_scheduler_without_list_still_submits(cluster: Cluster, app: AppDef) -> None:
    cluster.table.list_error = NotImplementedError("list is not supported")
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    assert _op(cluster, app).execute(make_context(None))["state"] == "SUCCEEDED"
    assert len(cluster.handles) == 1


def test_unreadable_status_at_reattach_waits_instead_of_resubmitting(
    cluster: Cluster, app: AppDef
) -> None:
    running = cluster.add(NAME, AppState.RUNNING)
    store = FakeStore()
    store.set("torchx_app_handle", running)
    errors = [ConnectionError("scheduler unreachable")] * 2
    reads = {"n": 0}

    def flaky() -> None:
        reads["n"] += 1
        cluster.table._describe_error = errors.pop() if errors else None
        if reads["n"] > 6:
            cluster.set_state(running, AppState.SUCCEEDED)

    cluster.table.on_describe = flaky
    result = _op(cluster, app).execute(make_context(store, FakeTI(try_number=2)))
    assert result["app_handle"] == running and result["state"] == "SUCCEEDED"
    assert cluster.handles == [running] and errors == []


def test_without_state_store_a_retry_finds_the_app_by_name(cluster: Cluster, app: AppDef) -> None:
    """Airflow < 3.3 (no task_state_store): a retry finds the first try's app by its name."""
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    first = _op(cluster, app, wait=False).execute(make_context(None))
    _finish_after(cluster, 3)
    second = _op(cluster, app).execute(make_context(None, FakeTI(try_number=2)))
    assert second["app_handle"] == first["app_handle"] and second["state"] == "SUCCEEDED"
    assert len(cluster.handles) == 1
    assert cluster.job(first["app_handle"]).owner == TRY2


def test_without_state_store_a_failed_app_is_resubmitted(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.FAILED)
    with pytest.raises(AirflowException):
        _op(cluster, app).execute(make_context(None))
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    assert _op(cluster, app).execute(make_context(None))["state"] == "SUCCEEDED"
    assert len(cluster.handles) == 2


# -- kills and ownership -----------------------------------------------------------------------


def test_on_kill_cancels_the_owned_app(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    op = _op(cluster, app, wait=False)
    handle = op.execute(make_context(FakeStore()))["app_handle"]
    op.on_kill()
    assert cluster.state(handle) == AppState.CANCELLED


def test_on_kill_of_a_superseded_try_leaves_the_app_alone(cluster: Cluster, app: AppDef) -> None:
    """Fault 1 on a worker: a newer try adopted the app; the old try's kill must not cancel it."""
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    old = _op(cluster, app, wait=False)
    handle = old.execute(make_context(FakeStore()))["app_handle"]
    _op(cluster, app, wait=False).execute(make_context(None, FakeTI(try_number=2)))
    assert cluster.job(handle).owner == TRY2
    old.on_kill()
    assert cluster.state(handle) == AppState.RUNNING and cluster.job(handle).cancelled == 0


def test_on_kill_respects_cancel_on_kill(cluster: Cluster, app: AppDef) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    op = _op(cluster, app, wait=False, cancel_on_kill=False)
    handle = op.execute(make_context(FakeStore()))["app_handle"]
    op.on_kill()
    assert cluster.job(handle).cancelled == 0


def test_on_kill_before_submission_does_nothing(cluster: Cluster, app: AppDef) -> None:
    _op(cluster, app).on_kill()
    assert cluster.handles == [] and cluster.runners == []


def test_sigterm_during_submission_cancels_the_app_once_submitted(
    cluster: Cluster, app: AppDef
) -> None:
    """SIGTERM runs on_kill while runner.run() is in flight (no handle yet); Airflow then lets
    the submission finish, so the operator cancels the new app right away."""
    op = _op(cluster, app)

    def killed(handle: str) -> None:
        cluster.set_state(handle, AppState.RUNNING)
        op.on_kill()

    cluster.on_run = killed
    with pytest.raises(AirflowException, match="killed while submitting"):
        op.execute(make_context(FakeStore()))
    (handle,) = cluster.handles
    assert cluster.state(handle) == AppState.CANCELLED


def test_execution_timeout_during_submission_cancels_by_name(cluster: Cluster, app: AppDef) -> None:
    """execution_timeout raises inside runner.run() (the app exists, its handle never came
    back); Airflow then calls on_kill, which finds the app by its name."""
    other = cluster.add("someone-else", AppState.RUNNING)
    op = _op(cluster, app)

    def timeout(handle: str) -> None:
        cluster.set_state(handle, AppState.RUNNING)
        raise AirflowTaskTimeout("execution_timeout")

    cluster.on_run = timeout
    with pytest.raises(AirflowTaskTimeout):
        op.execute(make_context(FakeStore()))
    op.on_kill()
    (mine,) = [h for h in cluster.handles if h != other]
    assert cluster.state(mine) == AppState.CANCELLED
    assert cluster.state(other) == AppState.RUNNING


def test_kill_during_submission_respects_cancel_on_kill(cluster: Cluster, app: AppDef) -> None:
    op = _op(cluster, app, cancel_on_kill=False)

    def killed(handle: str) -> None:
        cluster.set_state(handle, AppState.SUCCEEDED)
        op.on_kill()

    cluster.on_run = killed
    assert op.execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    assert cluster.job(cluster.handles[0]).cancelled == 0


# -- logs --------------------------------------------------------------------------------------


def test_failure_while_streaming_logs_the_stream_and_raises_with_error_and_tail(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    def start(handle: str) -> None:
        cluster.set_state(handle, AppState.RUNNING)
        cluster.job(handle).error = '{"message": "exit 3"}'

    cluster.on_run = start
    reads = {"n": 0}

    def fail_later() -> None:
        reads["n"] += 1
        if reads["n"] == 5:
            (h,) = cluster.handles
            cluster.table.append_log(h.rsplit("/", 1)[1], "r", 0, "streamed-line")
        if reads["n"] > 8:
            cluster.set_state(cluster.handles[0], AppState.FAILED)

    cluster.table.on_describe = fail_later
    with pytest.raises(AirflowException, match="ended FAILED") as ei:
        _op(cluster, app, stream_logs=True, log_tail_lines=2).execute(make_context(FakeStore()))
    out = capfd.readouterr().out
    assert "[r/0] r 0 line 0" in out and "[r/0] streamed-line" in out  # streamed while waiting
    message = str(ei.value)
    assert 'error: {"message": "exit 3"}' in message
    assert message.endswith("log tail:\n[r/0] r 0 line 2\n[r/0] streamed-line")


def test_success_while_streaming_prints_no_extra_tail(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    _finish_after(cluster, 6)
    _op(cluster, app, stream_logs=True).execute(make_context(FakeStore()))
    out = capfd.readouterr().out
    assert "[r/0] r 0 line 2" in out and "::group::TorchX logs" not in out


def _streamed(out: str) -> list[str]:
    """The replica lines in the task log, in order (the logger pads them and adds its name)."""
    return re.findall(r"\[r/0\] (.+?)(?:\s{2,}|$)", out, re.MULTILINE)


def test_a_reattached_try_gives_its_own_log_every_line_once(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each try has its own log: a try that adopts a running app gives it every line."""
    running = cluster.add(NAME, AppState.RUNNING)
    store = FakeStore()
    store.set("torchx_app_handle", running)
    _finish_after(cluster, 6)
    _op(cluster, app, stream_logs=True).execute(make_context(store, FakeTI(try_number=2)))
    assert _streamed(capfd.readouterr().out) == ["r 0 line 0", "r 0 line 1", "r 0 line 2"]


@pytest.mark.parametrize("deferrable", [False, True])
def test_an_app_that_ended_before_the_first_read_gives_every_line_once(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    """Issue 22 item 1: an app done within the first status read (deferrable or not) still
    puts every line into the task log, once, and no tail after it."""

    def burst(handle: str) -> None:
        cluster.table.append_log(
            handle.rsplit("/", 1)[1], "r", 0, *(f"n{i:03d}" for i in range(100))
        )
        cluster.set_state(handle, AppState.SUCCEEDED)

    cluster.on_run = burst
    op = _op(cluster, app, stream_logs=True, deferrable=deferrable)
    assert op.execute(make_context(FakeStore()))["state"] == "SUCCEEDED"
    out = capfd.readouterr().out
    expected = [f"r 0 line {i}" for i in range(3)] + [f"n{i:03d}" for i in range(100)]
    assert _streamed(out) == expected
    assert "::group::TorchX logs" not in out


def test_a_reused_app_gives_its_lines_to_the_new_try(
    cluster: Cluster, app: AppDef, capfd: pytest.CaptureFixture[str]
) -> None:
    done = cluster.add(NAME, AppState.SUCCEEDED)
    store = FakeStore()
    store.set("torchx_app_handle", done)
    result = _op(cluster, app, stream_logs=True).execute(make_context(store, FakeTI(try_number=2)))
    assert result["app_handle"] == done
    assert _streamed(capfd.readouterr().out) == ["r 0 line 0", "r 0 line 1", "r 0 line 2"]


def test_execution_timeout_reaches_on_kill_without_draining_the_logs(
    cluster: Cluster, app: AppDef
) -> None:
    """A timeout while waiting must not wait for log streams that only end with the app."""
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    op = _op(cluster, app, stream_logs=True, poll_interval=0.01)
    reads = {"n": 0}

    def timeout_on_third_poll() -> None:  # raised in the task's thread, like Airflow's alarm
        if threading.current_thread() is t:
            reads["n"] += 1
            if reads["n"] == 3:
                raise AirflowTaskTimeout("execution_timeout")

    cluster.table.on_describe = timeout_on_third_poll
    returned = threading.Event()

    def run() -> None:
        with pytest.raises(AirflowTaskTimeout):
            op.execute(make_context(FakeStore()))
        returned.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    # execute returns while the app (and so its followed logs) still run: no drain wait
    assert returned.wait(STREAM_DRAIN_TIMEOUT_S / 2)
    (handle,) = cluster.handles
    assert cluster.state(handle) == AppState.RUNNING
    cluster.table.on_describe = None
    op.on_kill()  # what Airflow does next
    assert cluster.state(handle) == AppState.CANCELLED


def test_a_configuration_error_reads_as_sentences(cluster: Cluster, app: AppDef) -> None:
    """Issue 35 item 10: the wrapped error ends with a full stop ("...entry point group.") and
    the task's message read "group.. Came from"."""
    from torchx_core.specs.errors import UnknownSchedulerException

    op = TorchXOperator(
        task_id="task", app=app, scheduler="no_such_scheduler", runner_factory=cluster.factory
    )
    with pytest.raises(AirflowFailException) as ei:
        op.execute(make_context(FakeStore()))
    assert isinstance(ei.value.__cause__, UnknownSchedulerException)
    message = str(ei.value)
    assert str(ei.value.__cause__).endswith(".") and ". Came from settings" in message
    assert re.search(r"(?<!\.)\.\.(?!\.)", message) is None, message


def test_unknown_cfg_key_fails_before_submitting(cluster: Cluster, app: AppDef) -> None:
    with pytest.raises(AirflowFailException, match=r"queu.*Did you mean.*queue") as ei:
        _op(cluster, app, cfg={"queu": "x"}).execute(make_context(FakeStore()))
    assert isinstance(ei.value.__cause__, InvalidRunConfigException)  # not retried
    assert "the task (scheduler 'fake', cfg ['queu'])" in str(ei.value)
    assert cluster.handles == []
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    assert _op(cluster, app, cfg={"queue": "x"}).execute(make_context(FakeStore()))["state"] == (
        "SUCCEEDED"
    )
    assert cluster.job(cluster.handles[0]).request.cfg["queue"] == "x"


def _old_airflow_operator(stand_in: str) -> type[TorchXOperator]:
    """TorchXOperator as built on Airflow 3.0-3.2 (the stand-in mixin first in the MRO)."""
    if stand_in == "common.compat":
        # the provider ships it from common-compat 1.23 (older Airflow 3.0 installs lack it)
        mixin = pytest.importorskip("airflow.providers.common.compat._resumable_job_mixin")
        ResumableJobMixin = mixin.ResumableJobMixin
    else:
        from torchx_airflow._resumable_fallback import ResumableJobMixin  # type: ignore[assignment]
    if issubclass(TorchXOperator, ResumableJobMixin):  # this Airflow is < 3.3: it is built so
        return TorchXOperator

    class OldTorchXOperator(ResumableJobMixin, TorchXOperator):  # type: ignore[misc,valid-type]
        def __init__(self, **kwargs: Any) -> None:  # wrapped by Airflow's operator metaclass
            super().__init__(**kwargs)

    return OldTorchXOperator


@pytest.mark.parametrize("stand_in", ["common.compat", "torchx_airflow"])
def test_older_airflow_retry_reattaches_by_name(
    cluster: Cluster, app: AppDef, stand_in: str
) -> None:
    """Before 3.3 every try calls submit_job (no state store): the retry after a worker crash
    finds the running app by its name instead of submitting it again."""
    cls = _old_airflow_operator(stand_in)
    kw = {"scheduler": "fake", "runner_factory": cluster.factory, "stream_logs": False}
    cluster.on_run = lambda h: cluster.set_state(h, AppState.RUNNING)
    first = cls(task_id="task", app=app, wait=False, **kw)
    handle = first.execute(make_context(None))["app_handle"]  # then the worker dies
    _finish_after(cluster, 3)
    second = cls(task_id="task", app=app, poll_interval=0.001, **kw)
    result = second.execute(make_context(None, FakeTI(try_number=2)))
    assert result["app_handle"] == handle and result["state"] == "SUCCEEDED"
    assert len(cluster.handles) == 1
    # a failed app is resubmitted
    cluster.set_state(handle, AppState.FAILED)
    cluster.table.on_describe = None
    cluster.on_run = lambda h: cluster.set_state(h, AppState.SUCCEEDED)
    third = cls(task_id="task", app=app, poll_interval=0.001, **kw)
    assert third.execute(make_context(None, FakeTI(try_number=3)))["app_handle"] != handle
    assert len(cluster.handles) == 2
