"""Unit tests of the Runner against the stateful fake scheduler."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
from support.fake_scheduler import FakeScheduler, JobTable, make_factory

from torchx_core.runner import Runner, RunnerError, get_runner
from torchx_core.schedulers.api import DescribeAppResponse, ListAppResponse
from torchx_core.specs import (
    AppDef,
    AppState,
    CfgVal,
    InvalidRunConfigException,
    MalformedAppHandleException,
    Role,
    UnknownAppException,
    UnknownSchedulerException,
    Workspace,
    parse_app_handle,
)
from torchx_core.workspace.api import WorkspaceMixin


def _app(name: str = "echo", replicas: int = 2) -> AppDef:
    return AppDef(
        name=name,
        roles=[
            Role(name="worker", image="/tmp", entrypoint="echo", args=["hi"], num_replicas=replicas)
        ],
    )


@pytest.fixture
def table() -> JobTable:
    return JobTable()


@pytest.fixture
def runner(table: JobTable) -> Runner:
    return Runner("sess", {"fake": make_factory(table, steps=3)})


def test_run_returns_handle_with_session_and_app_id(runner: Runner, table: JobTable) -> None:
    handle = runner.run(_app(), scheduler="fake", cfg={"queue": "q1"})
    scheduler, session, app_id = parse_app_handle(handle)
    assert (scheduler, session) == ("fake", "sess")
    assert app_id in table.jobs
    assert table.jobs[app_id].request.cfg["queue"] == "q1"
    # defaults of the scheduler's runopts are filled in
    assert table.jobs[app_id].request.cfg["priority"] == 0


def test_status_progresses_and_wait_returns_terminal(runner: Runner) -> None:
    handle = runner.run(_app(), "fake")
    first = runner.status(handle)
    assert first is not None and first.state == AppState.RUNNING
    assert [r.role for r in first.roles] == ["worker"]
    assert len(first.roles[0].replicas) == 2
    final = runner.wait(handle, wait_interval=0.001)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert final.msg == "fake SUCCEEDED"


def test_wait_timeout_returns_last_nonterminal_status(table: JobTable) -> None:
    runner = Runner("s", {"fake": make_factory(table, steps=10**9)})
    handle = runner.run(_app(), "fake")
    st = runner.wait(handle, wait_interval=0.001, timeout=0.05)
    assert st is not None and st.state == AppState.RUNNING


def test_wait_rejects_nonpositive_interval(runner: Runner) -> None:
    handle = runner.run(_app(), "fake")
    with pytest.raises(RunnerError, match="wait_interval"):
        runner.wait(handle, wait_interval=0)


def test_status_and_wait_of_unknown_app_are_none(runner: Runner) -> None:
    assert runner.status("fake://sess/nope") is None
    assert runner.wait("fake://sess/nope", wait_interval=0.001) is None
    assert runner.describe("fake://sess/nope") is None


def test_handles_from_other_sessions_work(runner: Runner, table: JobTable) -> None:
    handle = runner.run(_app(), "fake")
    app_id = parse_app_handle(handle).app_id
    other = Runner("other", {"fake": make_factory(table)})
    table.set_state(app_id, AppState.RUNNING)
    st = other.status(f"fake://whatever/{app_id}")
    assert st is not None and st.state == AppState.RUNNING
    app = other.describe(f"fake://whatever/{app_id}")
    assert app is not None and app.name == app_id and [r.name for r in app.roles] == ["worker"]


def test_malformed_handle_raises_typed_error(runner: Runner) -> None:
    with pytest.raises(MalformedAppHandleException, match="scheduler_backend"):
        runner.status("not-a-handle")


def test_unknown_scheduler_lists_valid_ones(runner: Runner) -> None:
    with pytest.raises(UnknownSchedulerException) as e:
        runner.status("nosuch://s/app")
    assert "fake" in str(e.value)
    with pytest.raises(UnknownSchedulerException):
        runner.run(_app(), "fak")


def test_cancel_is_idempotent_and_ignores_unknown_and_finished(
    runner: Runner, table: JobTable
) -> None:
    handle = runner.run(_app(), "fake")
    app_id = parse_app_handle(handle).app_id
    runner.cancel(handle)
    runner.cancel(handle)
    assert table.jobs[app_id].cancelled == 1
    st = runner.status(handle)
    assert st is not None and st.state == AppState.CANCELLED
    runner.cancel("fake://sess/unknown")  # no error


def test_delete_removes_app(runner: Runner, table: JobTable) -> None:
    handle = runner.run(_app(), "fake")
    runner.delete(handle)
    assert runner.status(handle) is None
    assert runner.describe(handle) is None
    runner.delete(handle)  # unknown: no error


def test_describe_returns_submitted_app_or_reconstruction(runner: Runner, table: JobTable) -> None:
    app = _app()
    handle = runner.run(app, "fake")
    # as in TorchX HEAD: the submitted copy, carrying the runner's env; the caller's app unchanged
    submitted = runner.describe(handle)
    assert submitted is not None and submitted is not app
    assert submitted.roles[0].env["TORCHX_JOB_ID"] == "fake://sess/${app_id}"
    assert app == _app()
    # another runner reconstructs it from the scheduler
    other = Runner("o", {"fake": make_factory(table)})
    described = other.describe(handle)
    assert described is not None
    assert described.name == parse_app_handle(handle).app_id
    assert [r.name for r in described.roles] == ["worker"]


def test_log_lines_and_regex(runner: Runner) -> None:
    handle = runner.run(_app(), "fake")
    assert list(runner.log_lines(handle, "worker", k=1)) == [
        "worker 1 line 0\n",
        "worker 1 line 1\n",
        "worker 1 line 2\n",
    ]
    assert list(runner.log_lines(handle, "worker", 0, regex="line 2")) == ["worker 0 line 2\n"]


def test_log_lines_of_unknown_app_raises(runner: Runner) -> None:
    with pytest.raises(UnknownAppException):
        runner.log_lines("fake://sess/gone", "worker")


def test_list_sets_handles(runner: Runner) -> None:
    h1 = runner.run(_app("a"), "fake")
    h2 = runner.run(_app("b"), "fake")
    apps = runner.list("fake")
    assert sorted(a.app_handle for a in apps) == sorted([h1, h2])


def test_dryrun_does_not_submit_and_schedule_does(runner: Runner, table: JobTable) -> None:
    info = runner.dryrun(_app(), "fake", cfg={"priority": 3})
    assert not table.jobs
    assert "priority" in str(info)
    info.request.cfg["priority"] = 7  # edit the native request before submitting
    handle = runner.schedule(info)
    assert table.jobs[parse_app_handle(handle).app_id].request.cfg["priority"] == 7


def test_schedule_rejects_foreign_dryrun_info(runner: Runner) -> None:
    from torchx_core.specs import AppDryRunInfo

    with pytest.raises(RunnerError, match="dryrun"):
        runner.schedule(AppDryRunInfo("req", str))


def test_dryrun_rejects_app_without_roles(runner: Runner) -> None:
    with pytest.raises(RunnerError, match="no roles"):
        runner.dryrun(AppDef(name="empty"), "fake")


def test_dryrun_lists_every_role_problem(runner: Runner) -> None:
    app = AppDef(
        name="bad",
        roles=[
            Role(name="a", image="/"),
            Role(name="b", image="/", entrypoint="x", num_replicas=0),
        ],
    )
    with pytest.raises(RunnerError) as e:
        runner.dryrun(app, "fake")
    assert "`a` has no entrypoint" in str(e.value) and "`b` has num_replicas=0" in str(e.value)
    assert isinstance(e.value, ValueError)  # TorchX raised ValueError here


def test_bad_cfg_type_is_typed_error(runner: Runner) -> None:
    with pytest.raises(InvalidRunConfigException):
        runner.run(_app(), "fake", cfg={"priority": "high"})


class _WorkspaceFake(WorkspaceMixin[None], FakeScheduler):
    """The fake scheduler, with workspaces: it records each role's workspace in its env."""

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        role.env["WORKSPACE"] = str(workspace)


