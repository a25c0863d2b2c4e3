"""Errors raised by the Prefect adapter (all derive from :class:`torchx_core.specs.TorchXError`).

::

    TorchXError
    └── TorchXPrefectError
        ├── InvalidTaskArgumentError     (ValueError, TypeError)  bad task arguments; not retried
        └── AppRunError                  (RuntimeError)            the app did not succeed
            ├── AppFailedError           the app ended FAILED (Prefect task retries apply)
            ├── AppUnknownStateError     UNKNOWN for longer than ``unknown_state_timeout``
            └── AppVanishedError         the scheduler no longer knows the app
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx_core.specs import TorchXError

if TYPE_CHECKING:
    from torchx_core.specs import AppStatus

__all__ = [
    "AppFailedError",
    "AppRunError",
    "AppUnknownStateError",
    "AppVanishedError",
    "InvalidTaskArgumentError",
    "TorchXPrefectError",
]


class TorchXPrefectError(TorchXError):
    """Root of the Prefect adapter's errors."""


class InvalidTaskArgumentError(TorchXPrefectError, ValueError, TypeError):
    """An argument given to a torchx_prefect task is invalid (wrong type, value or combination)."""


class AppRunError(TorchXPrefectError, RuntimeError):
    """The app launched by the task did not succeed.

    Args:
        message: the error message
        app_handle: the app's handle
        status: the last status read (``None`` if the app vanished)
        log_tail: the last log lines of the failed replicas (may be empty)
    """

    def __init__(
        self,
        message: str,
        app_handle: str,
        status: AppStatus | None = None,
        log_tail: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.app_handle = app_handle
        self.status = status
        self.log_tail = list(log_tail or [])

    def __reduce__(self) -> tuple[object, ...]:
        # Prefect persists task exceptions with (cloud)pickle; keep every field.
        return (type(self), (str(self), self.app_handle, self.status, self.log_tail))


class AppFailedError(AppRunError):
    """The app ended in state FAILED. The message carries the structured error and a log tail."""


class AppUnknownStateError(AppRunError):
    """The app's state stayed UNKNOWN for longer than ``unknown_state_timeout``."""


class AppVanishedError(AppRunError):
    """The scheduler no longer knows the app (status ``None``) for longer than the grace period."""
