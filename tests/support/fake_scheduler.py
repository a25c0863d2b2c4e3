"""A small stateful fake scheduler for Runner, CLI, lifecycle and adapter unit tests.

Jobs live in a :class:`JobTable` (one shared table per test, injected into the factory), so
several scheduler instances (e.g. one per CLI invocation) see the same apps. A job moves
SUBMITTED -> RUNNING -> SUCCEEDED one step per ``describe`` once ``steps`` describes have passed;
with ``table.hold = True`` states only change when the test says so (:meth:`JobTable.set_state`,
:meth:`JobTable.set_replica`, :meth:`JobTable.vanish`).

Faults for the lifecycle: ``table.describe_error`` (status reads raise), ``table.list_error``,
``table.cancel_gate`` (cancel hangs until the event is set), ``table.supports_owner = False``
(a backend without owner hooks), ``table.log_breaks`` (the next N followed log reads raise).
Logs grow with :meth:`JobTable.append_log`; ``log_iter(should_tail=True)`` follows them until the
job is terminal or gone.

Adapter tests build a real Runner over it with :func:`make_runner`.

Registered through the registry as a plugin (see ``install_plugin``) so the lookup path that
users take is the one tested.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from torchx_core.runner import Runner
from torchx_core.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
)
from torchx_core.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RoleStatus,
    is_terminal,
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
    owner: str | None = None
    replica_states: dict[tuple[str, int], AppState] = field(default_factory=dict)
    error: str = NONE  # the app's structured error message
    replica_errors: dict[tuple[str, int], str] = field(default_factory=dict)
    created: float | None = None  # the submit time list() reports (None: unknown)


class JobTable:
    """The fake's "cluster": app id -> job."""

    def __init__(self) -> None:
        self.jobs: dict[str, FakeJob] = {}
        self.counter = itertools.count()
        self.created: list[FakeScheduler] = []
        self.closed = 0
        self.steps: int | None = None  # overrides the scheduler's steps when set
        self.final = AppState.SUCCEEDED  # the state jobs end in
        self.hold = False  # True: describe never advances a state (the test sets them)
        self.supports_owner = True
        self.describe_error: BaseException | None = None
        self.list_error: BaseException | None = None
        self.cancel_gate: threading.Event | None = None  # cancel blocks until it is set
        self.log_breaks = 0  # the next N followed log reads raise
        # what list() gives as a name: the AppDef's ("exact"), none ("none", like lsf), or the
        # app id in upper case ("id": a name the backend derived, like aws_batch job names)
        self.list_names = "exact"
        # a backend without a name lock that tells submission order (slurm, kubernetes):
        # submit_order sorts by the counter in the app id; None: unsupported (the default)
        self.ordered = False
        # runs inside schedule() before the job is added: another attempt submitting "at the
        # same moment" (e.g. ``lambda: table.add_twin(name)``)
        self.before_schedule: Any = None
        self.cond = threading.Condition()

    # -- test controls (thread-safe: log followers read concurrently) -------------------------

    def job(self, app_id: str) -> FakeJob:
        return self.jobs[app_id]

    def named(self, name: str) -> list[FakeJob]:
        """The jobs whose app is named ``name``."""
        return [j for j in self.jobs.values() if j.app.name == name]

    def set_state(self, app_id: str, state: AppState) -> None:
        with self.cond:
            self.jobs[app_id].state = state
            self.cond.notify_all()

    def set_replica(
        self, app_id: str, role: str, k: int, state: AppState, error: str = NONE
    ) -> None:
        with self.cond:
            self.jobs[app_id].replica_states[(role, k)] = state
            if error != NONE:
                self.jobs[app_id].replica_errors[(role, k)] = error
            self.cond.notify_all()

    def vanish(self, app_id: str) -> None:
        """The scheduler forgets the job (its status becomes None)."""
        with self.cond:
            del self.jobs[app_id]
            self.cond.notify_all()

    def append_log(self, app_id: str, role: str, k: int, *lines: str) -> None:
        with self.cond:
            self.jobs[app_id].logs.setdefault((role, k), []).extend(
                line if line.endswith("\n") else line + "\n" for line in lines
            )
            self.cond.notify_all()


