"""Errors of the Prefect adapter: the shared lifecycle's error family, under the names users
import from ``torchx_prefect`` (aliases, not copies), plus the adapter's own root.

::

    TorchXError
    ├── AppLifecycleError (RuntimeError)        torchx_core.runner.lifecycle
    │   └── AppFailedError = AppRunError        the app did not succeed (task retries apply)
    │       ├── AppCancelledError               the app ended CANCELLED
    │       └── AppVanishedError = AppUnknownStateError
    │                                           VANISHED/UNKNOWN past ``unknown_state_timeout``
    ├── InvalidTaskArgumentError (ValueError)   bad task arguments; never retried
    └── TorchXPrefectError                      adapter-specific problems (e.g. a block)
"""

from __future__ import annotations

from torchx_core.runner.lifecycle import (
    AppCancelledError,
    AppFailedError,
    AppLifecycleError,
    AppVanishedError,
    InvalidTaskArgumentError,
)
from torchx_core.specs import TorchXError

__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppLifecycleError",
    "AppRunError",
    "AppUnknownStateError",
    "AppVanishedError",
    "InvalidTaskArgumentError",
    "TorchXPrefectError",
]

AppRunError = AppFailedError
"""Former root of the run errors; every app that did not succeed raises an ``AppFailedError``."""

AppUnknownStateError = AppVanishedError
"""An app UNKNOWN (or unreadable) past the grace period raises ``AppVanishedError``."""


class TorchXPrefectError(TorchXError):
    """Root of the Prefect adapter's own errors (e.g. a scheduler block that cannot be loaded)."""
