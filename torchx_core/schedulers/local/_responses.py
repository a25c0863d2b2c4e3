"""Describe and list answers of the local scheduler, built from an app's status document."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from torchx_core.schedulers.api import DescribeAppResponse, ListAppResponse
from torchx_core.schedulers.local import _owner, _state
from torchx_core.schedulers.local._layout import STATE_CHARS, StatusDoc, check_status
from torchx_core.schedulers.local._procs import kill_apps_processes
from torchx_core.specs import AppState, Role

logger: logging.Logger = logging.getLogger(__name__)

# one character per replica in the status file -> AppState
LOCAL_STATES: Mapping[str, AppState] = {c: AppState[name] for c, name in STATE_CHARS.items()}


class LazyRolesResponse(DescribeAppResponse):
    """A describe response that reads the AppDef (``roles``) only when asked for it.

    A status needs the status file alone; the submitted AppDef is a second file, read on the
    first access to ``roles``.
    """

    def __init__(self, load_roles: Callable[[], list[Role]], **kwargs: Any) -> None:
        self._load_roles = load_roles
        self._roles: list[Role] | None = None
        super().__init__(**kwargs)

    @property  # a lazily loaded field (overrides the dataclass field)
    def roles(self) -> list[Role]:
        if self._roles is None:
            self._roles = self._load_roles()
        return self._roles

    @roles.setter
    def roles(self, value: list[Role]) -> None:
        self._roles = value or None  # the dataclass default ([]) means "load on demand"


def checked_status(status: dict[str, Any] | None, app_id: str) -> StatusDoc | None:
    """``status`` (as read from the status file) if it is a well-formed status document."""
    if status is None:
        return None
    try:
        check_status(status)
    except ValueError:
        return None
    return StatusDoc.from_json(status, app_id)


def replica_counts(doc: StatusDoc) -> dict[str, int] | None:
    """How many replicas of a status document are in each state (by ``AppState`` name)."""
    counts: dict[str, int] = {}
    for role in doc.roles:
        for code in role.states:
            name = LOCAL_STATES.get(code, AppState.UNKNOWN).name
            counts[name] = counts.get(name, 0) + 1
    return counts or None


def list_rows(app_dirs: Iterable[tuple[str, str]], handle_prefix: str) -> list[ListAppResponse]:
    """The ``list`` rows of ``(app_id, app_dir)`` pairs, oldest first (one small read per app).

    An app whose state cannot be read is listed as ``UNKNOWN`` (with a warning); the leftovers of
    apps whose supervisor died are killed together at the end.
    """
    rows = []
    dead: list[tuple[str, str | None]] = []  # dead supervisors: leftovers killed together
    try:
        for app_id, app_dir in app_dirs:
            try:
                doc = _state.read_status(app_dir, app_id, dead=dead)
            except _state.CorruptAppStateError as e:
                logger.warning("%s", e)
                doc = StatusDoc(app_id, "", AppState.UNKNOWN.name, [], created=0.0)
            if doc is None:
                continue
            created = float(doc.created or 0.0)
            app = ListAppResponse(
                app_id=app_id,
                state=AppState[doc.state],
                app_handle=handle_prefix + app_id,
                name=doc.name,
                created=created or None,
                owner=_owner.read_owner(app_dir),
                replicas=replica_counts(doc),
                ended=doc.ended,
            )
            rows.append((created, app_id, app))
    finally:
        kill_apps_processes(dead)
    rows.sort(key=lambda row: row[:2])
    return [app for _, _, app in rows]
