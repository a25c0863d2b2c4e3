"""Errors raised by the KFP adapter, all rooted at :class:`torchx_core.specs.TorchXError`.

::

    TorchXError
    └── KfpAdapterError
        ├── UnknownKfpStateError        (ValueError)
        ├── UnsupportedAppError         (ValueError)
        ├── InvalidKfpOptionsError      (ValueError, TypeError)
        ├── AppFailedError              (RuntimeError)
        └── AppVanishedError            (RuntimeError)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx_core.specs import TorchXError

if TYPE_CHECKING:
    from torchx_core.specs import AppStatus

__all__ = [
    "AppFailedError",
    "AppVanishedError",
    "InvalidKfpOptionsError",
    "KfpAdapterError",
    "UnknownKfpStateError",
    "UnsupportedAppError",
]


class KfpAdapterError(TorchXError):
    """Base of every error raised by :mod:`torchx_kfp`."""


class UnknownKfpStateError(KfpAdapterError, ValueError):
    """A state is neither an AppState nor a known KFP run/task state."""


class UnsupportedAppError(KfpAdapterError, ValueError):
    """The AppDef cannot be expressed as a single KFP container (use the launcher instead)."""


class InvalidKfpOptionsError(KfpAdapterError, ValueError, TypeError):
    """Options given to a torchx_kfp API are unknown, mistyped or contradict each other."""


class AppFailedError(KfpAdapterError, RuntimeError):
    """The launched app did not succeed (FAILED, CANCELLED, or UNKNOWN for too long).

    Args:
        message: what happened, with the app handle and its structured error
        app_handle: the app's handle
        status: the app's last status (None if it was never read)
    """

    def __init__(self, message: str, app_handle: str, status: AppStatus | None = None) -> None:
        super().__init__(message)
        self.app_handle = app_handle
        self.status = status


class AppVanishedError(KfpAdapterError, RuntimeError):
    """The scheduler no longer knows the app (its status is ``None``); the step may be retried.

    Args:
        app_handle: the app's handle
    """

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"The scheduler no longer knows app {app_handle!r} (status is None): it was deleted,"
            " expired or its scheduler state was lost. Retry the step to submit it again."
        )
        self.app_handle = app_handle
