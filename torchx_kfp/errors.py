"""Errors raised by the KFP adapter, all rooted at :class:`torchx_core.specs.TorchXError`.

::

    TorchXError
    ├── KfpAdapterError
    │   ├── UnknownKfpStateError        (ValueError)
    │   ├── UnsupportedAppError         (ValueError)
    │   └── InvalidKfpOptionsError      (ValueError, TypeError)
    └── AppLifecycleError               (torchx_core.runner; RuntimeError)
        └── AppFailedError              the launched app did not succeed
            ├── AppCancelledError
            └── AppVanishedError        vanished, or UNKNOWN past the grace period

The app failures are the shared lifecycle's (``torchx_core.runner.lifecycle``), re-exported
here under the names users import from ``torchx_kfp``.
"""

from __future__ import annotations

from torchx_core.runner.lifecycle import AppCancelledError, AppFailedError, AppVanishedError
from torchx_core.specs import TorchXError

__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppVanishedError",
    "InvalidKfpOptionsError",
    "KfpAdapterError",
    "UnknownKfpStateError",
    "UnsupportedAppError",
]


class KfpAdapterError(TorchXError):
    """Base of every error raised by :mod:`torchx_kfp` about its own inputs."""


class UnknownKfpStateError(KfpAdapterError, ValueError):
    """A state is neither a lifecycle phase nor a known KFP run/task state."""


class UnsupportedAppError(KfpAdapterError, ValueError):
    """The AppDef cannot be expressed as a single KFP container (use the launcher instead)."""


class InvalidKfpOptionsError(KfpAdapterError, ValueError, TypeError):
    """Options given to a torchx_kfp API are unknown, mistyped or contradict each other."""