def _workspace_runner(table: JobTable) -> Runner:
    def factory(session_name: str, **kwargs: Any) -> FakeScheduler:
        return _WorkspaceFake(session_name, table, **kwargs)

    return Runner("sess", {"fake": factory})


def test_workspace_sets_first_role_workspace_on_the_copy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torchx_core.schedulers.api import UnsupportedFeatureError

    app = _app()
    info = _workspace_runner(JobTable()).dryrun(app, "fake", workspace=str(tmp_path))
    assert info.app is not None and info.app.roles[0].env["WORKSPACE"] == str(tmp_path)
    assert app.roles[0].workspace is None  # as in TorchX HEAD: the caller's app is unchanged
    # a scheduler without workspaces rejects it
    with pytest.raises(UnsupportedFeatureError, match="workspace"):
        Runner("s", {"fake": make_factory(JobTable())}).dryrun(app, "fake", workspace=str(tmp_path))


def test_dryrun_leaves_the_callers_app_unchanged_and_shares_its_overrides() -> None:
    """TorchX HEAD: dryrun works on a copy (env injection and workspace never leak into the
    caller's AppDef) whose roles share the caller's ``overrides`` dict, copyable or not."""
    import concurrent.futures

    table = JobTable()
    runner = Runner("sess", {"fake": make_factory(table)})
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    app = _app()
    app.roles[0].overrides = {"image": future}
    first = runner.dryrun(app, "fake")
    second = runner.dryrun(app, "fake", parent_run_id="p1")
    assert app.roles[0].env == {}
    for info in (first, second):
        assert info.app is not None and info.app is not app
        assert info.app.roles[0].env["TORCHX_JOB_ID"] == "fake://sess/${app_id}"
        assert info.app.roles[0].overrides is app.roles[0].overrides
    assert "TORCHX_PARENT_RUN_ID" not in first.app.roles[0].env  # type: ignore[union-attr]


