"""Unit-test fakes for the Airflow provider: a stateful Runner and a fake task context."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torchx_core.specs import (
    AppDef,
    AppState,
    AppStatus,
    ReplicaStatus,
    Role,
    RoleStatus,
    runopts,
)

# -- unit-test fakes ---------------------------------------------------------------------------


@dataclass
class FakeListed:
    app_id: str
    state: AppState
    app_handle: str
    name: str = ""


@dataclass
class FakeApp:
    app: AppDef
    handle: str
    states: list[AppState | None]
    cancelled: bool = False
    ui_url: str | None = None


class FakeRunner:
    """A stateful fake of the Runner's public API.

    Each submitted app walks through a scripted list of states (the last one repeats);
    ``cancel`` moves it to CANCELLED; ``status`` of an unknown handle is None. Every call is
    recorded in ``calls`` (name, handle).
    """

    def __init__(
        self,
        script: list[AppState | None] | None = None,
        ui_url: str | None = None,
        logs: dict[tuple[str, int], list[str]] | None = None,
    ) -> None:
        self.script = list(script or [AppState.RUNNING, AppState.SUCCEEDED])
        self.ui_url = ui_url
        self.logs = logs or {("r", 0): [f"line {i}\n" for i in range(10)]}
        self.apps: dict[str, FakeApp] = {}
        self.calls: list[tuple[str, str]] = []
        self.status_error: Exception | None = None
        self.status_hook: Callable[[str], None] | None = None
        #: numbers (1-based) of the ``status`` calls that do not find the app (None)
        self.missing_on: set[int] = set()
        #: called with the new handle once ``run`` created the app, before it returns
        self.run_hook: Callable[[str], None] | None = None
        self.closed = 0
        self._ids = itertools.count()
        self._lock = threading.Lock()

    # submission
    def run(self, app: AppDef, scheduler: str, cfg: Any = None, workspace: Any = None) -> str:
        handle = f"{scheduler}://torchx/{app.name}-{next(self._ids)}"
        self.apps[handle] = FakeApp(app, handle, list(self.script), ui_url=self.ui_url)
        self.calls.append(("run", handle))
        if self.run_hook is not None:
            self.run_hook(handle)
        return handle

    def add_app(
        self, name: str, states: list[AppState | None], scheduler: str = "local_cwd"
    ) -> str:
        """Registers an app as if an earlier process had submitted it."""
        handle = f"{scheduler}://torchx/{name}-{next(self._ids)}"
        self.apps[handle] = FakeApp(AppDef(name=name, roles=[Role("r", "img")]), handle, states)
        return handle

    def materialize_component(self, component: str, component_args: Any) -> AppDef:
        self.calls.append(("materialize", component))
        args = [str(a) for a in component_args] if isinstance(component_args, list) else []
        return AppDef(
            name=component.split(".")[-1],
            roles=[Role("r", "img", entrypoint="/bin/echo", args=args)],
        )

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        opts = runopts()
        opts.add("log_dir", type_=str, help="where logs go")
        return opts

    # queries
    def _state(self, handle: str) -> AppState | None:
        fa = self.apps.get(handle)
        if fa is None:
            return None
        if fa.cancelled:
            return AppState.CANCELLED
        with self._lock:
            return fa.states.pop(0) if len(fa.states) > 1 else fa.states[0]

    def status(self, app_handle: str) -> AppStatus | None:
        self.calls.append(("status", app_handle))
        if self.status_hook is not None:
            self.status_hook(app_handle)
        if self.status_error is not None:
            raise self.status_error
        if self.count("status") in self.missing_on:
            return None
        state = self._state(app_handle)
        if state is None:
            return None
        fa = self.apps[app_handle]
        rep_state = state
        err = '{"message": "exit 3"}' if state == AppState.FAILED else "<NONE>"
        return AppStatus(
            state=state,
            msg="fake msg",
            structured_error_msg=err,
            ui_url=fa.ui_url,
            roles=[RoleStatus("r", [ReplicaStatus(0, rep_state, "r", "localhost", err)])],
        )

    def describe(self, app_handle: str) -> AppDef | None:
        fa = self.apps.get(app_handle)
        return fa.app if fa else None

    def list(self, scheduler: str) -> list[FakeListed]:
        self.calls.append(("list", scheduler))
        out = []
        for fa in self.apps.values():
            states = fa.states
            state = AppState.CANCELLED if fa.cancelled else states[0]
            out.append(FakeListed(fa.handle.rsplit("/", 1)[1], state, fa.handle, fa.app.name))
        return out

    def log_lines(
        self, app_handle: str, role_name: str, k: int = 0, *args: Any, **kwargs: Any
    ) -> Iterator[str]:
        self.calls.append(("log_lines", app_handle))
        return iter(self.logs.get((role_name, k), []))

    def cancel(self, app_handle: str) -> None:
        self.calls.append(("cancel", app_handle))
        if app_handle in self.apps:
            self.apps[app_handle].cancelled = True

    def close(self) -> None:
        self.closed += 1

    # helpers for assertions
    def count(self, call: str) -> int:
        return sum(1 for c, _ in self.calls if c == call)


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

    def __init__(self, on_push: Callable[[str, Any], None] | None = None) -> None:
        self.dag_id = "dag"
        self.task_id = "task"
        self.run_id = "manual__1"
        self.map_index = -1
        self.try_number = 1
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
