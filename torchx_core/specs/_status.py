"""Run status types, dry-run info and app handles.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
"""

from __future__ import annotations

import types
from collections import namedtuple
from enum import Enum

from torchx_core.specs._app import NONE
from torchx_core.specs._dc import data, field
from torchx_core.specs._serde import opt, req
from torchx_core.specs.errors import (
    AppDefSerializationError,
    AppStatusError,
    MalformedAppHandleException,
)

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

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


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
        id: replica index within its role (node rank, not worker rank)
        state: replica state
        role: role name
        hostname: host the replica runs on ("" if unknown)
        structured_error_msg: error message in JSON form, if any
        hostaddr: DNS name or IP of the container; defaults to ``hostname``
    """

    id: int
    state: ReplicaState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    hostaddr: str | None = None

    def __post_init__(self) -> None:
        if self.hostaddr is None:
            self.hostaddr = self.hostname

    def to_json(self) -> dict[str, Any]:
        """Returns a JSON-compatible dict, as TorchX writes a replica (``state`` as its number)."""
        return {
            "id": self.id,
            "state": int(self.state),
            "role": self.role,
            "hostname": self.hostname,
            "structured_error_msg": self.structured_error_msg,
            "hostaddr": self.hostaddr,
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


# An RPC error: ``XError('On WorkerInfo(id=1, name=trainer:0:0):\n`` ... ``\n')`` (greedy)
_RPC_ERROR = r"\w*\('On WorkerInfo\(.+\):\n(?:.*\n)*'\)"
# an exception nested in the message of another: the line before a line starting "Exception"
_NESTED_ERROR = r"(?P<msg>.+)\nException"


def _format_error_message(msg: str, header: str, width: int = 80) -> str:
    """``header`` + ``msg``, wrapped at the first space after ``width`` characters of a line
    (TorchX's layout: continuation lines are indented by ``len(header)`` spaces)."""
    import re

    if len(header) >= width:
        raise ValueError(
            f"header {header!r} (len {len(header)}) must be shorter than width {width}"
        )
    rpc = re.search(_RPC_ERROR, msg)
    if rpc:
        msg = rpc.group(0)
    nested = re.search(_NESTED_ERROR, msg)
    if nested:
        msg = nested.group("msg")
    lines: list[str] = []
    start = 0
    for i in range(len(msg) + 1):
        if i == len(msg) or (msg[i] == " " and i - start >= width):
            lines.append(header + msg[start:i])
            header = " " * len(header)
            start = i
    return "\n".join(lines)


def _error_fields(text: str) -> tuple[str, Any, Any] | None:
    """(message, timestamp, exit code) of a JSON error message, None for any other text.

    Two layouts are known, as in TorchX: torchelastic's error file nests the error
    (``{"message": {"message", "errorCode", "extraInfo": {"timestamp"}}}``); scheduler reply
    files are flat (``{"message", "errorCode", "timestamp"}``; our local scheduler writes
    ``exit_code``).
    """
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    error = data.get("message") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        extra = error.get("extraInfo")
        timestamp = extra.get("timestamp") if isinstance(extra, dict) else None
        return error["message"], timestamp, error.get("errorCode")
    if isinstance(error, str):
        return error, data.get("timestamp"), data.get("errorCode", data.get("exit_code"))
    return None


def _format_replica(rep: ReplicaStatus) -> str:
    state = AppState(rep.state)
    if rep.structured_error_msg == NONE:
        data = str(state)
        if state in (AppState.CANCELLED, AppState.FAILED):
            data += " (no reply file)"
    else:
        # an unknown layout is shown verbatim in the message's place
        msg, timestamp, code = _error_fields(rep.structured_error_msg) or (
            rep.structured_error_msg,
            None,
            None,
        )
        when = "<N/A>"
        if timestamp is not None:
            import contextlib
            from datetime import datetime

            with contextlib.suppress(TypeError, ValueError, OverflowError, OSError):
                when = str(datetime.fromtimestamp(int(timestamp)))
        data = (
            f"{state} (exitcode: {code or '<N/A>'})\n"
            f"        timestamp: {when}\n"
            f"        hostname: {rep.hostname}\n"
            f"    {_format_error_message(msg, '    error_msg: ')}"
        )
    return f"\n {'*' if rep.id == 0 else ' '}{rep.role}[{rep.id}]:{data}"


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

    def to_json(self, filter_roles: list[str] | None = None) -> dict[str, Any]:
        """Returns the status as a JSON-compatible dict, as TorchX writes it (``torchx status
        --json``): ``state`` by name, replica states by number, the UI URL as ``url``.

        :py:meth:`from_json` reverses it.

        Args:
            filter_roles: only these roles (all roles if None or empty)
        """
        return {
            "state": str(AppState(self.state)),
            "num_restarts": self.num_restarts,
            "roles": [r.to_json() for r in self._roles(filter_roles)],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> AppStatus:
        """Builds an AppStatus from :py:meth:`to_json` output.

        Raises:
            AppDefSerializationError: ``data`` is malformed
        """
        return app_status_from_json(data)

    def __repr__(self) -> str:
        """YAML, as TorchX prints it (keys sorted; a JSON error message embedded as data)."""
        import json

        import yaml

        data: dict[str, Any] = {
            "msg": self.msg,
            "num_restarts": self.num_restarts,
            "roles": [
                {
                    "replicas": [
                        {**rep.to_json(), "state": repr(AppState(rep.state))}
                        for rep in role.replicas
                    ],
                    "role": role.role,
                }
                for role in self.roles
            ],
            "state": repr(AppState(self.state)),
            "structured_error_msg": self.structured_error_msg,
            "ui_url": self.ui_url,
        }
        if self.structured_error_msg != NONE:
            import contextlib

            # not JSON (job- or scheduler-written): shown verbatim
            with contextlib.suppress(ValueError):
                data["structured_error_msg"] = json.loads(self.structured_error_msg)
        return str(yaml.dump({"AppStatus": data}))

    def raise_for_status(self) -> None:
        """Raises :py:class:`AppStatusError` if state is not SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def _roles(self, filter_roles: list[str] | None) -> list[RoleStatus]:
        if not filter_roles:
            return list(self.roles)
        return [r for r in self.roles if r.role in filter_roles]

    def _format_error_message(self, msg: str, header: str, width: int = 80) -> str:
        """The error message under ``header``, wrapped at the first space after ``width`` chars.

        Of an RPC error (``XError('On WorkerInfo(...):`` ... ``')``) only that part is kept; of
        an exception nested in a message (a line followed by ``Exception ...``) only that line.
        """
        return _format_error_message(msg, header, width)

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Human-readable status string, as TorchX prints it (``torchx status``).

        Args:
            filter_roles: only show these roles (all roles if None or empty)
        """
        replicas = "".join(
            _format_replica(rep)
            for role in self._roles(filter_roles)
            for rep in sorted(role.replicas, key=lambda r: r.id)
        )
        return (
            "AppStatus:\n"
            f"    State: {self.state}\n"
            f"    Num Restarts: {self.num_restarts}\n"
            f"    Roles: {replicas}\n"
            f"    Msg: {self.msg}\n"
            f"    Structured Error Msg: {self.structured_error_msg}\n"
            f"    UI URL: {self.ui_url}\n"
            "    "
        )


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

    @property
    def app(self) -> AppDef | None:
        """The AppDef this dry run was made of (None until the scheduler/runner sets it)."""
        return self._app

    @property
    def cfg(self) -> Mapping[str, Any]:
        """A read-only view of the resolved run configuration."""
        return types.MappingProxyType(self._cfg)

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

    As in TorchX, ``app_id`` is what follows the last ``/``: the session name may hold slashes,
    the app id may not.

    >>> parse_app_handle("k8s://default/foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='default', app_id='foo_bar')
    >>> parse_app_handle("k8s:///foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='', app_id='foo_bar')
    >>> parse_app_handle("local_cwd://a/b/c")
    ParsedAppHandle(scheduler_backend='local_cwd', session_name='a/b', app_id='c')

    Raises:
        MalformedAppHandleException: the handle does not have that form
    """
    if not isinstance(app_handle, str):
        raise MalformedAppHandleException(app_handle, "an app handle must be a str")
    backend, sep, rest = app_handle.partition("://")
    session_name, slash, app_id = rest.rpartition("/")
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


def _state(value: Any, where: str) -> AppState:
    if isinstance(value, str) and value in AppState.__members__:
        return AppState[value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return AppState(value)
        except ValueError:
            pass
    raise AppDefSerializationError(
        f"{where}: {value!r} is not an AppState; valid: {list(AppState.__members__)}"
    )


def app_status_from_json(data: Mapping[str, Any]) -> AppStatus:
    """Builds an AppStatus from ``AppStatus.to_json()`` output (states by name or number)."""
    where = "status"
    roles = []
    for i, r in enumerate(opt(data, "roles", list, where, [])):
        rw = f"{where}.roles[{i}]"
        replicas = [
            ReplicaStatus(
                id=req(rep, "id", int, f"{rw}.replicas[{j}]"),
                state=_state(
                    req(rep, "state", (str, int), f"{rw}.replicas[{j}]"),
                    f"{rw}.replicas[{j}].state",
                ),
                role=req(rep, "role", str, f"{rw}.replicas[{j}]"),
                hostname=opt(rep, "hostname", str, f"{rw}.replicas[{j}]", ""),
                structured_error_msg=opt(
                    rep, "structured_error_msg", str, f"{rw}.replicas[{j}]", "<NONE>"
                ),
                hostaddr=opt(rep, "hostaddr", str, f"{rw}.replicas[{j}]", None),
            )
            for j, rep in enumerate(opt(r, "replicas", list, rw, []))
        ]
        roles.append(RoleStatus(role=req(r, "role", str, rw), replicas=replicas))
    return AppStatus(
        state=_state(req(data, "state", (str, int), where), f"{where}.state"),
        num_restarts=opt(data, "num_restarts", int, where, 0),
        msg=opt(data, "msg", str, where, ""),
        structured_error_msg=opt(data, "structured_error_msg", str, where, "<NONE>"),
        # TorchX writes "url"; earlier releases of ours wrote "ui_url"
        ui_url=opt(data, "url" if "url" in data else "ui_url", str, where, None),
        roles=roles,
    )
