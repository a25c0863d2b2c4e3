"""Kubeflow Pipelines v2 adapter for TorchX apps.

Two routes from an AppDef to a pipeline step:

* :func:`component_from_app` / :func:`container_from_app`: a KFP container component for a
  single-role, single-replica AppDef (image, command, args, env), with resources, retries,
  caching (off by default) and, with the ``kfp-kubernetes`` extra, volumes, ``/dev/shm``,
  secrets, node selectors and tolerations applied on the task.
* :func:`launch` (component: :func:`launcher_component`): a launcher step that runs any AppDef
  through the TorchX Runner on any scheduler, streams its logs, maps its final state to the step
  outcome, cancels it on SIGTERM and reattaches on retry (the shared
  :class:`torchx_core.runner.AppLifecycle`). It runs in the launcher image
  (``docker/kfp-launcher``, ``make kfp-launcher-image``; ``launch(..., base_image=...)``);
  :func:`docker_runner` runs its steps under ``kfp.local`` whatever the pipeline root's owner.

:mod:`torchx_kfp.states` holds the state tables. kfp itself is imported on first use of a name
that needs it; without it a :class:`~torchx_core.specs.MissingDependencyError` names the extra
(torchx-suite's ``kfp`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_kfp.container import (
        ContainerFactory,
        ContainerOptions,
        component_from_app,
        container_from_app,
        input_ref,
    )
    from torchx_kfp.errors import (
        AppCancelledError,
        AppFailedError,
        AppVanishedError,
        InvalidKfpOptionsError,
        KfpAdapterError,
        UnknownKfpStateError,
        UnsupportedAppError,
    )
    from torchx_kfp.launcher import cancel_apps_on_exit, launch, launcher_component
    from torchx_kfp.local import docker_runner
    from torchx_kfp.runtime import LaunchResult, run_launcher
    from torchx_kfp.states import StepOutcome, app_state_from_kfp, step_outcome

_EXPORTS: dict[str, str] = {
    "ContainerFactory": "torchx_kfp.container",
    "ContainerOptions": "torchx_kfp.container",
    "component_from_app": "torchx_kfp.container",
    "container_from_app": "torchx_kfp.container",
    "input_ref": "torchx_kfp.container",
    "AppCancelledError": "torchx_kfp.errors",
    "AppFailedError": "torchx_kfp.errors",
    "AppVanishedError": "torchx_kfp.errors",
    "InvalidKfpOptionsError": "torchx_kfp.errors",
    "KfpAdapterError": "torchx_kfp.errors",
    "UnknownKfpStateError": "torchx_kfp.errors",
    "UnsupportedAppError": "torchx_kfp.errors",
    "cancel_apps_on_exit": "torchx_kfp.launcher",
    "launch": "torchx_kfp.launcher",
    "launcher_component": "torchx_kfp.launcher",
    "docker_runner": "torchx_kfp.local",
    "LaunchResult": "torchx_kfp.runtime",
    "run_launcher": "torchx_kfp.runtime",
    "StepOutcome": "torchx_kfp.states",
    "app_state_from_kfp": "torchx_kfp.states",
    "step_outcome": "torchx_kfp.states",
}

__all__ = [
    "AppCancelledError",
    "AppFailedError",
    "AppVanishedError",
    "ContainerFactory",
    "ContainerOptions",
    "InvalidKfpOptionsError",
    "KfpAdapterError",
    "LaunchResult",
    "StepOutcome",
    "UnknownKfpStateError",
    "UnsupportedAppError",
    "app_state_from_kfp",
    "cancel_apps_on_exit",
    "component_from_app",
    "container_from_app",
    "docker_runner",
    "input_ref",
    "launch",
    "launcher_component",
    "run_launcher",
    "step_outcome",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
