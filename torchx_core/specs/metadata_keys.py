"""Well-known metadata keys and environment variable names (``torchx.specs.metadata_keys``).

Schedulers stamp these spellings into the metadata of submitted jobs; import them instead of
spelling the strings again.
"""

from __future__ import annotations

__all__ = ["NA", "TORCHX_CONTEXT_NAME", "app_metadata"]

#: environment variable naming the calling context (e.g. ``cli_run`` or a pipeline name)
TORCHX_CONTEXT_NAME: str = "TORCHX_CONTEXT_NAME"

#: written when a metadata value is not available
NA: str = "<<NA>>"


class app_metadata:
    """Keys stamped into a submitted job's app-level metadata."""

    CONTEXT: str = "torchx/context"
    VERSION: str = "torchx/version"
    SCHEDULER: str = "torchx/scheduler"
    #: prefix of per-role keys: ``torchx/roles.<role_name>...``
    ROLES_PREFIX: str = "torchx/roles."
