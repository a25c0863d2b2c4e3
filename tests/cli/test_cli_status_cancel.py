"""`torchx status` and `torchx cancel`: exact output, exit codes and messages (fake scheduler)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fake_scheduler import FakeJob, FakeRequest, FakeScheduler, JobTable

from torchx_core.cli.cmd_status import StatusSelectionError, _check_roles
from torchx_core.cli.main import run_main
from torchx_core.specs import AppDef, AppState, AppStatus, ReplicaStatus, Role, RoleStatus


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = run_main(list(argv))
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def add_job(table: JobTable, app_id: str, roles: dict[str, int], state: AppState) -> str:
    """A job the fake already knows, in ``state``, with these roles (name -> replicas)."""
    app = AppDef(
        name=app_id,
        roles=[
            Role(name=n, image="img", entrypoint="echo", num_replicas=k) for n, k in roles.items()
        ],
    )
    request = FakeRequest(app_id, [(n, k, "echo", []) for n, k in roles.items()], {})
    table.jobs[app_id] = FakeJob(app=app, request=request, state=state)
    return f"fake://torchx/{app_id}"


def one_line(text: str) -> str:
    return " ".join(text.split())


def logged(err: str, message: str) -> bool:
    """``message`` is a whole logged message (after the logger's prefix) on a line of ``err``."""
    return any(line.endswith(f" {message}") for line in err.splitlines())


@pytest.fixture
def scoped(monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake names where it looks for apps (as the local scheduler names its root)."""
    monkeypatch.setattr(FakeScheduler, "lookup_scope", lambda self: "cluster c1")
    return " in cluster c1"


# -- torchx status -----------------------------------------------------------------------------


def test_status_of_one_app_prints_exactly_its_format(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 2, "ps": 1}, AppState.SUCCEEDED)
    rc, out, err = cli(capsys, "status", handle)
    assert rc == 0, err
    assert not out.startswith("==")
    assert out.startswith("AppStatus:\n    State: SUCCEEDED\n")
    assert "trainer[0]" in out and "trainer[1]" in out and "ps[0]" in out
    # the same handle twice is one app: the single-app output, once
    assert cli(capsys, "status", handle, handle) == (0, out, "")


def test_status_of_several_apps_heads_each_block_with_its_handle(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    h1 = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.SUCCEEDED)
    h2 = add_job(fake_plugin, "a2", {"ps": 1}, AppState.FAILED)
    _, out1, _ = cli(capsys, "status", h1)
    _, out2, _ = cli(capsys, "status", h2)
    rc, out, err = cli(capsys, "status", h1, h2)
    assert rc == 0, err
    assert out == f"== {h1}\n{out1}\n== {h2}\n{out2}"


def test_status_roles_selects_roles_in_text_and_json(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 2, "ps": 1}, AppState.RUNNING)
    rc, out, _ = cli(capsys, "status", handle, "--roles", "ps")
    assert rc == 0 and "ps[0]" in out and "trainer" not in out
    rc, out, _ = cli(capsys, "status", handle, "--roles", ",ps,")  # empty names are ignored
    assert rc == 0 and "ps[0]" in out and "trainer" not in out
    rc, out, _ = cli(capsys, "status", handle, "--roles", "")  # nothing given: every role
    assert rc == 0 and "ps[0]" in out and "trainer[1]" in out
    rc, out, _ = cli(capsys, "status", handle, "--json", "--roles", "trainer")
    assert rc == 0 and [r["role"] for r in json.loads(out)["roles"]] == ["trainer"]
    rc, out, _ = cli(capsys, "status", handle, "--json")
    assert [r["role"] for r in json.loads(out)["roles"]] == ["trainer", "ps"]
    other = add_job(fake_plugin, "a2", {"ps": 2}, AppState.RUNNING)
    rc, out, _ = cli(capsys, "status", handle, other, "--json", "--roles", "ps")
    assert rc == 0
    assert [(d["app_handle"], [r["role"] for r in d["roles"]]) for d in json.loads(out)] == [
        (handle, ["ps"]),
        (other, ["ps"]),
    ]


def test_status_unknown_roles_name_them_suggest_and_list_the_real_ones(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 1, "ps": 1}, AppState.RUNNING)
    rc, out, err = cli(capsys, "status", handle, "--roles", "trainr,ps,wrk")
    assert rc == 1 and out == ""
    assert (
        f"app {handle} has no role(s) 'trainr', 'wrk'. Did you mean: 'trainer'?"
        " Its roles: trainer, ps" in err
    )
    assert "Traceback" not in err


def test_status_roles_of_an_app_without_roles_yet_is_not_checked(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {}, AppState.PENDING)
    rc, out, err = cli(capsys, "status", handle, "--roles", "trainer")
    assert rc == 0, err
    assert "State: PENDING" in out


def test_check_roles_says_none_when_the_roles_have_no_names() -> None:
    status = AppStatus(
        AppState.RUNNING, roles=[RoleStatus("", [ReplicaStatus(0, AppState.RUNNING, "", "h")])]
    )
    with pytest.raises(StatusSelectionError) as info:
        _check_roles("fake://torchx/a1", status, ["x"])
    assert str(info.value) == "app fake://torchx/a1 has no role(s) 'x'. Its roles: (none)"
    _check_roles("fake://torchx/a1", status, [""])  # a role that exists: no error
    _check_roles("fake://torchx/a1", status, None)


def test_status_of_missing_apps_exits_1_and_names_each_app_and_where(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], scoped: str
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.SUCCEEDED)
    rc, out, err = cli(capsys, "status", "fake://torchx/gone1")
    assert rc == 1 and out == ""
    assert logged(err, f"app gone1 does not exist or has been removed from fake{scoped}")
    rc, out, err = cli(capsys, "status", "fake://torchx/gone1", "fake://torchx/gone2", "--json")
    assert rc == 1 and out == ""  # nothing found: no JSON at all, not an empty list
    assert "app gone1 does not exist" in err and "app gone2 does not exist" in err
    rc, out, err = cli(capsys, "status", "fake://torchx/gone1", "--json")
    assert rc == 1 and out == ""
    rc, out, err = cli(capsys, "status", "fake://torchx/gone1", handle, "--json")
    assert rc == 1 and [d["app_handle"] for d in json.loads(out)] == [handle]
    assert "app a1 " not in err


def test_status_of_a_malformed_handle_asks_no_scheduler(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.RUNNING)
    rc, out, err = cli(capsys, "status", handle, "not-a-handle")
    assert rc == 1 and out == "" and "not-a-handle" in err
    assert fake_plugin.jobs["a1"].describes == 0


def test_status_help_describes_the_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "status", "--help")
    text = one_line(out)
    assert rc == 0
    assert "app_handle app handle (e.g. local_cwd://torchx/echo-abc123) app_handle more app" in text
    assert "usage: torchx status [-h] [--roles ROLES] [--json] app_handle [app_handle ...]" in text
    assert "--roles ROLES comma separated roles to show (default: all) --json" in text
    assert (
        "print the status as JSON, one line as TorchX prints it (several handles: a list of"
        " them, each with its app_handle)" in text
    )


# -- torchx cancel -----------------------------------------------------------------------------


def test_cancel_of_a_running_app_cancels_it_and_says_so(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.RUNNING)
    fake_plugin.hold = True
    rc, out, err = cli(capsys, "cancel", handle)
    assert rc == 0 and out == ""
    assert logged(err, f"cancel requested for {handle}")
    job = fake_plugin.jobs["a1"]
    assert job.cancelled == 1 and job.state == AppState.CANCELLED


def test_cancel_of_an_app_whose_status_cannot_be_read_cancels_it_as_the_api_does(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the local scheduler, the fake then knows the app without reading its status."""
    from torchx_core.schedulers.api import SchedulerError

    monkeypatch.setattr(FakeScheduler, "exists", lambda self, app_id: app_id in self.table.jobs)
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.RUNNING)
    fake_plugin.hold = True
    fake_plugin.describe_error = SchedulerError("its status file is corrupt")
    rc, out, err = cli(capsys, "cancel", handle)
    assert rc == 0 and out == ""
    assert logged(err, "its status file is corrupt; cancelling anyway")
    assert err.count("its status file is corrupt") == 1  # said once, by the API
    assert logged(err, f"cancel requested for {handle}")
    assert fake_plugin.jobs["a1"].cancelled == 1


def test_cancel_whose_status_read_fails_calls_runner_cancel_with_the_handle_only(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As TorchX's ``torchx cancel``: ``Runner.cancel(handle)``, which users' tests patch."""
    from torchx_core.runner import Runner
    from torchx_core.schedulers.api import SchedulerError

    calls: list[tuple[tuple[object, ...], dict[str, object]]] = []
    monkeypatch.setattr(Runner, "cancel", lambda self, *a, **kw: calls.append((a, kw)))
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.RUNNING)
    fake_plugin.describe_error = SchedulerError("its status file is corrupt")
    rc, _, _ = cli(capsys, "cancel", handle)
    assert rc == 0 and calls == [((handle,), {})]


def test_cancel_of_an_ended_app_is_a_no_op_that_names_its_state(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.FAILED)
    rc, _, err = cli(capsys, "cancel", handle)
    assert rc == 0
    assert logged(err, f"app {handle} already ended (FAILED); nothing to cancel")
    assert "cancel requested" not in err and fake_plugin.jobs["a1"].cancelled == 0


def test_cancel_of_a_missing_app_exits_1_and_says_where_it_looked(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], scoped: str
) -> None:
    rc, _, err = cli(capsys, "cancel", "fake://torchx/gone")
    assert rc == 1
    assert (
        f"app fake://torchx/gone does not exist{scoped} (or was deleted); nothing to cancel."
        " `torchx list -s SCHEDULER` shows the known apps" in err
    )
    assert "cancel requested" not in err


def test_cancel_help_describes_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "cancel", "--help")
    assert rc == 0 and "app_handle the app handle to cancel options:" in one_line(out)


def test_status_and_cancel_do_not_read_component_defaults(
    fake_plugin: JobTable, capsys: pytest.CaptureFixture[str], isolated_config: Path
) -> None:
    """A .torchxconfig that only `torchx run` would need breaks neither status nor cancel."""
    handle = add_job(fake_plugin, "a1", {"trainer": 1}, AppState.RUNNING)
    fake_plugin.hold = True
    (isolated_config / ".torchxconfig").write_text("[component:utils.echo\nmsg = x\n")
    rc, out, err = cli(capsys, "status", handle)
    assert rc == 0 and "State: RUNNING" in out, err
    rc, _, err = cli(capsys, "cancel", handle)
    assert rc == 0 and logged(err, f"cancel requested for {handle}")
    assert fake_plugin.jobs["a1"].state == AppState.CANCELLED
