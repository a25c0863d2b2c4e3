"""Airflow provider registration (the ``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Returns the provider metadata Airflow validates against its provider schema."""
    return {
        "package-name": "torchx-suite",
        "name": "TorchX",
        "description": "Run TorchX apps on any scheduler as Airflow tasks.",
    }
