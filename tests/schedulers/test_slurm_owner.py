"""The slurm scheduler's owner hooks (the job's Comment) on the real Slurm cluster."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

from torchx_core import specs
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, create_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.timeout(300)]


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> Iterator[SlurmScheduler]:  # noqa: F811
    yield create_scheduler("owner-test")


def _role(name: str) -> specs.Role:
    return specs.Role(
        name,
        image="",
        entrypoint=sys.executable,
        args=["-c", "import time; time.sleep(120)"],
        resource=specs.Resource(cpu=1, gpu=0, memMB=100),
    )


@pytest.mark.parametrize("roles", [["worker"], ["trainer", "reader"]], ids=["job", "hetjob"])
def test_owner_is_kept_by_slurm_for_every_process(
    sched: SlurmScheduler, tmp_path: Path, roles: list[str]
) -> None:
    app = specs.AppDef("owned", roles=[_role(r) for r in roles])
    app_id = sched.submit(app, {"job_dir": str(tmp_path), "comment": "my nightly run"})
    try:
        assert sched.get_owner(app_id) is None
        assert [r.name for r in sched.list() if r.app_id == app_id] == ["owned"]
        assert sched.set_owner(app_id, "airflow:dag/task/run/-1#try=1") is True
        fresh = create_scheduler("another-process")  # nothing cached: read back from Slurm
        assert fresh.get_owner(app_id) == "airflow:dag/task/run/-1#try=1"
        assert fresh.set_owner(app_id, "prefect:flow run with spaces#2") is True
        assert sched.get_owner(app_id) == "prefect:flow run with spaces#2"
        (leader, *_) = sched._records([app_id])[app_id]  # the user's comment and the name stay
        assert (
            leader.comment == "my nightly run torchx:app=owned;owner=prefect:flow run with spaces#2"
        )
        (row,) = [r for r in sched.list() if r.app_id == app_id]
        assert row.name == "owned"
        # what the dashboard's apps page shows, from the same squeue read
        assert row.owner == "prefect:flow run with spaces#2"
        assert row.created is not None and abs(row.created - time.time()) < 3600
        assert row.replicas is not None and sum(row.replicas.values()) == len(roles)
    finally:
        sched.cancel(app_id)


def test_the_lifecycle_reattaches_to_a_slurm_job_by_name(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    from torchx_core.runner import AppLifecycle, get_runner

    app = specs.AppDef("reattach", roles=[_role("worker")])
    with get_runner() as runner:
        first = AppLifecycle(runner, "slurm", owner="try=1", cfg={"job_dir": str(tmp_path)})
        att = first.attach(app, ("run-1", "task"))
        try:
            again = AppLifecycle(runner, "slurm", owner="try=2", cfg={"job_dir": str(tmp_path)})
            second = again.attach(app, ("run-1", "task"))  # no known handle: found by name
            assert (second.how, second.app_handle) == ("reattached", att.app_handle)
            assert runner.owner(att.app_handle) == "try=2"
            assert first.cancel(att.app_handle) is False  # superseded
            assert again.cancel(att.app_handle) is True
        finally:
            runner.cancel(att.app_handle)


def test_owner_of_an_unknown_job(sched: SlurmScheduler) -> None:
    assert sched.set_owner("999999", "me") is False
    assert sched.get_owner("999999") is None
    assert sched.set_owner("not-an-id", "me") is False