def test_scheduler_instances_are_lazy_cached_and_closed(table: JobTable) -> None:
    runner = Runner("s", {"fake": make_factory(table), "fake2": make_factory(table)})
    assert table.created == []
    assert runner.scheduler_run_opts("fake").get("queue") is not None
    runner.run(_app(), "fake")
    runner.status("fake://s/x")
    assert len(table.created) == 1 and isinstance(table.created[0], FakeScheduler)
    assert table.created[0].session_name == "s"
    assert sorted(runner.scheduler_backends()) == ["fake", "fake2"]
    runner.close()
    runner.close()
    assert table.closed == 1


def test_context_manager_closes_and_reraises(table: JobTable) -> None:
    with pytest.raises(KeyError), Runner("s", {"fake": make_factory(table)}) as runner:
        runner.run(_app(), "fake")
        raise KeyError("boom")
    assert table.closed == 1


def test_scheduler_params_reach_the_factory() -> None:
    seen: dict[str, object] = {}

    def factory(session_name: str, **kwargs: object) -> FakeScheduler:
        seen.update(kwargs)
        return FakeScheduler(session_name, JobTable())

    Runner("s", {"fake": factory}, scheduler_params={"cluster": "c1"}).scheduler_run_opts("fake")
    assert seen == {"cluster": "c1"}


def test_concurrent_first_use_creates_one_scheduler(table: JobTable) -> None:
    runner = Runner("s", {"fake": make_factory(table)})
    barrier = threading.Barrier(8)

    def use() -> None:
        barrier.wait()
        runner.run(_app(), "fake")

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(table.created) == 1
    assert len(table.jobs) == 8


def test_get_runner_uses_registry_plugin_and_defaults(
    fake_plugin: JobTable, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    with get_runner() as runner:
        assert runner.name() == "torchx"
        handle = runner.run(_app(), "fake")
        assert handle.startswith("fake://torchx/")
        assert "local_cwd" in runner.scheduler_backends()
        assert "fake" in runner.scheduler_backends()
    assert fake_plugin.closed == 1
    with get_runner("mysession") as runner:
        assert runner.run(_app(), "fake").startswith("fake://mysession/")


def test_importing_the_runner_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, torchx_core.runner\n"
        "heavy = ('importlib.metadata', 'yaml', 'fsspec', 'torch', 'docker', 'kubernetes',"
        " 'boto3', 'ray', 'airflow', 'kfp', 'prefect', 'torchx_core.schedulers.local.scheduler',"
        " 'torchx_core.specs.finder')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_workspace_is_a_typed_error_naming_the_path(
    runner: Runner, table: JobTable, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from torchx_core.specs import InvalidWorkspaceError, Workspace

    missing = str(tmp_path / "no-such-project")
    with pytest.raises(InvalidWorkspaceError, match="no-such-project"):
        runner.dryrun(_app(), "fake", workspace=missing)
    # a workspace set on any role is checked too, before the scheduler sees the app
    app = _app()
    app.roles[0].workspace = Workspace(projects={missing: "sub"})
    with pytest.raises(InvalidWorkspaceError, match="no-such-project"):
        runner.run(app, "fake")
    assert not table.jobs


def test_workspace_accepts_torchx_070_file_url(tmp_path) -> None:  # type: ignore[no-untyped-def]
    info = _workspace_runner(JobTable()).dryrun(_app(), "fake", workspace=f"file://{tmp_path}")
    assert info.app is not None and info.app.roles[0].workspace is not None
    assert info.app.roles[0].workspace.projects == {str(tmp_path): ""}


@pytest.mark.parametrize("bad", [None, "app", 42])
def test_run_rejects_what_is_not_an_appdef(runner: Runner, bad: object) -> None:
    with pytest.raises(RunnerError, match=r"expected a `specs\.AppDef`"):
        runner.run(bad, "fake")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [None, "10", -1])
