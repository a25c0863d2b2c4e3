"""Unit tests of the Kubernetes status mapping: pods, Volcano jobs and tasks, JobSets, taints."""

from __future__ import annotations

from typing import Any

import pytest

from torchx_core import specs
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes.scheduler import (
    CANCELLED_ANNOTATION,
    _jobset_state,
    _volcano_state,
    _volcano_task_states,
)

S = specs.AppState


def pod(
    role: str | None,
    rid: object,
    phase: str | None = "Running",
    node: str | None = "node1",
    created: str = "2026-01-01T00:00:00Z",
    name: str = "p",
    index: str | None = None,
) -> dict[str, Any]:
    labels = {}
    if role is not None:
        labels[pods.LABEL_ROLE_NAME] = role
    if rid is not None:
        labels[pods.LABEL_REPLICA_ID] = str(rid)
    annotations = {pods.JOB_COMPLETION_INDEX_ANNOTATION: index} if index is not None else {}
    out: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": created,
        },
        "spec": {"nodeName": node} if node else {},
    }
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def test_replica_status_from_pods_maps_phases_and_hosts() -> None:
    found = pods.replica_status_from_pods(
        [
            pod("trainer", 0, "Running", "node1"),
            pod(
                "trainer", 1, "Succeeded", None, name="trainer-1-pod"
            ),  # not scheduled: the pod name
            pod("ps", 0, "Failed", "node3"),
            pod("ps", 1, "Pending", "node4"),
            pod("ps", 2, None, "node5"),  # no status yet: Unknown
            pod("ps", 3, "Evicted?", "node6"),
        ]
    )
    assert found == {
        ("trainer", 0): (S.RUNNING, "node1"),
        ("trainer", 1): (S.SUCCEEDED, "trainer-1-pod"),
        ("ps", 0): (S.FAILED, "node3"),
        ("ps", 1): (S.PENDING, "node4"),
        ("ps", 2): (S.UNKNOWN, "node5"),
        ("ps", 3): (S.UNKNOWN, "node6"),
    }


def test_replica_status_newest_pod_wins_and_foreign_pods_are_skipped() -> None:
    found = pods.replica_status_from_pods(
        [
            pod("w", 0, "Running", "new", created="2026-01-02T00:00:00Z"),
            pod(
                "w", 0, "Failed", "old", created="2026-01-01T00:00:00Z"
            ),  # an older attempt, listed later
            pod("w", 1, "Failed", "old", created="2026-01-01T00:00:00Z"),
            pod("w", 1, "Pending", "new", created="2026-01-03T00:00:00Z"),
            pod(None, 0),
            pod("w", None),
            pod("w", "x"),  # not ours / no replica id
            {"metadata": None},
        ]
    )
    assert found == {("w", 0): (S.RUNNING, "new"), ("w", 1): (S.PENDING, "new")}


def test_replica_id_from_the_indexed_job_annotation() -> None:
    found = pods.replica_status_from_pods([pod("w", None, "Running", "n", index="2")])
    assert found == {("w", 2): (S.RUNNING, "n")}
    # our label wins over the annotation
    assert pods.replica_status_from_pods([pod("w", 1, index="2")]) == {
        ("w", 1): (S.RUNNING, "node1")
    }


def test_volcano_state_message_and_retries() -> None:
    assert _volcano_state(
        {"status": {"state": {"phase": "Failed", "message": "m", "reason": "r"}, "retryCount": 3}}
    ) == (S.FAILED, 3, "m")
    assert _volcano_state({"status": {"state": {"phase": "Aborted", "reason": "r"}}}) == (
        S.CANCELLED,
        0,
        "r",
    )
    assert _volcano_state({}) == (S.PENDING, 0, "")
    assert _volcano_state({"status": None}) == (S.PENDING, 0, "")


def js(
    conds: list[tuple[str, str]] | None = None,
    suspend: bool = False,
    cancelled: bool = False,
    active: int = 0,
    ready: int = 0,
    restarts: int | None = None,
    msg: str = "",
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "message": msg} for t, s in conds or []],
        "replicatedJobsStatus": [{"name": "a", "active": active}, {"name": "b", "ready": ready}],
    }
    if restarts is not None:
        status["restarts"] = restarts
    return {
        "metadata": {"annotations": {CANCELLED_ANNOTATION: "true"} if cancelled else {}},
        "spec": {"suspend": suspend},
        "status": status,
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (js([("Completed", "True")], restarts=2, msg="done"), (S.SUCCEEDED, 2, "done")),
        (js([("Failed", "True")], restarts=1, msg="boom"), (S.FAILED, 1, "boom")),
        (js([("Completed", "True"), ("Failed", "True")]), (S.SUCCEEDED, 0, "")),
        (js([("Failed", "False")], active=1), (S.RUNNING, 0, "")),  # a condition that is not True
        (
            js([("Suspended", "True")], cancelled=True),
            (S.CANCELLED, 0, "cancelled (JobSet suspended)"),
        ),
        (js(suspend=True, cancelled=True), (S.CANCELLED, 0, "cancelled (JobSet suspended)")),
        (js(suspend=True), (S.PENDING, 0, "suspended (waiting for admission)")),
        (js([("Suspended", "False")], active=1), (S.RUNNING, 0, "")),
        (js(ready=1), (S.RUNNING, 0, "")),
        (js(active=0, ready=0), (S.PENDING, 0, "")),
        ({}, (S.PENDING, 0, "")),
    ],
)
def test_jobset_state(obj: dict[str, Any], expected: tuple) -> None:
    assert _jobset_state(obj) == expected


