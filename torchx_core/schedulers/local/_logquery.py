"""The checks of a log query on a local app: its role, replica index and stream."""

from __future__ import annotations

from torchx_core.schedulers.api import InvalidLogQueryError, Stream
from torchx_core.schedulers.local._layout import StatusDoc

__all__ = ["log_stream"]


def log_stream(doc: StatusDoc, app_id: str, role_name: str, k: int, streams: Stream | None) -> str:
    """The stream of replica ``k`` of ``role_name`` to read (default: combined).

    Raises:
        InvalidLogQueryError: no such role, replica or stream (the message lists the valid ones).
    """
    roles = {r.name: len(r.states) for r in doc.roles}
    if role_name not in roles:
        raise InvalidLogQueryError(
            f"app {app_id} has no role {role_name!r}; its roles are: {', '.join(roles) or '(none)'}"
        )
    if not 0 <= k < roles[role_name]:
        raise InvalidLogQueryError(
            f"role {role_name!r} of app {app_id} has replicas 0..{roles[role_name] - 1}; got k={k}"
        )
    try:
        stream = Stream(streams).value if streams is not None else Stream.COMBINED.value
    except ValueError as e:
        valid = ", ".join(s.value for s in Stream)
        raise InvalidLogQueryError(f"unknown log stream {streams!r}; valid streams: {valid}") from e
    return stream
