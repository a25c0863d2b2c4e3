"""Airflow names the tests need that moved between 3.0 and 3.3 (the matrix runs every version).

The exceptions our operators raise come from ``torchx_airflow._airflow`` (the package's own
compatibility layer); what only the tests use is resolved here.
"""

from __future__ import annotations

try:  # Airflow >= 3.2
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 3.0-3.1
    from airflow.exceptions import TaskDeferred  # type: ignore[no-redef,attr-defined]

try:  # Airflow >= 3.1
    from airflow.sdk.module_loading import import_string
except ImportError:  # Airflow 3.0
    from airflow.utils.module_loading import import_string  # type: ignore[no-redef]

__all__ = ["AIRFLOW_VERSION", "HAS_TASK_STATE_STORE", "TaskDeferred", "import_string"]


def _airflow_version() -> tuple[int, int]:
    from importlib import metadata

    major, minor = metadata.version("apache-airflow").split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


#: (major, minor) of the installed Airflow
AIRFLOW_VERSION = _airflow_version()


def _has_task_state_store() -> bool:
    """Airflow >= 3.3: ``ResumableJobMixin`` and ``context['task_state_store']`` exist.

    Below it the operator runs on the stand-in mixin, which submits (or finds by name) on every
    try, and the tests' fake store is never read.
    """
    import airflow.sdk

    return hasattr(airflow.sdk, "ResumableJobMixin")


HAS_TASK_STATE_STORE = _has_task_state_store()
