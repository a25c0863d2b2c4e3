"""Airflow executors that run tasks as TorchX apps: :class:`TorchXExecutor`.

``[core] executor = torchx_airflow.executors.TorchXExecutor`` (or beside another executor:
``LocalExecutor,torchx_airflow.executors.TorchXExecutor`` and ``executor="TorchXExecutor"`` on
a task). Settings: :mod:`torchx_airflow.executors.config`.

The executor needs Airflow >= 3.3 (:data:`MIN_AIRFLOW`, the oldest release it is tested on; the
operators, sensors and triggers support every Airflow 3). On an older Airflow, importing it raises
a ``MissingDependencyError`` that names the version found and the pip command.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from torchx_core.specs import MissingDependencyError

#: the oldest Airflow the executor is tested on (Airflow's executor API moved until 3.3)
MIN_AIRFLOW = (3, 3)


def _check_airflow() -> None:
    try:
        found = _metadata.version("apache-airflow")
    except _metadata.PackageNotFoundError:
        return  # the import below names the missing package
    parts = []
    for piece in found.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    if tuple(parts) < MIN_AIRFLOW:
        raise MissingDependencyError(
            "airflow",
            "airflow",
            "torchx_airflow.executors.TorchXExecutor",
            distribution="apache-airflow",
            found=found,
            required=">=" + ".".join(map(str, MIN_AIRFLOW)),
        )


_check_airflow()

# the version check must run before the executor module imports Airflow 3.3's classes
from torchx_airflow.executors.executor import TorchXExecutor  # noqa: E402 - after the version check

__all__ = ["MIN_AIRFLOW", "TorchXExecutor"]
