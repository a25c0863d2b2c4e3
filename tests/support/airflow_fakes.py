"""Unit-test helpers for the Airflow provider: the shared fake scheduler under real Runners, and
a fake task context (no database, no Airflow run).

:class:`Cluster` wraps ``tests/support/fake_scheduler.py``'s :class:`JobTable` (scheduler name
``"fake"``): its :meth:`Cluster.factory` is the operator's ``runner_factory``; hooks run when an
app is submitted (``on_run``) and on every status read (``on_describe``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support.fake_scheduler import FakeJob, FakeScheduler, JobTable, make_runner
from torchx_core.runner import Runner
from torchx_core.specs import AppDef, AppState, Role, parse_app_handle


class HookedTable(JobTable):
    """A :class:`JobTable` that calls ``on_describe`` on every status read."""

    def __init__(self) -> None:
        self.on_describe: Callable[[], None] | None = None
        self._describe_error: BaseException | None = None
        super().__init__()

    @property  # type: ignore[override]
    def describe_error(self) -> BaseException | None:
        if self.on_describe is not None:
            self.on_describe()
        return self._describe_error

    @describe_error.setter
    def describe_error(self, value: BaseException | None) -> None:
        self._describe_error = value


class _UiFakeScheduler(FakeScheduler):
    """The fake scheduler, with a UI URL in every status."""

    def __init__(self, session_name: str, table: JobTable, ui_url: str, **kwargs: Any) -> None:
        super().__init__(session_name, table, **kwargs)
        self.ui_url = ui_url

    def describe(self, app_id: str) -> Any:
        resp = super().describe(app_id)
        if resp is not None:
            resp.ui_url = self.ui_url
        return resp


class Cluster:
    """The fake scheduler's apps, and Runners over them (``ui_url``: what statuses report)."""

    def __init__(self) -> None:
        self.table = HookedTable()
        self.table.hold = True  # states change only when a test says so (or set steps)
        self.on_run: Callable[[str], None] | None = None
        self.runners: list[Runner] = []
        self.ui_url: str | None = None

    def factory(self) -> Runner:
        """A new real Runner over the fake scheduler (the operator's ``runner_factory``)."""
        if self.ui_url is None:
            runner = make_runner(self.table)
        else:
            url = self.ui_url
            runner = Runner(
                "test", {"fake": lambda session, **kw: _UiFakeScheduler(session, self.table, url)}
            )
        submit = runner.run

        def run(*args: Any, **kwargs: Any) -> str:
            handle = submit(*args, **kwargs)
            if self.on_run is not None:
                self.on_run(handle)
            return handle

        runner.run = run  # type: ignore[method-assign]
        self.runners.append(runner)
        return runner

    def add(self, name: str, state: AppState) -> str:
        """An app submitted earlier (by another try), now in ``state``; returns its handle."""
        with make_runner(self.table) as r:
            handle = r.run(AppDef(name=name, roles=[Role("r", "img", entrypoint="sleep")]), "fake")
        self.set_state(handle, state)
        return handle

    def job(self, handle: str) -> FakeJob:
        return self.table.jobs[parse_app_handle(handle).app_id]

    def set_state(self, handle: str, state: AppState) -> None:
        self.table.set_state(parse_app_handle(handle).app_id, state)

    def state(self, handle: str) -> AppState:
        return self.job(handle).state

    @property
    def handles(self) -> list[str]:
        """Every app submitted so far, in order."""
        return [f"fake://test/{app_id}" for app_id in self.table.jobs]


class FakeStore:
    """The task state store (``context['task_state_store']``) as a dict."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, **kwargs: Any) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


class FakeTI:
    """The bits of a runtime task instance the provider uses."""

    def __init__(
        self, on_push: Callable[[str, Any], None] | None = None, try_number: int = 1
    ) -> None:
        self.dag_id = "dag"
        self.task_id = "task"
        self.run_id = "manual__1"
        self.map_index = -1
        self.try_number = try_number
        self.start_date = None
        self.stats_tags: dict[str, str] = {}
        self.xcoms: dict[str, Any] = {}
        self._on_push = on_push

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value
        if self._on_push is not None:
            self._on_push(key, value)


def make_context(store: FakeStore | None = None, ti: FakeTI | None = None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"ti": ti or FakeTI()}
    if store is not None:
        ctx["task_state_store"] = store
    return ctx