def test_volcano_task_states_need_a_counted_phase_and_our_labels() -> None:
    def task(name: str, role: str | None, rid: str) -> dict[str, Any]:
        labels = {pods.LABEL_REPLICA_ID: rid}
        if role:
            labels[pods.LABEL_ROLE_NAME] = role
        return {"name": name, "template": {"metadata": {"labels": labels}}}

    job = {
        "spec": {
            "tasks": [
                task("t0", "w", "0"),
                task("t1", "w", "1"),
                task("t2", None, "2"),
                task("t3", "w", "x"),
            ]
        },
        "status": {
            "taskStatusCount": {
                "t0": {"phase": {"Pending": 0, "Running": 1}},
                "t1": {"phase": {"Failed": 1}},
                "t2": {"phase": {"Running": 1}},
                "t3": {"phase": {"Running": 1}},
                "other": {"phase": {"Running": 1}},
                "t4": None,
            }
        },
    }
    assert _volcano_task_states(job) == {("w", 0): S.RUNNING, ("w", 1): S.FAILED}
    assert _volcano_task_states({}) == {}


def test_tolerations_for_gpus_and_from_capabilities() -> None:
    def role(gpu: int, caps: dict[str, Any]) -> specs.Role:
        return specs.Role(
            name="r", image="i", resource=specs.Resource(cpu=1, gpu=gpu, memMB=1, capabilities=caps)
        )

    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    extra = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert pods.tolerations(role(0, {})) == []
    assert pods.tolerations(role(2, {})) == [gpu_taint]
    assert pods.tolerations(role(1, {"tolerations": [extra, "not-a-dict"]})) == [gpu_taint, extra]
    assert pods.tolerations(role(0, {"tolerations": "spot"})) == []


def test_resource_requirements_devices_efa_and_gpus() -> None:
    res = specs.Resource(
        cpu=2,
        gpu=1,
        memMB=4096,
        devices={"vpc.amazonaws.com/efa": 2, "aws.amazon.com/neurondevice": 1},
    )
    role = specs.Role(name="r", image="i", resource=res)
    assert pods.resource_requirements(role) == {
        "limits": {
            "cpu": "2000m",
            "memory": "4096M",
            "nvidia.com/gpu": "1",
            "vpc.amazonaws.com/efa": "2",
            "aws.amazon.com/neurondevice": "1",
        },
        "requests": {"cpu": "1900m", "memory": "3072M", "nvidia.com/gpu": "1"},
    }
    assert pods.resource_requirements(role, efa_device_count=0)["limits"] == {
        "cpu": "2000m",
        "memory": "4096M",
        "nvidia.com/gpu": "1",
        "aws.amazon.com/neurondevice": "1",
    }
    assert (
        pods.resource_requirements(role, efa_device_count=4)["limits"]["vpc.amazonaws.com/efa"]
        == "4"
    )
    # a reserve larger than the resource never asks for a negative amount
    small = specs.Role(name="r", image="i", resource=specs.Resource(cpu=0.05, gpu=0, memMB=512))  # type: ignore[arg-type]
    assert pods.resource_requirements(small) == {
        "limits": {"cpu": "50m", "memory": "512M"},
        "requests": {"cpu": "0m", "memory": "0M"},
    }


def test_jobset_counts_active_and_ready_replicated_jobs() -> None:
    obj = {"status": {"replicatedJobsStatus": [{"name": "a", "active": 1, "ready": 1}]}}
    assert _jobset_state(obj) == (S.RUNNING, 0, "")
    done = {"status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    assert _jobset_state(done) == (S.SUCCEEDED, 0, "")
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True"}], "restarts": "2"}}
    assert _jobset_state(failed) == (S.FAILED, 2, "")


def test_volcano_tasks_without_a_name_or_replica_label_are_not_replicas() -> None:
    job = {
        "spec": {
            "tasks": [
                {
                    "template": {
                        "metadata": {
                            "labels": {pods.LABEL_ROLE_NAME: "w", pods.LABEL_REPLICA_ID: "0"}
                        }
                    }
                },
                {"name": "t1", "template": {"metadata": {"labels": {pods.LABEL_ROLE_NAME: "w"}}}},
            ]
        },
        "status": {
            "taskStatusCount": {"": {"phase": {"Running": 1}}, "t1": {"phase": {"Running": 1}}}
        },
    }
    # a nameless task is matched by its empty name only
    assert _volcano_task_states(job) == {("w", 0): S.RUNNING}
