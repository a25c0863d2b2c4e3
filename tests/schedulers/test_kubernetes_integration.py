"""The kubernetes schedulers through the official client against an API emulator on loopback.

The emulator runs no controllers, so each test plays the controller: it writes the job status and
creates the pods a Volcano/JobSet/MCAD controller would, then checks what our scheduler reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from torchx_core import specs
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes.mcad import create_scheduler as create_mcad
from torchx_core.schedulers.kubernetes.scheduler import create_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes]


def _app(n: int = 2) -> specs.AppDef:
    return specs.AppDef(
        name="trainer-app",
        roles=[
            specs.Role(
                name="trainer",
                image="busybox",
                entrypoint="echo",
                args=["replica", specs.macros.replica_id],
                num_replicas=n,
                resource=specs.resource(cpu=1, memMB=256),
            )
        ],
    )


@pytest.fixture
def clients(k8s_emulator: Any) -> Iterator[tuple[Any, Any, Any]]:
    from kubernetes import client

    api = k8s_emulator.api_client()
    yield api, client.CustomObjectsApi(api), client.CoreV1Api(api)
    api.close()


def _create_pods_like_a_controller(
    core: Any, namespace: str, pod_dicts: list[dict[str, Any]]
) -> None:
    for pod in pod_dicts:
        core.create_namespaced_pod(namespace, pod)


def _set_pod_phase(core: Any, namespace: str, name: str, phase: str) -> None:
    core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": phase}})


def test_volcano_submit_describe_list_logs_cancel_delete(k8s_emulator: Any, clients: Any) -> None:
    api, custom, core = clients
    sched = create_scheduler("it", client=api)
    app_id = sched.submit(_app(), {"namespace": "default", "queue": "default"})
    namespace, name = pods.parse_app_id(app_id)
    assert namespace == "default"

    stored = custom.get_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", namespace, "jobs", name
    )
    assert [t["name"] for t in stored["spec"]["tasks"]] == ["trainer-0", "trainer-1"]

    # before the controller acts: known, pending
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.PENDING
    assert [len(r.replicas) for r in desc.roles_statuses] == [2]

    # the controller starts the pods and marks the job running
    pod_dicts = []
    for task in stored["spec"]["tasks"]:
        tmpl = task["template"]
        pod_dicts.append({"apiVersion": "v1", "kind": "Pod", **tmpl})
    _create_pods_like_a_controller(core, namespace, pod_dicts)
    custom.patch_namespaced_custom_object(
        "batch.volcano.sh",
        "v1alpha1",
        namespace,
        "jobs",
        name,
        {"status": {"state": {"phase": "Running"}, "retryCount": 1}},
    )
    _set_pod_phase(core, namespace, f"{name}-trainer-0", "Running")
    _set_pod_phase(core, namespace, f"{name}-trainer-1", "Succeeded")
    desc = sched.describe(app_id)
    assert desc is not None
    assert desc.state == specs.AppState.RUNNING and desc.num_restarts == 1
    states = [r.state for r in desc.roles_statuses[0].replicas]
    assert states == [specs.AppState.RUNNING, specs.AppState.SUCCEEDED]

    listed = {r.app_id: r.state for r in sched.list({"namespace": namespace})}
    assert listed[app_id] == specs.AppState.RUNNING

    k8s_emulator.add_log(namespace, f"{name}-trainer-1", "start\nreplica 1\nloss=0.5\n")
    assert list(sched.log_iter(app_id, "trainer", k=1)) == ["start\n", "replica 1\n", "loss=0.5\n"]
    assert list(sched.log_iter(app_id, "trainer", k=1, regex="loss")) == ["loss=0.5\n"]

    # cancel aborts through a Volcano bus Command and keeps the job
    sched.cancel(app_id)
    commands = custom.list_namespaced_custom_object(
        "bus.volcano.sh", "v1alpha1", namespace, "commands"
    )
    mine = [c for c in commands["items"] if c["target"]["name"] == name]
    assert len(mine) == 1 and mine[0]["action"] == "AbortJob"
    custom.patch_namespaced_custom_object(
        "batch.volcano.sh",
        "v1alpha1",
        namespace,
        "jobs",
        name,
        {"status": {"state": {"phase": "Aborted"}}},
    )
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.CANCELLED

    sched.delete(app_id)
    assert sched.describe(app_id) is None
    sched.cancel(app_id)  # idempotent on a gone app


def test_jobset_lifecycle(k8s_emulator: Any, clients: Any) -> None:
    api, custom, core = clients
    sched = create_scheduler("it", client=api)
    app_id = sched.submit(_app(3), {"job_kind": "jobset", "queue": "team-q"})
    namespace, name = pods.parse_app_id(app_id)
    js = custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name
    )
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-q"

    # the job controller creates indexed pods, annotated with their completion index
    tmpl = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    for i in range(3):
        pod = {"apiVersion": "v1", "kind": "Pod", **tmpl}
        pod["metadata"] = {
            **tmpl["metadata"],
            "name": f"{name}-trainer-0-{i}-x{i}",
            "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
        }
        core.create_namespaced_pod(namespace, pod)
        _set_pod_phase(core, namespace, pod["metadata"]["name"], "Running")
    custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        namespace,
        "jobsets",
        name,
        {"status": {"replicatedJobsStatus": [{"name": "trainer", "active": 1}]}},
    )
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.RUNNING
    assert [r.state for r in desc.roles_statuses[0].replicas] == [specs.AppState.RUNNING] * 3

    k8s_emulator.add_log(namespace, f"{name}-trainer-0-2-x2", "hello from 2\n")
    assert list(sched.log_iter(app_id, "trainer", k=2)) == ["hello from 2\n"]

    sched.cancel(app_id)  # suspends and marks, keeps the object
    js = custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name
    )
    assert js["spec"]["suspend"] is True
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.CANCELLED

    sched.delete(app_id)
    assert sched.describe(app_id) is None


def test_jobset_completion(k8s_emulator: Any, clients: Any) -> None:
    api, custom, _ = clients
    sched = create_scheduler("it", client=api)
    app_id = sched.submit(_app(1), {"job_kind": "jobset"})
    _, name = pods.parse_app_id(app_id)
    custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        "default",
        "jobsets",
        name,
        {"status": {"conditions": [{"type": "Completed", "status": "True", "message": "done"}]}},
    )
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.SUCCEEDED
    assert [r.state for r in desc.roles_statuses[0].replicas] == [specs.AppState.SUCCEEDED]
    sched.delete(app_id)


_OBJECTS = {
    "volcano": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "jobset": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "mcad": ("workload.codeflare.dev", "v1beta1", "appwrappers"),
}


@pytest.mark.parametrize("kind", sorted(_OBJECTS))
def test_owner_annotation(k8s_emulator: Any, clients: Any, kind: str) -> None:
    api, custom, _ = clients
    make = create_mcad if kind == "mcad" else create_scheduler
    cfg = {} if kind == "mcad" else {"job_kind": kind}
    sched = make("it", client=api)
    app_id = sched.submit(_app(1), cfg)
    namespace, name = pods.parse_app_id(app_id)
    assert sched.get_owner(app_id) is None
    assert sched.set_owner(app_id, "airflow:dag/task/run/-1#try=1") is True
    other = make("another-process", client=api)
    assert other.get_owner(app_id) == "airflow:dag/task/run/-1#try=1"
    assert other.set_owner(app_id, "airflow:dag/task/run/-1#try=2") is True
    assert sched.get_owner(app_id) == "airflow:dag/task/run/-1#try=2"
    obj = custom.get_namespaced_custom_object(
        *_OBJECTS[kind][:2], namespace, _OBJECTS[kind][2], name
    )
    assert (
        obj["metadata"]["annotations"]["torchx.pytorch.org/owner"]
        == "airflow:dag/task/run/-1#try=2"
    )
    sched.delete(app_id)
    assert sched.set_owner(app_id, "me") is False and sched.get_owner(app_id) is None


def test_unknown_app_is_none(clients: Any) -> None:
    api, _, _ = clients
    assert create_scheduler("it", client=api).describe("default:does-not-exist") is None
    assert create_mcad("it", client=api).describe("default:does-not-exist") is None


def test_mcad_lifecycle(clients: Any) -> None:
    api, custom, core = clients
    sched = create_mcad("it", client=api)
    app_id = sched.submit(_app(2), {"priority": 7})
    namespace, name = pods.parse_app_id(app_id)
    aw = custom.get_namespaced_custom_object(
        "workload.codeflare.dev", "v1beta1", namespace, "appwrappers", name
    )
    assert aw["spec"]["priority"] == 7
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.SUBMITTED

    # MCAD dispatches: creates the wrapped pods and reports Running
    for item in aw["spec"]["resources"]["GenericItems"]:
        if item["generictemplate"]["kind"] == "Pod":
            core.create_namespaced_pod(namespace, item["generictemplate"])
    _set_pod_phase(core, namespace, f"{name}-trainer-0", "Running")
    _set_pod_phase(core, namespace, f"{name}-trainer-1", "Failed")
    custom.patch_namespaced_custom_object(
        "workload.codeflare.dev",
        "v1beta1",
        namespace,
        "appwrappers",
        name,
        {"status": {"state": "Running"}},
    )
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == specs.AppState.RUNNING
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        specs.AppState.RUNNING,
        specs.AppState.FAILED,
    ]
    assert app_id in {r.app_id for r in sched.list()}
    sched.cancel(app_id)
    assert sched.describe(app_id) is None


def test_through_the_runner(clients: Any) -> None:
    from torchx_core.runner import get_runner

    api, custom, _ = clients
    with get_runner("it", client=api) as runner:
        handle = runner.run(_app(1), scheduler="kubernetes", cfg={"namespace": "default"})
        assert handle.startswith("kubernetes://it/default:")
        status = runner.status(handle)
        assert status is not None and status.state == specs.AppState.PENDING
        _, name = pods.parse_app_id(handle.rsplit("/", 1)[1])
        custom.patch_namespaced_custom_object(
            "batch.volcano.sh",
            "v1alpha1",
            "default",
            "jobs",
            name,
            {"status": {"state": {"phase": "Completed"}}},
        )
        final = runner.wait(handle, wait_interval=0.01)
        assert final is not None and final.state == specs.AppState.SUCCEEDED
        assert handle in {r.app_handle for r in runner.list("kubernetes")}
        runner.delete(handle)
        assert runner.status(handle) is None


def test_describe_many_lists_once_per_kind_and_namespace(k8s_emulator: Any, clients: Any) -> None:
    api, custom, core = clients
    sched = create_scheduler("it", client=api)
    volcano = sched.submit(_app(2), {"namespace": "default", "queue": "default"})
    jobset = sched.submit(_app(1), {"namespace": "default", "job_kind": "jobset"})
    ns, vname = pods.parse_app_id(volcano)
    stored = custom.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", vname)
    _create_pods_like_a_controller(
        core,
        ns,
        [{"apiVersion": "v1", "kind": "Pod", **t["template"]} for t in stored["spec"]["tasks"]],
    )
    _set_pod_phase(core, ns, f"{vname}-trainer-0", "Running")
    _set_pod_phase(core, ns, f"{vname}-trainer-1", "Failed")
    custom.patch_namespaced_custom_object(
        "batch.volcano.sh",
        "v1alpha1",
        ns,
        "jobs",
        vname,
        {"status": {"state": {"phase": "Running"}}},
    )
    calls: list[str] = []
    real_custom, real_pods = custom.list_namespaced_custom_object, core.list_namespaced_pod
    from kubernetes import client as k8s

    def list_custom(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(f"list:{args[3]}")
        return real_custom(*args, **kwargs)

    def list_pods(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append("pods")
        return real_pods(*args, **kwargs)

    orig = k8s.CustomObjectsApi.list_namespaced_custom_object, k8s.CoreV1Api.list_namespaced_pod
    k8s.CustomObjectsApi.list_namespaced_custom_object = list_custom  # type: ignore[method-assign]
    k8s.CoreV1Api.list_namespaced_pod = list_pods  # type: ignore[method-assign]
    try:
        many = sched.describe_many([volcano, jobset, "default:no-such-app"])
    finally:
        k8s.CustomObjectsApi.list_namespaced_custom_object, k8s.CoreV1Api.list_namespaced_pod = orig
    assert sorted(calls) == ["list:jobs", "list:jobsets", "pods"]
    assert many["default:no-such-app"] is None
    assert many[volcano] == sched.describe(volcano)
    assert [r.state for r in many[volcano].roles_statuses[0].replicas] == [
        specs.AppState.RUNNING,
        specs.AppState.FAILED,
    ]
    assert many[jobset] == sched.describe(jobset)
    for app_id in (volcano, jobset):
        sched.delete(app_id)


def test_submitting_an_existing_name_is_a_value_error(k8s_emulator: Any, clients: Any) -> None:
    from torchx_core.schedulers.kubernetes._client import KubernetesJobExistsError

    api, _, _ = clients
    sched = create_scheduler("it", client=api)
    info = sched.submit_dryrun(_app(), {"namespace": "default"})
    app_id = sched.schedule(info)
    with pytest.raises(KubernetesJobExistsError, match="already exists") as e:
        sched.schedule(info)  # the same request (same name) again: HTTP 409 from the server
    assert isinstance(e.value, ValueError)
    sched.delete(app_id)
    assert sched.describe(app_id) is None
