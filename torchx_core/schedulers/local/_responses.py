"""Describe and list answers of the local scheduler, built from an app's status document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torchx_core.schedulers.api import DescribeAppResponse
from torchx_core.schedulers.local._layout import STATE_CHARS, StatusDoc, check_status
from torchx_core.specs import AppState, Role

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