def test_wait_interval_must_be_a_positive_number(runner: Runner, bad: object) -> None:
    handle = runner.run(_app(), "fake")
    with pytest.raises(RunnerError, match="wait_interval"):
        runner.wait(handle, wait_interval=bad)  # type: ignore[arg-type]


def test_log_lines_streams_by_name_and_bad_stream_lists_valid(runner: Runner) -> None:
    from torchx_core.schedulers.api import InvalidLogQueryError

    handle = runner.run(_app(), "fake")
    assert list(runner.log_lines(handle, "worker", 1, streams="stdout")) == [  # type: ignore[arg-type]
        "worker 1 line 0\n",
        "worker 1 line 1\n",
        "worker 1 line 2\n",
    ]
    with pytest.raises(InvalidLogQueryError) as e:
        runner.log_lines(handle, "worker", 0, streams="both")  # type: ignore[arg-type]
    assert "'both'" in str(e.value) and "'stdout'" in str(e.value) and "'combined'" in str(e.value)


def test_get_runner_reads_component_defaults_from_torchxconfig(
    fake_plugin: JobTable, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    (tmp_path / ".torchxconfig").write_text(
        "[component:utils.echo]\nmsg = from-config\nnum_replicas = 2\n"
    )
    with get_runner() as runner:
        info = runner.dryrun_component("utils.echo", [], "fake")
        assert info.request.roles == [("echo", 2, "echo", ["from-config"])]
        # explicit arguments win over the file
        info = runner.dryrun_component("utils.echo", ["--msg", "explicit"], "fake")
        assert info.request.roles == [("echo", 2, "echo", ["explicit"])]
    with get_runner(component_defaults={}) as runner:  # given explicitly: the file is not read
        assert runner.dryrun_component("utils.echo", [], "fake").request.roles[0][3] == [
            "hello world"
        ]


# -- status_many, wait's polls, cancel's decisions, owners, list -----------------------------------


def test_status_many_reads_each_app_once_in_the_order_given(
    runner: Runner, table: JobTable
) -> None:
    a = runner.run(_app("a"), "fake")
    b = runner.run(_app("b"), "fake")
    gone = "fake://sess/never-submitted"
    out = runner.status_many([b, gone, a, b])
    assert list(out) == [b, gone, a] and out[gone] is None
    status = out[a]
    assert status is not None and status.state == AppState.RUNNING
    assert (status.msg, status.num_restarts) == ("fake RUNNING", 0)
    assert [r.role for r in status.roles] == ["worker"]
    assert table.jobs[parse_app_handle(a).app_id].describes == 1
    assert runner.status_many([]) == {}


def test_wait_polls_fast_first_then_backs_off_to_the_interval(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner("sess", {"fake": make_factory(table, steps=8)})
    handle = runner.run(_app(), "fake")
    pauses: list[float] = []
    monkeypatch.setattr("torchx_core.runner.api.time.sleep", pauses.append)
    final = runner.wait(handle, wait_interval=0.05)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert pauses == [0.005, 0.01, 0.02, 0.04, 0.05, 0.05, 0.05]
    pauses.clear()
    other = runner.run(_app(), "fake")
    runner.wait(other, wait_interval=0.002)  # never longer than the interval
    assert pauses == [0.002] * 7


def test_wait_with_a_timeout_sleeps_no_longer_than_what_is_left(
    table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner("sess", {"fake": make_factory(table, steps=10**9)})
    handle = runner.run(_app(), "fake")
    now = [1000.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    monkeypatch.setattr("torchx_core.runner.api.time.sleep", sleep)
    monkeypatch.setattr("torchx_core.runner.api.time.monotonic", lambda: now[0])
    last = runner.wait(handle, wait_interval=1.0, timeout=0.03)
    assert last is not None and last.state == AppState.RUNNING
    assert [round(p, 6) for p in pauses] == [0.005, 0.01, 0.015]


class BlockingWaitScheduler(FakeScheduler):
    """A fake whose ``wait`` blocks until the app ends (as the local scheduler's does)."""

    def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        self.table.waits.append((app_id, timeout))  # type: ignore[attr-defined]
        job = self.table.jobs.get(app_id)
        if job is None:
            return None
        job.state = AppState.SUCCEEDED
        return self.describe(app_id)


def test_wait_uses_the_schedulers_blocking_wait(table: JobTable) -> None:
    table.waits = []  # type: ignore[attr-defined]

    def factory(session_name: str, **kwargs: object) -> BlockingWaitScheduler:
        return BlockingWaitScheduler(session_name, table, steps=10**9)

    runner = Runner("sess", {"fake": factory})
    handle = runner.run(_app(), "fake")
    final = runner.wait(handle, wait_interval=5, timeout=7)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert final.msg == "fake SUCCEEDED"
    app_id = parse_app_handle(handle).app_id
    assert table.waits == [(app_id, 7)]  # type: ignore[attr-defined]
    assert table.jobs[app_id].describes == 1  # the wait's own answer, no polling
    assert runner.wait("fake://sess/gone") is None


def test_cancel_of_a_finished_app_goes_to_schedulers_that_sweep_leftovers(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = runner.run(_app(), "fake")
    app_id = parse_app_handle(handle).app_id
    table.jobs[app_id].state = AppState.SUCCEEDED
    runner.cancel(handle)
    assert table.jobs[app_id].cancelled == 0
    monkeypatch.setattr(FakeScheduler, "cancels_finished_apps", True, raising=False)
    runner.cancel(handle)
    assert table.jobs[app_id].cancelled == 1
    runner.cancel("fake://sess/unknown")  # unknown: still nothing to cancel


def test_cancel_of_an_app_whose_status_cannot_be_read_still_cancels(
    runner: Runner, table: JobTable, caplog: pytest.LogCaptureFixture
) -> None:
    from torchx_core.specs.errors import TorchXError

    handle = runner.run(_app(), "fake")
    app_id = parse_app_handle(handle).app_id
    broken = TorchXError("status file unreadable")
    calls = []
    original = FakeScheduler.describe

    def describe(self: FakeScheduler, app_id: str) -> DescribeAppResponse | None:
        calls.append(app_id)
        if len(calls) == 1:
            raise broken  # the runner's status read; the scheduler's own cancel then reads fine
        return original(self, app_id)

    caplog.set_level("WARNING", logger="torchx_core.runner.api")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FakeScheduler, "describe", describe)
        runner.cancel(handle)
    assert table.jobs[app_id].cancelled == 1
    assert [r.getMessage() for r in caplog.records if r.name == "torchx_core.runner.api"] == [
        "status file unreadable; cancelling anyway"
    ]


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "x" * 201, 3, None])
def test_set_owner_rejects_bad_tokens_and_says_what_a_token_is(runner: Runner, bad: object) -> None:
    handle = runner.run(_app(), "fake")
    with pytest.raises(RunnerError) as e:
        runner.set_owner(handle, bad)  # type: ignore[arg-type]
    assert str(e.value).startswith(
        "owner must be a non-empty printable single-line string of at most 200 characters, got"
    )
    assert str(e.value).endswith("e.g. 'airflow:dag/task/run#try=2'")
    assert runner.owner(handle) is None


def test_set_owner_records_the_owner_for_every_runner(runner: Runner, table: JobTable) -> None:
    handle = runner.run(_app(), "fake")
    longest = "o" * 200
    assert runner.set_owner(handle, longest) is True
    assert Runner("other", {"fake": make_factory(table)}).owner(handle) == longest
    assert runner.set_owner("fake://sess/unknown", "me") is False
    assert runner.owner("fake://sess/unknown") is None
    table.supports_owner = False
    assert runner.set_owner(handle, "me") is False and runner.owner(handle) is None


def test_list_passes_the_cfg_only_when_given(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner.run(_app("a"), "fake")
    seen: list[object] = []
    original = FakeScheduler.list

    def listing(self: FakeScheduler, *args: object) -> list[ListAppResponse]:
        seen.append(args)
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(FakeScheduler, "list", listing)
    rows = runner.list("fake")
    runner.list("fake", {"queue": "q"})
    assert seen == [(), ({"queue": "q"},)]
    assert [parse_app_handle(r.app_handle)[:2] for r in rows] == [("fake", "sess")]


def test_cancel_even_if_ended_hands_every_cancel_to_the_scheduler(
    runner: Runner, table: JobTable
) -> None:
    handle = runner.run(_app(), "fake")
    app_id = parse_app_handle(handle).app_id
    table.jobs[app_id].state = AppState.SUCCEEDED
    runner.cancel(handle, even_if_ended=True)  # e.g. to sweep what is left of it
    assert table.jobs[app_id].cancelled == 1
    assert table.jobs[app_id].state == AppState.SUCCEEDED
    runner.cancel("fake://sess/unknown", even_if_ended=True)  # unknown: nothing to cancel


def test_the_schedulers_name_lock_and_submit_order_through_the_runner(
    runner: Runner, table: JobTable
) -> None:
    with runner.name_lock("fake", "train-1") as serialized:
        assert serialized is False  # the fake cannot serialize submits
    assert runner.submit_order("fake", []) is None
    table.ordered = True
    assert runner.submit_order("fake", ["x-12", "x-3"]) == ["x-3", "x-12"]
    with pytest.raises(UnknownSchedulerException):
        runner.submit_order("nope", [])


def test_a_scheduler_without_a_blocking_wait_says_so(runner: Runner) -> None:
    sched = FakeScheduler("sess", JobTable())
    with pytest.raises(NotImplementedError, match="has no blocking wait"):
        sched.wait("x-0", timeout=1)


@pytest.mark.parametrize("read", ["status", "wait"])
def test_status_and_wait_forget_the_submitted_app_of_a_vanished_handle(
    runner: Runner, table: JobTable, read: str
) -> None:
    handle = runner.run(_app(), "fake")
    table.vanish(parse_app_handle(handle).app_id)
    if read == "status":
        assert runner.status(handle) is None
    else:
        assert runner.wait(handle, wait_interval=0.01, timeout=5) is None
    assert runner.describe(handle) is None  # not the AppDef this runner submitted


def test_a_blocking_wait_forgets_the_submitted_app_of_a_vanished_handle(
    runner: Runner, table: JobTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler with its own blocking wait (as local) answering None: the app is unknown."""
    handle = runner.run(_app(), "fake")
    monkeypatch.setattr(FakeScheduler, "wait", lambda self, app_id, timeout=None: None)
    assert runner.wait(handle, wait_interval=0.01, timeout=5) is None
    table.vanish(parse_app_handle(handle).app_id)
    assert runner.describe(handle) is None  # not the AppDef this runner submitted


def test_status_many_forgets_the_submitted_app_of_a_vanished_handle(
    runner: Runner, table: JobTable
) -> None:
    handle = runner.run(_app(), "fake")
    assert runner.describe(handle) is not None
    table.vanish(parse_app_handle(handle).app_id)
    assert runner.status_many([handle]) == {handle: None}
    assert runner.describe(handle) is None  # not the AppDef this runner submitted


class _CachingWorkspaceFake(WorkspaceMixin[None], FakeScheduler):
    """Implements only TorchX HEAD's caching hook."""

    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
    ) -> None:
        role.image = str(build_cache.setdefault(role.workspace, f"built-{len(build_cache)}"))


def test_a_scheduler_with_only_the_caching_workspace_hook_builds_through_the_runner(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    def factory(session_name: str, **kwargs: Any) -> FakeScheduler:
        return _CachingWorkspaceFake(session_name, JobTable(), **kwargs)

    ws = Workspace({str(tmp_path): ""})
    app = AppDef(
        "a",
        [
            Role("r1", "i", entrypoint="e", workspace=ws),
            Role("r2", "i", entrypoint="e", workspace=ws),
        ],
    )
    info = Runner("s", {"fake": factory}).dryrun(app, "fake")
    assert info.app is not None and [r.image for r in info.app.roles] == ["built-0", "built-0"]
