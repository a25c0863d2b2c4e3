"""Every Airflow import of ``torchx_airflow``, in one place (public Airflow 3 paths only).

Importing this module imports Airflow; a missing Airflow, or one outside the supported range,
raises :py:class:`torchx_core.specs.MissingDependencyError` naming the installed version, the
range and the pip command.
"""

from __future__ import annotations

from typing import Any

from torchx_core.specs.errors import check_dependency_version, missing_dependency

_PURPOSE = "torchx_airflow"
check_dependency_version("apache-airflow", "airflow", _PURPOSE, module="airflow")

try:
    from airflow.sdk import (
        BaseOperator,
        BaseOperatorLink,
        BaseSensorOperator,
        PokeReturnValue,
    )
    from airflow.triggers.base import BaseTrigger, TriggerEvent
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "airflow", "airflow", _PURPOSE, distribution="apache-airflow", cause=e
    ) from e

try:
    # Airflow >= 3.2 (the task SDK owns the task-outcome exceptions)
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        AirflowTaskTimeout,
    )
except ImportError:  # Airflow 3.0-3.1: the same classes the task runner catches live here
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined]
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        AirflowTaskTimeout,
    )

try:
    # Airflow >= 3.1
    from airflow.sdk import BaseHook
except ImportError:  # Airflow 3.0
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef,attr-defined]

try:
    # Airflow >= 3.1
    from airflow.sdk.log import mask_secret
except ImportError:  # Airflow 3.0
    from airflow.sdk.execution_time.secrets_masker import (  # type: ignore[no-redef]
        mask_secret,
    )

try:
    # Airflow >= 3.3: the handle survives worker crashes in the task's own state store.
    from airflow.sdk import ResumableJobMixin
except ImportError:  # pragma: no cover - Airflow 3.0-3.2
    try:
        # no-redef under the project config; unused under --strict (untyped provider package)
        from airflow.providers.common.compat.sdk import (  # type: ignore[no-redef,unused-ignore]
            ResumableJobMixin,
        )
    except ImportError:
        from torchx_airflow._resumable_fallback import (  # type: ignore[assignment]
            ResumableJobMixin,
        )

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "BaseTrigger",
    "PokeReturnValue",
    "ResumableJobMixin",
    "TriggerEvent",
    "default_deferrable",
    "mask_secret",
]


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` (False when unset)."""
    import importlib

    try:
        conf: Any = importlib.import_module("airflow.sdk.configuration").conf
    except ImportError:  # pragma: no cover - older 3.x
        conf = importlib.import_module("airflow.configuration").conf
    return bool(conf.getboolean("operators", "default_deferrable", fallback=False))
