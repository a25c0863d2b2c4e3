"""Kubernetes job status: Volcano Job and JobSet objects as TorchX app and replica states.

Pure functions of the objects the API server returns (plain dicts), so they are unit-tested
without a cluster; :mod:`torchx_core.schedulers.kubernetes.scheduler` reads the objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.specs import AppState

#: The annotation a cancelled (suspended) JobSet carries.
CANCELLED_ANNOTATION = "torchx.pytorch.org/cancelled"

# Volcano job phases -> AppState. A cancel aborts the job (Aborting -> Aborted).
VOLCANO_STATES: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Aborting": AppState.CANCELLED,
    "Aborted": AppState.CANCELLED,
    "Terminating": AppState.RUNNING,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}

# Volcano task (pod) phase names in `status.taskStatusCount[task].phase` -> replica state.
VOLCANO_TASK_STATES: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}


def _volcano_state(obj: Mapping[str, Any]) -> tuple[AppState, int, str]:
    status = obj.get("status") or {}
    state = status.get("state") or {}
    phase = state.get("phase") or ""
    app_state = VOLCANO_STATES.get(phase, AppState.PENDING if not phase else AppState.UNKNOWN)
    msg = state.get("message") or state.get("reason") or ""
    return app_state, int(status.get("retryCount") or 0), msg


def _jobset_state(obj: Mapping[str, Any]) -> tuple[AppState, int, str]:
    status = obj.get("status") or {}
    conditions = {
        c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"
    }
    restarts = int(status.get("restarts") or 0)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if "Completed" in conditions:
        return AppState.SUCCEEDED, restarts, conditions["Completed"].get("message", "")
    if "Failed" in conditions:
        return AppState.FAILED, restarts, conditions["Failed"].get("message", "")
    suspended = "Suspended" in conditions or (obj.get("spec") or {}).get("suspend")
    if suspended:
        if annotations.get(CANCELLED_ANNOTATION) == "true":
            return AppState.CANCELLED, restarts, "cancelled (JobSet suspended)"
        return AppState.PENDING, restarts, "suspended (waiting for admission)"
    active = sum(
        int(r.get("active") or 0) + int(r.get("ready") or 0)
        for r in status.get("replicatedJobsStatus") or []
    )
    return (AppState.RUNNING if active else AppState.PENDING), restarts, ""


def _volcano_task_states(obj: Mapping[str, Any]) -> dict[tuple[str, int], AppState]:
    """``{(role, replica_id): state}`` from ``status.taskStatusCount`` (one task per replica)."""
    replica_of: dict[str, tuple[str, int]] = {}
    for task in (obj.get("spec") or {}).get("tasks") or []:
        labels = ((task.get("template") or {}).get("metadata") or {}).get("labels") or {}
        rid = labels.get(pods.LABEL_REPLICA_ID, "")
        if labels.get(pods.LABEL_ROLE_NAME) and rid.isdigit():
            replica_of[task.get("name", "")] = (labels[pods.LABEL_ROLE_NAME], int(rid))
    out: dict[tuple[str, int], AppState] = {}
    counts = (obj.get("status") or {}).get("taskStatusCount") or {}
    for task, info in counts.items():
        phases = [p for p, n in ((info or {}).get("phase") or {}).items() if n]
        if task in replica_of and phases:
            out[replica_of[task]] = VOLCANO_TASK_STATES.get(phases[0], AppState.UNKNOWN)
    return out


def _roles_of(kind: str, obj: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(role name, replica count) from the stored object, in role order."""
    spec = obj.get("spec") or {}
    if kind == "volcano":
        counts: dict[str, int] = {}
        for task in spec.get("tasks") or []:
            labels = ((task.get("template") or {}).get("metadata") or {}).get("labels") or {}
            role = labels.get(pods.LABEL_ROLE_NAME) or re.sub(r"-\d+$", "", task.get("name", ""))
            counts[role] = counts.get(role, 0) + int(task.get("replicas") or 1)
        return list(counts.items())
    out = []
    for rj in spec.get("replicatedJobs") or []:
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        role = labels.get(pods.LABEL_ROLE_NAME) or rj.get("name", "")
        out.append(
            (role, int(((rj.get("template") or {}).get("spec") or {}).get("completions") or 1))
        )
    return out


def _default_replica(app_state: AppState) -> AppState:
    """A replica without a pod yet: pending while the app runs, else the app's final state."""
    return AppState.PENDING if app_state in (AppState.RUNNING, AppState.PENDING) else app_state
