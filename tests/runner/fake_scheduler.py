"""A small stateful fake scheduler for Runner/CLI unit tests.

Jobs live in a :class:`JobTable` (one shared table per test, injected into the factory), so
several scheduler instances (e.g. one per CLI invocation) see the same apps. A job moves
SUBMITTED -> RUNNING -> SUCCEEDED one step per ``describe`` once ``steps`` describes have passed;
tests can also set the state directly.

Registered through the registry as a plugin (see ``install_plugin``) so the lookup path that
users take is the one tested.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from torchx_core.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RoleStatus,
    runopts,
)


@dataclass
class FakeRequest:
    app_name: str
    roles: list[tuple[str, int, str, list[str]]]
    cfg: dict[str, Any]


@dataclass
class FakeJob:
    app: AppDef
    request: FakeRequest
    state: AppState = AppState.SUBMITTED
    steps: int = 1  # describes until the job finishes
    final: AppState = AppState.SUCCEEDED
    describes: int = 0
    cancelled: int = 0
    logs: dict[tuple[str, int], list[str]] = field(default_factory=dict)


class JobTable:
    """The fake's "cluster": app id -> job."""

    def __init__(self) -> None:
        self.jobs: dict[str, FakeJob] = {}
        self.counter = itertools.count()
        self.created: list[FakeScheduler] = []
        self.closed = 0
        self.steps: int | None = None  # overrides the scheduler's steps when set
        self.final = AppState.SUCCEEDED  # the state jobs end in


class FakeScheduler(Scheduler[FakeRequest]):
    def __init__(self, session_name: str, table: JobTable, steps: int = 1, **_: Any) -> None:
        super().__init__("fake", session_name)
        self.table = table
        self.steps = steps
        table.created.append(self)

    def close(self) -> None:
        self.table.closed += 1

    def _requires_resource(self) -> bool:
        return False

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, help="the queue", default="default")
        opts.add("priority", type_=int, help="job priority", default=0)
        opts.add("tags", type_=list[str], help="job tags", default=None)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[FakeRequest]:
        req = FakeRequest(
            app_name=app.name,
            roles=[(r.name, r.num_replicas, r.entrypoint, list(r.args)) for r in app.roles],
            cfg=dict(cfg),
        )
        return AppDryRunInfo(req, lambda r: f"FakeRequest({r.app_name}, roles={r.roles}, cfg={r.cfg})")

    def schedule(self, dryrun_info: AppDryRunInfo[FakeRequest]) -> str:
        req = dryrun_info.request
        app_id = f"{req.app_name}-{next(self.table.counter)}"
        app = dryrun_info._app
        assert app is not None
        steps = self.table.steps if self.table.steps is not None else self.steps
        job = FakeJob(app=app, request=req, steps=steps, final=self.table.final)
        for name, n, entrypoint, args in req.roles:
            for k in range(n):
                job.logs[(name, k)] = [f"{name} {k} line {i}\n" for i in range(3)]
        self.table.jobs[app_id] = job
        return app_id

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        job = self.table.jobs.get(app_id)
        if job is None:
            return None
        job.describes += 1
        if job.state in (AppState.SUBMITTED, AppState.RUNNING):
            if job.describes >= job.steps:
                job.state = job.final
            else:
                job.state = AppState.RUNNING
        roles = [
            RoleStatus(
                role=r.name,
                replicas=[
                    ReplicaStatus(id=k, state=job.state, role=r.name, hostname="fakehost")
                    for k in range(r.num_replicas)
                ],
            )
            for r in job.app.roles
        ]
        return DescribeAppResponse(
            app_id=app_id,
            state=job.state,
            num_restarts=0,
            msg=f"fake {job.state}",
            roles_statuses=roles,
            roles=list(job.app.roles),
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [
            ListAppResponse(app_id=app_id, state=job.state, name=job.app.name)
            for app_id, job in self.table.jobs.items()
        ]

    def _cancel_existing(self, app_id: str) -> None:
        job = self.table.jobs[app_id]
        job.cancelled += 1
        job.state = AppState.CANCELLED

    def _delete_existing(self, app_id: str) -> None:
        del self.table.jobs[app_id]

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        lines = self.table.jobs[app_id].logs.get((role_name, k))
        if lines is None:
            raise ValueError(f"no replica {role_name}/{k}")
        if regex:
            pattern = re.compile(regex)
            return [line for line in lines if pattern.search(line)]
        return list(lines)


def make_factory(table: JobTable, steps: int = 1) -> Any:
    def create_scheduler(session_name: str, **kwargs: Any) -> FakeScheduler:
        return FakeScheduler(session_name, table, steps=steps, **kwargs)

    return create_scheduler


# -- plugin registration through a real entry point ------------------------------------------

CURRENT_TABLE = JobTable()


def create_scheduler(session_name: str, **kwargs: Any) -> FakeScheduler:
    """Entry-point factory: uses the module-level CURRENT_TABLE (reset per test)."""
    return FakeScheduler(session_name, CURRENT_TABLE, **kwargs)


# -- pytest fixtures (imported by the conftest files that need them) ---------------------------

import sys
from pathlib import Path

import pytest


def write_plugin_dist(site: Path, entry_points: str, name: str = "torchx_fake_plugin") -> Path:
    """Writes a minimal installed distribution (dist-info) declaring ``entry_points``."""
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(entry_points)
    return dist


@pytest.fixture
def fake_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterable[JobTable]:
    """Registers the fake as scheduler ``fake`` through a real ``torchx.schedulers`` entry point.

    Yields the job table every ``fake`` scheduler instance of the test shares.
    """
    from torchx_core.schedulers.registry import default_registry

    site = tmp_path / "site"
    write_plugin_dist(site, "[torchx.schedulers]\nfake = fake_scheduler:create_scheduler\n")
    monkeypatch.syspath_prepend(str(site))
    table = JobTable()
    monkeypatch.setattr(sys.modules[__name__], "CURRENT_TABLE", table)
    default_registry().refresh()
    yield table
    default_registry().refresh()
