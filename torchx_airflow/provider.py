"""Airflow provider registration (the ``apache_airflow_provider`` entry point).

Stdlib only: Airflow's providers manager imports this module to list the provider, and that must
not import Airflow's task machinery or ``torchx_core`` backends.
"""

from __future__ import annotations

from typing import Any

from torchx_airflow._connection import provider_connection_type
from torchx_airflow._executor_options import provider_config

__all__ = ["get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Returns the provider metadata Airflow validates against its provider schema.

    ``package-name`` must equal the canonical distribution name (``torchx-suite``).
    """
    return {
        "package-name": "torchx-suite",
        "name": "TorchX",
        "description": "Run TorchX apps on any scheduler as Airflow tasks.",
        "integrations": [
            {
                "integration-name": "TorchX",
                "external-doc-url": "https://github.com/meta-pytorch/torchx",
                "tags": ["software"],
            }
        ],
        "operators": [
            {"integration-name": "TorchX", "python-modules": ["torchx_airflow.operator"]}
        ],
        "sensors": [{"integration-name": "TorchX", "python-modules": ["torchx_airflow.sensor"]}],
        "triggers": [{"integration-name": "TorchX", "python-modules": ["torchx_airflow.trigger"]}],
        "hooks": [{"integration-name": "TorchX", "python-modules": ["torchx_airflow.hook"]}],
        "connection-types": [provider_connection_type()],
        "extra-links": ["torchx_airflow.links.TorchXAppLink"],
        # the executor's section: `airflow config list` shows it and its variables count
        "config": provider_config(),
        "executors": ["torchx_airflow.executors.TorchXExecutor"],
        # `airflow torchx-executor list|cleanup` (imports the executor only when run)
        "cli": ["torchx_airflow.executor_cli.get_cli_commands"],
    }
