"""Airflow 3 provider for TorchX: run TorchX apps as Airflow tasks on any scheduler.

Public names (imported lazily, so ``import torchx_airflow`` alone does not import Airflow):

* :py:class:`TorchXOperator` - submit an AppDef or component and wait for it
* :py:class:`TorchXTrigger` - the deferrable wait, in the triggerer
* :py:class:`TorchXSensor` - wait on an existing app handle
* :py:class:`TorchXAppLink` - the "TorchX app" UI link
* :py:class:`TorchXHook` - a Runner from an Airflow connection of type ``torchx``
* :py:mod:`torchx_airflow.states` - the lifecycle phase -> Airflow outcome table
* :py:class:`TorchXAirflowError` - the root of this package's errors
  (:py:mod:`torchx_airflow.errors`)

Without Airflow installed, using them raises
:py:class:`torchx_core.specs.MissingDependencyError` (torchx-suite's ``airflow`` extra).
"""

from __future__ import annotations

from torchx_core.util.lazy import lazy_exports

TYPE_CHECKING = False  # typing is not imported at run time (the warm-start client imports this)

if TYPE_CHECKING:
    from torchx_airflow.errors import InvalidTaskArgumentError as InvalidTaskArgumentError
    from torchx_airflow.errors import TorchXAirflowError as TorchXAirflowError
    from torchx_airflow.hook import TorchXHook as TorchXHook
    from torchx_airflow.links import TorchXAppLink as TorchXAppLink
    from torchx_airflow.operator import TorchXOperator as TorchXOperator
    from torchx_airflow.sensor import TorchXSensor as TorchXSensor
    from torchx_airflow.trigger import TorchXTrigger as TorchXTrigger

__all__ = [
    "InvalidTaskArgumentError",
    "TorchXAirflowError",
    "TorchXAppLink",
    "TorchXHook",
    "TorchXOperator",
    "TorchXSensor",
    "TorchXTrigger",
]

_LAZY = {
    "TorchXOperator": "torchx_airflow.operator",
    "TorchXTrigger": "torchx_airflow.trigger",
    "TorchXSensor": "torchx_airflow.sensor",
    "TorchXAppLink": "torchx_airflow.links",
    "TorchXHook": "torchx_airflow.hook",
    "TorchXAirflowError": "torchx_airflow.errors",
    "InvalidTaskArgumentError": "torchx_airflow.errors",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), cache=False)
