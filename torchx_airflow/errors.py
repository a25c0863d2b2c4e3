"""Errors raised by ``torchx_airflow`` (part of the torchx-suite error tree)::

    TorchXError
    ├── TorchXAirflowError                      root of this package's own errors
    │   ├── InvalidTaskArgumentError            bad operator/sensor/trigger/hook arguments
    │   │   (also a torchx_core.runner.lifecycle.InvalidTaskArgumentError, ValueError, TypeError)
    │   └── InvalidConnectionError (ValueError)  a ``torchx`` connection that cannot be used
    └── AppLifecycleError (torchx_core.runner.lifecycle; re-exported here)
        └── AppFailedError > AppCancelledError, AppVanishedError

At run time a task raises Airflow's own exceptions (mapped by :mod:`torchx_airflow.states`),
chained (``from``) to the lifecycle error that says what happened to the app.
"""

from __future__ import annotations

from torchx_core.runner.lifecycle import (
    AppCancelledError,
    AppFailedError,
    AppLifecycleError,
    AppVanishedError,
)
from torchx_core.runner.lifecycle import InvalidTaskArgumentError as _LifecycleArgumentError
from torchx_core.specs.errors import TorchXError

__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppLifecycleError",
    "AppVanishedError",
    "InvalidConnectionError",
    "InvalidTaskArgumentError",
    "TorchXAirflowError",
]


class TorchXAirflowError(TorchXError):
    """Root of the errors ``torchx_airflow`` raises itself."""


class InvalidTaskArgumentError(TorchXAirflowError, _LifecycleArgumentError, TypeError):
    """An operator, sensor, trigger or hook got unknown, wrongly typed or contradictory arguments.

    The message says what was given, what is valid and how to fix it; every problem found is
    listed at once.

    Args:
        owner: what got the arguments (``"TorchXOperator"``...)
        problems: one sentence per problem
    """

    def __init__(self, owner: str, problems: list[str]) -> None:
        self.owner = owner
        self.problems = list(problems)
        super().__init__(f"{owner}: " + "; ".join(self.problems))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.owner, self.problems))


class InvalidConnectionError(TorchXAirflowError, ValueError):
    """A ``torchx`` connection is missing or its fields are wrong (every problem listed; secret
    values are never part of the message). Permanent: a task fails at once, without retries."""

    permanent = True


def sentence(text: object) -> str:
    """``text`` as a sentence to continue after: it ends with one full stop (or its own ``!``
    or ``?``), never two, whether or not the wrapped message had one."""
    out = str(text).rstrip()
    return out if out.endswith((".", "!", "?")) else out + "."
