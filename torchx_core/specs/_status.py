"""Run status types, dry-run info and app handles.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
"""

from __future__ import annotations

import types
from collections import namedtuple
from enum import Enum

from torchx_core.specs._app import NONE
from torchx_core.specs._dc import data, field
from torchx_core.specs.errors import AppStatusError, MalformedAppHandleException

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Generic, NamedTuple, TypeVar

    from torchx_core.specs._app import AppDef

    T = TypeVar("T")

    class _GenericBase(Generic[T]):
        pass

else:
    T = None

    class _GenericBase:
        """Run-time stand-in for ``typing.Generic``: ``Cls[X]`` is a ``types.GenericAlias``."""

        def __class_getitem__(cls, item: object) -> types.GenericAlias:
            return types.GenericAlias(cls, item)


class AppState(int, Enum):
    """State of the application.

    An application starts from an initial ``UNSUBMITTED`` state and moves through
    ``SUBMITTED``, ``PENDING``, ``RUNNING`` states finally reaching a terminal state:
    ``SUCCEEDED``, ``FAILED``, ``CANCELLED``.

    1. UNSUBMITTED - app has not been submitted to the scheduler yet
    2. SUBMITTED - app has been successfully submitted to the scheduler
    3. PENDING - app has been submitted to the scheduler pending allocation
    4. RUNNING - app is running
    5. SUCCEEDED - app has successfully completed
    6. FAILED - app has unsuccessfully completed
    7. CANCELLED - app was cancelled before completing
    8. UNKNOWN - app state is unknown
    """

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name


_TERMINAL_STATES: frozenset[AppState] = frozenset(
    {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}
)


_STARTED_STATES: frozenset[AppState] = _TERMINAL_STATES | {AppState.RUNNING}


def is_started(state: AppState) -> bool:
    """True if the app has started running (RUNNING or a terminal state)."""
    return state in _STARTED_STATES


def is_terminal(state: AppState) -> bool:
    """True if ``state`` is SUCCEEDED, FAILED or CANCELLED."""
    return state in _TERMINAL_STATES


ReplicaState = AppState


@data
class ReplicaStatus:
    """Status of one replica at runtime.

    Args:
        id: replica index within its role
        state: replica state
        role: role name
        hostname: host the replica runs on ("" if unknown)
        structured_error_msg: error message in JSON form, if any
    """

    id: int
    state: ReplicaState
    role: str
    hostname: str
    structured_error_msg: str = NONE

    def to_json(self) -> dict[str, Any]:
        """Returns a JSON-compatible dict (``state`` as its name)."""
        return {
            "id": self.id,
            "state": str(AppState(self.state)),
            "role": self.role,
            "hostname": self.hostname,
            "structured_error_msg": self.structured_error_msg,
        }


@data
class RoleStatus:
    """Status of the replicas of one role.

    Args:
        role: role name
        replicas: replica statuses
    """

    role: str
    replicas: list[ReplicaStatus]

    def to_json(self) -> dict[str, Any]:
        """Returns a JSON-compatible dict."""
        return {"role": self.role, "replicas": [r.to_json() for r in self.replicas]}


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if text == "" or text.strip() != text or any(c in text for c in ":#\n'\"{}[]"):
        import json

        return json.dumps(text)
    return text


def _yaml_lines(obj: Any, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_yaml_lines(v, indent + 1))
            else:
                empty = "{}" if isinstance(v, dict) else "[]" if isinstance(v, list) else None
                lines.append(f"{pad}{k}: {empty if empty else _yaml_scalar(v)}")
    elif isinstance(obj, list):
        for item in obj:
            sub = _yaml_lines(item, indent + 1)
            if sub and isinstance(item, (dict, list)):
                lines.append(f"{pad}- {sub[0].strip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_yaml_scalar(item)}")
    return lines


