"""Prefect 3 tasks and hooks that run TorchX apps (torchx-suite's ``prefect`` extra).

>>> from prefect import flow  # doctest: +SKIP
>>> from torchx_prefect import run_app_sync, cancel_flow_apps  # doctest: +SKIP
>>> @flow(on_cancellation=[cancel_flow_apps], on_crashed=[cancel_flow_apps])  # doctest: +SKIP
... def train():
...     return run_app_sync("utils.echo", ["--msg", "hi"], scheduler="local_cwd")

Public names:

- :func:`run_app` (async task) and :func:`run_app_sync` (sync task): submit or reattach,
  stream logs, publish artifacts, end Completed/Failed/Cancelled, cancel the app when stopped.
- :func:`cancel_flow_apps`: flow hook cancelling every app a flow run started.
- :class:`TorchXScheduler` and :class:`TorchXJob`: Prefect blocks (``prefect block register -m
  torchx_prefect``) holding where apps run, and a whole job (``trigger()`` -> ``JobRun``).
- :class:`AppResult`, the errors in :mod:`torchx_prefect.errors` (the shared lifecycle's error
  family under this package's names), and the phase table in :mod:`torchx_prefect.states`
  (both importable without Prefect).

Importing this package without Prefect installed raises
:class:`torchx_core.specs.MissingDependencyError` naming the ``prefect`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_prefect._launch import AppResult as AppResult
    from torchx_prefect.blocks import TorchXJob as TorchXJob
    from torchx_prefect.blocks import TorchXScheduler as TorchXScheduler
    from torchx_prefect.errors import AppCancelledError as AppCancelledError
    from torchx_prefect.errors import AppFailedError as AppFailedError
    from torchx_prefect.errors import AppRunError as AppRunError
    from torchx_prefect.errors import AppUnknownStateError as AppUnknownStateError
    from torchx_prefect.errors import AppVanishedError as AppVanishedError
    from torchx_prefect.errors import InvalidTaskArgumentError as InvalidTaskArgumentError
    from torchx_prefect.errors import JobTimeoutError as JobTimeoutError
    from torchx_prefect.errors import TorchXPrefectError as TorchXPrefectError
    from torchx_prefect.hooks import cancel_flow_apps as cancel_flow_apps
    from torchx_prefect.tasks import run_app as run_app
    from torchx_prefect.tasks import run_app_sync as run_app_sync

# public name -> defining module; loaded on first access so that `torchx_prefect.states` and
# `torchx_prefect.errors` import without Prefect (and without Prefect's import cost)
_LAZY: dict[str, str] = {
    "AppResult": "torchx_prefect._launch",
    "AppCancelledError": "torchx_prefect.errors",
    "AppFailedError": "torchx_prefect.errors",
    "AppRunError": "torchx_prefect.errors",
    "AppUnknownStateError": "torchx_prefect.errors",
    "AppVanishedError": "torchx_prefect.errors",
    "InvalidTaskArgumentError": "torchx_prefect.errors",
    "JobTimeoutError": "torchx_prefect.errors",
    "TorchXJob": "torchx_prefect.blocks",
    "TorchXPrefectError": "torchx_prefect.errors",
    "TorchXScheduler": "torchx_prefect.blocks",
    "cancel_flow_apps": "torchx_prefect.hooks",
    "run_app": "torchx_prefect.tasks",
    "run_app_sync": "torchx_prefect.tasks",
}

__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppResult",
    "AppRunError",
    "AppUnknownStateError",
    "AppVanishedError",
    "InvalidTaskArgumentError",
    "JobTimeoutError",
    "TorchXJob",
    "TorchXPrefectError",
    "TorchXScheduler",
    "cancel_flow_apps",
    "run_app",
    "run_app_sync",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
