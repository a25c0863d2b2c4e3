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
        └── JobTimeoutError (TimeoutError)      a TorchXJob ran past ``timeout_seconds``
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
    "JobTimeoutError",
    "TorchXPrefectError",
]

AppRunError = AppFailedError
"""Former root of the run errors; every app that did not succeed raises an ``AppFailedError``."""

AppUnknownStateError = AppVanishedError
"""An app UNKNOWN (or unreadable) past the grace period raises ``AppVanishedError``."""


class TorchXPrefectError(TorchXError):
    """Root of the Prefect adapter's own errors (e.g. a scheduler block that cannot be loaded)."""


class JobTimeoutError(TorchXPrefectError, TimeoutError):
    """A :class:`~torchx_prefect.TorchXJob` ran longer than its ``timeout_seconds``; its app
    was cancelled.

    Args:
        app_handle: the app that timed out
        timeout_seconds: the limit it exceeded
    """

    def __init__(self, app_handle: str, timeout_seconds: float) -> None:
        super().__init__(
            f"TorchX app {app_handle} ran longer than the job's timeout_seconds={timeout_seconds:g}"
            f" and was cancelled; raise timeout_seconds if the app needs more time"
        )
        self.app_handle = app_handle
        self.timeout_seconds = timeout_seconds

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.app_handle, self.timeout_seconds))
