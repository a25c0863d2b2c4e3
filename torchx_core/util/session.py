"""The launcher session id (``torchx.util.session``): one id per process, shared by its events.

The id is read from ``$TORCHX_INTERNAL_SESSION_ID`` when set (a launcher can pass its own down),
otherwise created (a random UUID) on first use and kept for the life of the process in
:data:`CURRENT_SESSION_ID` (TorchX's module-level name: tests read or reset it).
"""

from __future__ import annotations

import os

__all__ = [
    "CURRENT_SESSION_ID",
    "TORCHX_INTERNAL_SESSION_ID",
    "get_session_id_or_create_new",
    "get_torchx_session_id",
]

TORCHX_INTERNAL_SESSION_ID = "TORCHX_INTERNAL_SESSION_ID"

#: this process's session id; None until the first event or launch creates it
CURRENT_SESSION_ID: str | None = None


def get_session_id_or_create_new() -> str:
    """This process's session id, created (or read from the environment) on first call."""
    global CURRENT_SESSION_ID
    if not CURRENT_SESSION_ID:
        from_env = os.environ.get(TORCHX_INTERNAL_SESSION_ID)
        if from_env:
            CURRENT_SESSION_ID = from_env
        else:
            import uuid

            CURRENT_SESSION_ID = str(uuid.uuid4())
    return CURRENT_SESSION_ID


def get_torchx_session_id() -> str | None:
    """This process's session id, or None if no event or launch has created it yet."""
    return CURRENT_SESSION_ID
