"""Airflow executors that run tasks as TorchX apps: :class:`TorchXExecutor`.

``[core] executor = torchx_airflow.executors.TorchXExecutor`` (or beside another executor:
``LocalExecutor,torchx_airflow.executors.TorchXExecutor`` and ``executor="TorchXExecutor"`` on
a task). Settings: :mod:`torchx_airflow.executors.config`.
"""

from __future__ import annotations

from torchx_airflow.executors.executor import TorchXExecutor

__all__ = ["TorchXExecutor"]
