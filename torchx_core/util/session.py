"""The launcher session id (``torchx.util.session``): one id per process, shared by its events.

The id is read from ``$TORCHX_INTERNAL_SESSION_ID`` when set (a launcher can pass its own down),
otherwise created (a random UUID) on first use and kept for the life of the process.
"""

from __future__ import annotations

import os

__all__ = ["TORCHX_INTERNAL_SESSION_ID", "get_session_id_or_create_new", "get_torchx_session_id"]

TORCHX_INTERNAL_SESSION_ID = "TORCHX_INTERNAL_SESSION_ID"

_session_id: str | None = None


def get_session_id_or_create_new() -> str:
    """This process's session id, created (or read from the environment) on first call."""
    global _session_id
    if _session_id is None:
        from_env = os.environ.get(TORCHX_INTERNAL_SESSION_ID)
        if from_env:
            _session_id = from_env
        else:
            import uuid

            _session_id = str(uuid.uuid4())
    return _session_id


def get_torchx_session_id() -> str | None:
    """This process's session id, or None if no event or launch has created it yet."""
    return _session_id
