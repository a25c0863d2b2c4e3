"""A stateful fake of the Runner's public API for the Prefect adapter's unit tests."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torchx_core.specs import AppDef, AppState, AppStatus, ReplicaStatus, RoleStatus, is_terminal


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
    logs: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    cancelled: bool = False


class FakeRunner:
    """A stateful fake of the Runner's public API (run/status/cancel/list/log_lines).

    Each submitted app follows a scripted list of states (the last one repeats); ``cancel``
    moves it to CANCELLED. ``status`` of an unknown handle is ``None``.
    """

    def __init__(self, script: list[AppState | None] | None = None, scheduler: str = "local_cwd"):
        self.script = script or [AppState.RUNNING, AppState.SUCCEEDED]
        self.scheduler = scheduler
        self.apps: dict[str, FakeApp] = {}
        self.calls: list[tuple[str, str]] = []
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.logs: dict[tuple[str, int], list[str]] = {}
        self.fail_status: Exception | None = None
        self.fail_list: Exception | None = None

    def run(self, app: AppDef, scheduler: str, cfg: Any = None, workspace: Any = None) -> str:
        handle = f"{scheduler}://torchx/{app.name}-{next(self._ids)}"
        self.apps[handle] = FakeApp(app, handle, list(self.script), dict(self.logs))
        self.calls.append(("run", handle))
        return handle

    def materialize_component(self, component: str, args: Any) -> AppDef:
        from torchx_core.specs import Role

        return AppDef(name=component.split(".")[-1], roles=[Role("r", "img", entrypoint="/bin/true")])

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
        if self.fail_status is not None:
            raise self.fail_status
        state = self._state(app_handle)
        if state is None:
            return None
        fa = self.apps[app_handle]
        roles = [
            RoleStatus(r.name, [ReplicaStatus(k, state, r.name, "localhost") for k in range(r.num_replicas)])
            for r in fa.app.roles
        ]
        return AppStatus(state, roles=roles, msg=f"fake {state.name}")

    def peek(self, handle: str) -> AppState | None:
        fa = self.apps.get(handle)
        if fa is None:
            return None
        return AppState.CANCELLED if fa.cancelled else fa.states[0]

    def cancel(self, app_handle: str) -> None:
        self.calls.append(("cancel", app_handle))
        fa = self.apps.get(app_handle)
        if fa is not None and not is_terminal(fa.states[0]):
            fa.cancelled = True

    def list(self, scheduler: str) -> list[FakeListed]:
        if self.fail_list is not None:
            raise self.fail_list
        return [
            FakeListed(h.split("/")[-1], self.peek(h) or AppState.UNKNOWN, h, fa.app.name)
            for h, fa in self.apps.items()
        ]

    def log_lines(self, app_handle: str, role_name: str, k: int = 0, regex: Any = None,
                  since: Any = None, until: Any = None, should_tail: bool = False,
                  streams: Any = None) -> Iterator[str]:
        fa = self.apps.get(app_handle)
        if fa is None:
            raise LookupError(app_handle)
        return iter(list(fa.logs.get((role_name, k), [])))


def echo_app(name: str = "echo", replicas: int = 1) -> AppDef:
    from torchx_core.specs import Role

    return AppDef(name=name, roles=[Role("worker", "img", entrypoint="/bin/echo", args=["hi"], num_replicas=replicas)])
