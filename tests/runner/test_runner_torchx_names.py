"""TorchX HEAD's Runner names that TorchX users call or patch, behaving as in TorchX."""

from __future__ import annotations

from unittest import mock

import pytest
from support.fake_scheduler import FakeScheduler, JobTable, make_factory

from torchx_core.runner import Runner, api, get_runner
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    InvalidRunConfigException,
    Role,
    UnknownSchedulerException,
)
from torchx_core.util import session


def _app() -> AppDef:
    return AppDef("echo", roles=[Role(name="worker", image="/tmp", entrypoint="echo")])


def test_run_with_dryrun_returns_the_request_and_submits_nothing() -> None:
    table = JobTable()
    runner = Runner("sess", {"fake": make_factory(table)})
    info = runner.run(_app(), "fake", cfg={"queue": "q"}, dryrun=True)
    assert isinstance(info, AppDryRunInfo)
    assert info.request.cfg["queue"] == "q"
    assert table.jobs == {}
    handle = runner.run(_app(), "fake", dryrun=False)
    assert isinstance(handle, str) and handle.startswith("fake://sess/")
    assert len(table.jobs) == 1


def test_cfg_from_str_parses_every_literal_against_the_schedulers_runopts() -> None:
    runner = Runner("sess", {"fake": make_factory(JobTable())})
    cfg = runner.cfg_from_str("fake", "queue=q1,priority=3", "tags=a;b", "queue=q2")
    assert cfg == {"queue": "q2", "priority": 3, "tags": ["a", "b"]}
    assert runner.cfg_from_str("fake") == {}
    with pytest.raises(InvalidRunConfigException, match="priority"):
        runner.cfg_from_str("fake", "priority=high")
    with pytest.raises(UnknownSchedulerException, match="nope"):
        runner.cfg_from_str("nope", "queue=q")


def test_get_scheduler_factories_is_where_runners_look_up_their_schedulers() -> None:
    """TorchX users patch ``torchx.runner.api.get_scheduler_factories`` to give ``get_runner()``
    and ``Runner()`` other schedulers; explicit factories skip the look-up."""
    table = JobTable()
    with mock.patch.object(
        api, "get_scheduler_factories", return_value={"fake": make_factory(table)}
    ) as patched:
        with get_runner() as runner:
            assert runner.scheduler_backends() == ["fake"]
            runner.scheduler_run_opts("fake")
        assert Runner("s").scheduler_backends() == ["fake"]
        assert patched.call_count == 2
        Runner("s", {"other": make_factory(table)})
        assert patched.call_count == 2
    assert table.closed == 1 and isinstance(table.created[0], FakeScheduler)


def test_runner_defaults_to_an_empty_session_and_every_registered_scheduler() -> None:
    runner = Runner()
    assert runner.name() == ""
    assert "local_cwd" in runner.scheduler_backends()
    assert "local_cwd" in api.get_scheduler_factories()


def test_current_session_id_is_the_module_level_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "CURRENT_SESSION_ID", None)
    monkeypatch.delenv(session.TORCHX_INTERNAL_SESSION_ID, raising=False)
    assert session.get_torchx_session_id() is None
    created = session.get_session_id_or_create_new()
    assert session.CURRENT_SESSION_ID == created == session.get_session_id_or_create_new()
    monkeypatch.setattr(session, "CURRENT_SESSION_ID", "set-by-a-test")
    assert session.get_session_id_or_create_new() == "set-by-a-test"