class FakeScheduler(Scheduler[FakeRequest]):
    checks_in_dryrun = True  # as the built-in backends: submit_dryrun validates

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
        opts.add("api_token", type_=str, help="a secret-named option (masking tests)", default=None)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[FakeRequest]:
        req = FakeRequest(
            app_name=app.name,
            roles=[(r.name, r.num_replicas, r.entrypoint, list(r.args)) for r in app.roles],
            cfg=dict(cfg),
        )
        return AppDryRunInfo(
            req, lambda r: f"FakeRequest({r.app_name}, roles={r.roles}, cfg={r.cfg})"
        )

    def submit_order(self, app_ids: Sequence[str]) -> list[str] | None:
        if not self.table.ordered:
            return None
        return sorted(app_ids, key=lambda a: int(a.rsplit("-", 1)[1]))

    def schedule(self, dryrun_info: AppDryRunInfo[FakeRequest]) -> str:
        req = dryrun_info.request
        if self.table.before_schedule is not None:
            hook, self.table.before_schedule = self.table.before_schedule, None
            hook(dryrun_info)
        app_id = f"{req.app_name}-{next(self.table.counter)}"
        app = dryrun_info._app
        assert app is not None
        steps = self.table.steps if self.table.steps is not None else self.steps
        job = FakeJob(app=app, request=req, steps=steps, final=self.table.final)
        for name, n, _entrypoint, _args in req.roles:
            for k in range(n):
                job.logs[(name, k)] = [f"{name} {k} line {i}\n" for i in range(3)]
        self.table.jobs[app_id] = job
        return app_id

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        if self.table.describe_error is not None:
            raise self.table.describe_error
        job = self.table.jobs.get(app_id)
        if job is None:
            return None
        job.describes += 1
        if job.state in (AppState.SUBMITTED, AppState.RUNNING) and not self.table.hold:
            with self.table.cond:
                if job.describes >= job.steps:
                    job.state = job.final
                else:
                    job.state = AppState.RUNNING
                self.table.cond.notify_all()
        roles = [
            RoleStatus(
                role=r.name,
                replicas=[
                    ReplicaStatus(
                        id=k,
                        state=job.replica_states.get((r.name, k), job.state),
                        role=r.name,
                        hostname="fakehost",
                        structured_error_msg=job.replica_errors.get((r.name, k), NONE),
                    )
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
            structured_error_msg=job.error,
            roles_statuses=roles,
            roles=list(job.app.roles),
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        if self.table.list_error is not None:
            raise self.table.list_error
        names = {
            "exact": lambda app_id, job: job.app.name,
            "none": lambda app_id, job: "",
            "id": lambda app_id, job: app_id.upper(),
        }[self.table.list_names]
        return [
            ListAppResponse(
                app_id=app_id,
                state=job.state,
                name=names(app_id, job),
                created=job.created,
                owner=job.owner,
            )
            for app_id, job in list(self.table.jobs.items())
        ]

    def _cancel_existing(self, app_id: str) -> None:
        gate = self.table.cancel_gate
        if gate is not None:
            gate.wait(60)  # a hanging cancel (released by the test)
        with self.table.cond:
            job = self.table.jobs[app_id]
            job.cancelled += 1  # counted even for a finished job (a sweep)
            if not is_terminal(job.state):
                job.state = AppState.CANCELLED
            self.table.cond.notify_all()

    def set_owner(self, app_id: str, owner: str) -> bool:
        job = self.table.jobs.get(app_id)
        if not self.table.supports_owner or job is None:
            return False
        job.owner = owner
        return True

    def get_owner(self, app_id: str) -> str | None:
        job = self.table.jobs.get(app_id)
        return job.owner if self.table.supports_owner and job is not None else None

    def run_options(self, app_id: str) -> dict[str, CfgVal] | None:
        job = self.table.jobs.get(app_id)
        return dict(job.request.cfg) if job is not None else None

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
        if should_tail:
            with self.table.cond:
                if self.table.log_breaks > 0:
                    self.table.log_breaks -= 1
                    raise OSError(f"log of {role_name}/{k} is not readable yet")
            out: Iterable[str] = self._follow(app_id, role_name, k)
        else:
            out = list(lines)
        return filter_regex(regex, out) if regex else out

    def _follow(self, app_id: str, role: str, k: int) -> Iterator[str]:
        """The replica's log lines, then the new ones as they come, until the job ends."""
        given = 0
        while True:
            with self.table.cond:
                job = self.table.jobs.get(app_id)
                lines = job.logs.get((role, k), []) if job is not None else []
                new = lines[given:]
                if not new:
                    if job is None or is_terminal(job.state):
                        return
                    self.table.cond.wait(0.05)
                    continue
            for line in new:
                given += 1
                yield line


def make_factory(table: JobTable, steps: int = 1) -> Any:
    def create_scheduler(session_name: str, **kwargs: Any) -> FakeScheduler:
        return FakeScheduler(session_name, table, steps=steps, **kwargs)

    return create_scheduler


def make_runner(table: JobTable, steps: int = 1, name: str = "test") -> Runner:
    """A real Runner whose scheduler ``fake`` is a :class:`FakeScheduler` over ``table``."""
    return Runner(name, {"fake": make_factory(table, steps)})


# -- plugin registration through a real entry point ------------------------------------------

CURRENT_TABLE = JobTable()


def create_scheduler(session_name: str, **kwargs: Any) -> FakeScheduler:
    """Entry-point factory: uses the module-level CURRENT_TABLE (reset per test)."""
    return FakeScheduler(session_name, CURRENT_TABLE, **kwargs)


# -- pytest fixtures (imported by the conftest files that need them) ---------------------------


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
    write_plugin_dist(site, "[torchx.schedulers]\nfake = support.fake_scheduler:create_scheduler\n")
    monkeypatch.syspath_prepend(str(site))
    table = JobTable()
    monkeypatch.setattr(sys.modules[__name__], "CURRENT_TABLE", table)
    default_registry().refresh()
    yield table
    default_registry().refresh()
