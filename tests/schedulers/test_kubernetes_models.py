"""TorchX's public Kubernetes builders (``role_to_pod``, ``app_to_resource``, ``pod_labels``):
``kubernetes.client`` model objects in TorchX's layout."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes.client import models as m

from torchx_core import __version__, specs
from torchx_core.schedulers import kubernetes_scheduler as ks
from torchx_core.schedulers.api import UnsupportedFeatureError
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.specs.overlays import JOIN, set_overlay


def _role(**kwargs: Any) -> specs.Role:
    base: dict[str, Any] = {
        "name": "trainer_foo",
        "image": "pytorch/torchx:latest",
        "entrypoint": "main",
        "args": ["--app-id", specs.macros.app_id, "--rank0", specs.macros.rank0_env],
        "env": {"FOO": "bar", "POD_IP": f"{ks.PLACEHOLDER_FIELD_PATH}status.podIP"},
        "resource": specs.Resource(cpu=2, memMB=3000, gpu=4),
        "port_map": {"foo": 1234},
        "max_retries": 3,
        "mounts": [specs.BindMount(src_path="/src", dst_path="/dst", read_only=True)],
    }
    base.update(kwargs)
    return specs.Role(**base)


def test_role_to_pod_is_a_v1pod_in_torchx_layout() -> None:
    pod = ks.role_to_pod("name", _role(), service_account="sa")
    assert isinstance(pod, m.V1Pod)
    (c,) = pod.spec.containers
    assert c.name == "name"
    assert c.command == ["main", "--app-id", specs.macros.app_id, "--rank0", "${rank0_env}"]
    assert c.args is None
    assert c.resources == m.V1ResourceRequirements(
        limits={"cpu": "2000m", "memory": "3000M", "nvidia.com/gpu": "4"},
        requests={"cpu": "1900m", "memory": "1976M", "nvidia.com/gpu": "4"},
    )
    assert c.env == [
        m.V1EnvVar(name="FOO", value="bar"),
        m.V1EnvVar(
            name="POD_IP",
            value_from=m.V1EnvVarSource(
                field_ref=m.V1ObjectFieldSelector(field_path="status.podIP")
            ),
        ),
    ]
    assert c.ports == [m.V1ContainerPort(name="foo", container_port=1234)]
    assert c.security_context == m.V1SecurityContext()
    assert c.volume_mounts == [
        m.V1VolumeMount(name="dshm", mount_path="/dev/shm"),
        m.V1VolumeMount(name="mount-0", mount_path="/dst", read_only=True),
    ]
    assert pod.spec.service_account_name == "sa"
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.node_selector == {}
    assert pod.spec.volumes[1] == m.V1Volume(
        name="mount-0", host_path=m.V1HostPathVolumeSource(path="/src")
    )
    assert pod.metadata.annotations == {"sidecar.istio.io/inject": "false"}


def test_role_to_pod_mounts_reserve_efa_and_instance_type() -> None:
    role = _role(
        mounts=[
            specs.VolumeMount(src="claim", dst_path="/ckpt", read_only=False),
            specs.DeviceMount(src_path="/dev/a", dst_path="/dev/a", permissions="rm"),
            specs.DeviceMount(src_path="/dev/b", dst_path="/dev/b", permissions="r"),
        ],
        resource=specs.Resource(
            cpu=2,
            memMB=3000,
            gpu=0,
            devices={pods.EFA_DEVICE: 4},
            capabilities={ks.LABEL_INSTANCE_TYPE: "p4d.24xlarge"},
        ),
    )
    pod = ks.role_to_pod(
        "n", role, None, reserved_millicpu=0, reserved_memmb=1000, efa_device_count=8
    )
    volumes = pod.spec.volumes
    assert volumes[1].persistent_volume_claim == m.V1PersistentVolumeClaimVolumeSource(
        claim_name="claim"
    )
    # "m" (mknod) needs a writable device, as in TorchX
    assert [v.read_only for v in pod.spec.containers[0].volume_mounts[1:]] == [False, False, True]
    assert pod.spec.containers[0].security_context.privileged is True
    resources = pod.spec.containers[0].resources
    assert resources.requests == {"cpu": "2000m", "memory": "2000M"}
    assert resources.limits[pods.EFA_DEVICE] == "8"
    assert pod.spec.node_selector == {ks.LABEL_INSTANCE_TYPE: "p4d.24xlarge"}
    no_efa = ks.role_to_pod("n", role, None, efa_device_count=0)
    assert pods.EFA_DEVICE not in no_efa.spec.containers[0].resources.limits


def test_app_to_resource_one_task_per_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ks, "make_unique", lambda name: "App_Name-42")
    app = specs.AppDef("test", roles=[_role(num_replicas=3, min_replicas=2)])
    res = ks.app_to_resource(app, "q", service_account=None, priority_class="high")
    assert res["metadata"] == {"name": "appname-42"}  # normalize_str(make_unique(app.name))
    spec = res["spec"]
    assert (spec["queue"], spec["maxRetry"], spec["priorityClassName"]) == ("q", 3, "high")
    assert spec["plugins"] == {"svc": ["--publish-not-ready-addresses"], "env": []}
    tasks = spec["tasks"]
    assert [t["name"] for t in tasks] == ["trainerfoo-0", "trainerfoo-1", "trainerfoo-2"]
    assert [t["minAvailable"] for t in tasks] == [1, 1, 0]
    assert tasks[0]["policies"] == ks.RETRY_POLICIES[specs.RetryPolicy.APPLICATION]
    rank0, rank1 = (t["template"].spec.containers[0] for t in tasks[:2])
    assert rank0.command == ["main", "--app-id", "appname-42", "--rank0", "TORCHX_RANK0_HOST"]
    assert rank1.command[-1] == "VC_TRAINERFOO_0_HOSTS"
    assert m.V1EnvVar(name="TORCHX_RANK0_HOST", value="localhost") in rank0.env
    assert m.V1EnvVar(name="TORCHX_RANK0_HOST", value="localhost") not in rank1.env
    assert m.V1EnvVar(name="TORCHX_IMAGE", value="pytorch/torchx:latest") in rank1.env
    labels = tasks[1]["template"].metadata.labels
    assert labels[ks.LABEL_REPLICA_ID] == "1"
    assert labels[ks.LABEL_UNIQUE_NAME] == "appname-42"
    # the model objects serialize to the API's field names
    body: Any = ks.sanitize_for_serialization(res)
    assert body["spec"]["tasks"][0]["template"]["spec"]["restartPolicy"] == "Never"


def test_app_to_resource_retries_and_overlay() -> None:
    role = _role(max_retries=0)
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"gpu": "true"}}})
    res = ks.app_to_resource(specs.AppDef("t", roles=[role]), "q", service_account=None)
    (task,) = res["spec"]["tasks"]
    assert "policies" not in task and "maxRetry" not in task and "minAvailable" not in task
    assert "priorityClassName" not in res["spec"]
    assert task["template"].spec.node_selector == {"gpu": "true"}
    role.retry_policy = specs.RetryPolicy.ROLE
    with pytest.raises(UnsupportedFeatureError, match=r"RetryPolicy\.APPLICATION"):
        ks.app_to_resource(specs.AppDef("t", roles=[role]), "q", service_account=None)


def test_apply_pod_overlay_merges_containers_by_name_without_mutating_overlay() -> None:
    pod = m.V1Pod(
        spec=m.V1PodSpec(containers=[m.V1Container(name="main", image="a")]),
        metadata=m.V1ObjectMeta(name="p"),
    )
    overlay = {
        "spec": {
            JOIN("containers", on="name"): [
                {"name": "main", "image": "b"},
                {"name": "sidecar", "image": "c"},
            ],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        }
    }
    before = copy.deepcopy(overlay)
    ks._apply_pod_overlay(pod, overlay)
    assert overlay == before
    assert [(c.name, c.image) for c in pod.spec.containers] == [("main", "b"), ("sidecar", "c")]
    assert pod.spec.tolerations == [m.V1Toleration(key="k", operator="Exists")]


def test_pod_labels_clean_values_as_torchx() -> None:
    """TorchX turns each character a label value cannot hold into ``.`` (``foo+bar`` ->
    ``foo.bar``); the ends stay alphanumeric so the API server accepts the label."""
    app = specs.AppDef(name="foo+bar", roles=[specs.Role(name="a/b", image="x")])
    assert ks.pod_labels(app, 0, app.roles[0], 1, "foobar-1") == {
        ks.LABEL_VERSION: pods.label_value(__version__),
        ks.LABEL_APP_NAME: "foo.bar",
        ks.LABEL_ROLE_INDEX: "0",
        ks.LABEL_ROLE_NAME: "a.b",
        ks.LABEL_REPLICA_ID: "1",
        ks.LABEL_KUBE_APP_NAME: "foo.bar",
        ks.LABEL_ORGANIZATION: "torchx.pytorch.org",
        ks.LABEL_UNIQUE_NAME: "foobar-1",
    }
    assert pods.label_value("+a b+") == "a.b"