@data
class AppStatus:
    """Runtime status of an AppDef.

    ``roles`` contains replica statuses for the most recent retry only.

    Args:
        state: the app state
        num_restarts: number of restarts so far
        msg: free-form message from the scheduler
        structured_error_msg: error message in JSON form, if any
        ui_url: URL of the scheduler's UI for this app, if any
        roles: per-role replica statuses
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = field(default_factory=list)

    def is_terminal(self) -> bool:
        """True if the app reached a terminal state."""
        return is_terminal(self.state)

    def to_json(self) -> dict[str, Any]:
        """Returns the status as a JSON-compatible dict (``state`` as its name).

        :py:meth:`from_json` reverses it.
        """
        return {
            "state": str(AppState(self.state)),
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "ui_url": self.ui_url,
            "roles": [r.to_json() for r in self.roles],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> AppStatus:
        """Builds an AppStatus from :py:meth:`to_json` output.

        Raises:
            AppDefSerializationError: ``data`` is malformed
        """
        from torchx_core.specs._serde import app_status_from_json

        return app_status_from_json(data)

    def __repr__(self) -> str:
        data = self.to_json()
        data["state"] = f"{self.state} ({int(self.state)})"
        return "\n".join(["AppStatus:", *_yaml_lines(data, 1)])

    def raise_for_status(self) -> None:
        """Raises :py:class:`AppStatusError` if state is not SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def _format_replica(self, replica: ReplicaStatus) -> str:
        line = f"{replica.role}[{replica.id}]:{AppState(replica.state)}"
        if replica.hostname:
            line += f" (host: {replica.hostname})"
        if replica.structured_error_msg != NONE:
            line += f"\n        error: {replica.structured_error_msg}"
        return line

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Human-readable status string.

        Args:
            filter_roles: only show these roles (all roles if None)
        """
        roles = [r for r in self.roles if filter_roles is None or r.role in filter_roles]
        replica_lines = [
            f"     {'*' if i == 0 else ' '}{self._format_replica(rep)}"
            for role in roles
            for i, rep in enumerate(role.replicas)
        ]
        lines = [
            "AppStatus:",
            f"    State: {self.state}",
            f"    Num Restarts: {self.num_restarts}",
            "    Roles:",
            *replica_lines,
            f"    Msg: {self.msg}",
            f"    Structured Error Msg: {self.structured_error_msg}",
            f"    UI URL: {self.ui_url}",
        ]
        return "\n".join(lines)


class AppDryRunInfo(_GenericBase[T]):
    """Returned by ``Scheduler.submit_dryrun``.

    Wraps the scheduler request that would have been submitted. ``print(info)`` yields a
    human-readable representation produced by ``fmt``.

    Args:
        request: the scheduler request
        fmt: formats the request for humans
    """

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        # set by the scheduler/runner after creation
        self._app: AppDef | None = None
        self._cfg: Mapping[str, Any] = {}
        self._scheduler: str | None = None

    def __str__(self) -> str:
        return self._fmt(self.request)

    def __repr__(self) -> str:
        return self._fmt(self.request)


AppHandle = str

_BACKEND_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _is_backend_name(name: str) -> bool:
    return bool(name) and all(c in _BACKEND_CHARS for c in name)


if TYPE_CHECKING:

    class ParsedAppHandle(NamedTuple):
        """Parsed components of an AppHandle."""

        scheduler_backend: str
        session_name: str
        app_id: str

else:
    ParsedAppHandle = namedtuple("ParsedAppHandle", ["scheduler_backend", "session_name", "app_id"])
    ParsedAppHandle.__doc__ = "Parsed components of an AppHandle."
    ParsedAppHandle.__module__ = __name__


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Parses ``{scheduler}://{session_name}/{app_id}`` into its components.

    ``app_id`` is everything after the first ``/`` that follows the session name (it may hold
    further slashes).

    >>> parse_app_handle("k8s://default/foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='default', app_id='foo_bar')
    >>> parse_app_handle("k8s:///foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='', app_id='foo_bar')

    Raises:
        MalformedAppHandleException: the handle does not have that form
    """
    if not isinstance(app_handle, str):
        raise MalformedAppHandleException(app_handle, "an app handle must be a str")
    backend, sep, rest = app_handle.partition("://")
    session_name, slash, app_id = rest.partition("/")
    if not (sep and _is_backend_name(backend) and slash and app_id):
        if not sep:
            reason = "missing '://' after the scheduler name"
        elif not _is_backend_name(backend):
            reason = f"scheduler name {backend!r} must be non-empty letters, digits, '_', '-', '.'"
        elif not slash:
            reason = "missing '/<app_id>' after the session name"
        else:
            reason = "the app_id after the session name is empty"
        raise MalformedAppHandleException(app_handle, reason)
    return ParsedAppHandle(backend, session_name, app_id)


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Builds the app handle ``{scheduler_backend}://{session_name}/{app_id}``.

    >>> make_app_handle("local_cwd", "default", "echo-abc")
    'local_cwd://default/echo-abc'
    """
    return f"{scheduler_backend}://{session_name}/{app_id}"
