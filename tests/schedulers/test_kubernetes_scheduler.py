"""Unit tests of the kubernetes and kubernetes_mcad schedulers: pure dry runs, validated."""

from __future__ import annotations

from typing import Any

import pytest
from golden_files import check_golden
from k8s_schemas import errors

from torchx_core import specs
from torchx_core.schedulers.api import UnsupportedFeatureError
from torchx_core.schedulers.kubernetes import _pods as pods
from torchx_core.schedulers.kubernetes._pods import parse_app_id
from torchx_core.schedulers.kubernetes.mcad import create_scheduler as create_mcad
from torchx_core.schedulers.kubernetes.scheduler import (
    VOLCANO_STATES,
    _jobset_state,
    _volcano_state,
    create_scheduler,
)
from torchx_core.specs.errors import InvalidOverlayError
from torchx_core.specs.overlays import JOIN, set_overlay


def _app(**role_kwargs: object) -> specs.AppDef:
    trainer = specs.Role(
        name="Trainer_main",
        image="ghcr.io/org/train:1",
        entrypoint="python",
        args=["-m", "train", "--replica", specs.macros.replica_id, "--app", specs.macros.app_id],
        env={"RANK0": specs.macros.rank0_env, "LR": "0.1"},
        num_replicas=3,
        min_replicas=2,
        max_retries=2,
        resource=specs.Resource(
            cpu=4,
            gpu=2,
            memMB=8192,
            capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
            devices={"vpc.amazonaws.com/efa": 1},
        ),
        port_map={"tensorboard": 6006},
        mounts=specs.parse_mounts(
            [
                "type=bind,src=/data,dst=/mnt/data,readonly",
                "type=volume,src=my-pvc,dst=/ckpt",
                "type=device,src=/dev/fuse,dst=/dev/fuse",
            ]
        ),
        **role_kwargs,  # type: ignore[arg-type]
    )
    ps = specs.Role(
        name="ps", image="ghcr.io/org/ps:1", entrypoint="ps", resource=specs.resource(h="cpu.small")
    )
    return specs.AppDef(name="My Train", roles=[trainer, ps])


CFG_COMMON = {
    "namespace": "ml",
    "service_account": "trainer-sa",
    "image_pull_secrets": ["regcred"],
    "priority_class": "high",
}


def test_volcano_job_one_task_per_replica_and_validates() -> None:
    info = create_scheduler("s").submit_dryrun(_app(), {**CFG_COMMON, "queue": "gpu"})
    job = info.request.resource
    assert errors(job) == []
    spec = job["spec"]
    assert [t["name"] for t in spec["tasks"]] == [
        "trainer-main-0",
        "trainer-main-1",
        "trainer-main-2",
        "ps-0",
    ]
    assert spec["queue"] == "gpu" and spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == 2 + 1  # elastic min_replicas of the trainer + the ps
    assert [t["minAvailable"] for t in spec["tasks"]] == [1, 1, 0, 1]
    assert spec["maxRetry"] == 2
    assert spec["tasks"][0]["policies"] == [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]
    assert "svc" in spec["plugins"]
    for task in spec["tasks"]:
        pod = {"apiVersion": "v1", "kind": "Pod", **task["template"]}
        assert errors(pod) == []


def test_volcano_pod_contents() -> None:
    info = create_scheduler("s").submit_dryrun(_app(), CFG_COMMON)
    app_id = info.request.name
    task = info.request.resource["spec"]["tasks"][1]
    pod_spec = task["template"]["spec"]
    (c,) = pod_spec["containers"]
    assert c["command"] == ["python"]
    assert c["args"] == ["-m", "train", "--replica", "1", "--app", app_id]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["RANK0"] == "TORCHX_RANK0_HOST"
    assert env["TORCHX_RANK0_HOST"] == f"{app_id}-trainer-main-0-0.{app_id}"
    assert c["resources"]["limits"] == {
        "cpu": "4000m",
        "memory": "8192M",
        "nvidia.com/gpu": "2",
        "vpc.amazonaws.com/efa": "1",
    }
    assert c["resources"]["requests"] == {"cpu": "3900m", "memory": "7168M", "nvidia.com/gpu": "2"}
    assert c["ports"] == [{"name": "tensorboard", "containerPort": 6006}]
    assert c["securityContext"] == {"privileged": True}  # device mount
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert set(mounts) == {"/dev/shm", "/mnt/data", "/ckpt", "/dev/fuse"}
    assert mounts["/mnt/data"]["readOnly"] is True
    vols = {v["name"]: v for v in pod_spec["volumes"]}
    assert vols["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    assert {"claimName": "my-pvc", "readOnly": False} in [
        v.get("persistentVolumeClaim") for v in vols.values()
    ]
    assert pod_spec["serviceAccountName"] == "trainer-sa"
    assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod_spec["priorityClassName"] == "high"
    assert pod_spec["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec[
        "tolerations"
    ]
    labels = task["template"]["metadata"]["labels"]
    assert labels[pods.LABEL_REPLICA_ID] == "1" and labels[pods.LABEL_ROLE_NAME] == "Trainer_main"


def test_replica_retry_policy_maps_to_restart_task() -> None:
    info = create_scheduler("s").submit_dryrun(_app(retry_policy=specs.RetryPolicy.REPLICA), {})
    actions = {p["action"] for p in info.request.resource["spec"]["tasks"][0]["policies"]}
    assert actions == {"RestartTask"}


def test_role_retry_policy_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"RetryPolicy.ROLE.*APPLICATION.*REPLICA"):
        create_scheduler("s").submit_dryrun(_app(retry_policy=specs.RetryPolicy.ROLE), {})


def test_jobset_mode_validates_and_carries_kueue_label() -> None:
    info = create_scheduler("s").submit_dryrun(
        _app(), {**CFG_COMMON, "job_kind": "jobset", "queue": "team-a"}
    )
    js = info.request.resource
    assert errors(js) == []
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    app_id = js["metadata"]["name"]
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": app_id}
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2}
    rj = js["spec"]["replicatedJobs"][0]
    job_spec = rj["template"]["spec"]
    assert (job_spec["parallelism"], job_spec["completions"], job_spec["completionMode"]) == (
        3,
        3,
        "Indexed",
    )
    (c,) = job_spec["template"]["spec"]["containers"]
    assert c["env"][0]["name"] == "TORCHX_REPLICA_ID"  # defined before anything references it
    assert "$(TORCHX_REPLICA_ID)" in c["args"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["TORCHX_RANK0_HOST"] == f"{app_id}-trainer-main-0-0.{app_id}"
    assert "schedulerName" not in job_spec["template"]["spec"]  # no Volcano needed


def test_jobset_replica_policy_uses_job_backoff() -> None:
    info = create_scheduler("s").submit_dryrun(
        _app(retry_policy=specs.RetryPolicy.REPLICA), {"job_kind": "jobset"}
    )
    js = info.request.resource
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 0
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 2


def test_unknown_job_kind_and_unknown_option() -> None:
    from torchx_core.specs.errors import InvalidRunConfigException

    with pytest.raises(InvalidRunConfigException, match="jobset"):
        create_scheduler("s").submit_dryrun(_app(), {"job_kind": "mpijob"})
    with pytest.raises(InvalidRunConfigException):
        create_scheduler("s").submit_dryrun(_app(), {"namespace": 3})


def test_pod_overlay_applies_and_blocks_containers() -> None:
    app = _app()
    set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"hostNetwork": True}})
    info = create_scheduler("s").submit_dryrun(app, {})
    tmpl = info.request.resource["spec"]["tasks"][0]["template"]
    assert tmpl["spec"]["hostNetwork"] is True
    assert errors(info.request.resource) == []

    bad = _app()
    set_overlay(bad.roles[0], "kubernetes", "V1Pod", {"spec": {"containers": [{"name": "x"}]}})
    with pytest.raises(ValueError, match="containers"):
        create_scheduler("s").submit_dryrun(bad, {})


def test_pod_overlay_merges_fields_into_the_container_by_name_as_torchx() -> None:
    """As TorchX: Volcano containers are named ``<role>-<replica>`` and a V1Pod overlay may
    JOIN fields (probes) into one by name; it may not add a container or set a Role field."""
    probe = {"httpGet": {"path": "/health", "port": 8080}, "initialDelaySeconds": 30}
    app = _app()
    join = {
        JOIN("containers", on="name"): [
            {"name": "trainer-main-${replica_id}", "livenessProbe": probe}
        ]
    }
    set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": join})
    info = create_scheduler("s").submit_dryrun(app, {})
    tasks = info.request.resource["spec"]["tasks"]
    containers = [t["template"]["spec"]["containers"] for t in tasks]
    assert [[c["name"] for c in cs] for cs in containers] == [
        ["trainer-main-0"],
        ["trainer-main-1"],
        ["trainer-main-2"],
        ["ps-0"],
    ]
    containers = containers[:3]  # the trainer's
    assert all(cs[0]["livenessProbe"] == probe and cs[0]["image"] for cs in containers)
    assert errors(info.request.resource) == []

    for entry, message in [
        ({"name": "trainer-main-0", "livenessProbe": probe}, "names no container"),  # replica 1
        ({"name": "sidecar", "image": "x"}, "cannot add one"),
        ({"name": "trainer-main-${replica_id}", "image": "x"}, r"sets \['image'\]"),
    ]:
        bad = _app()
        set_overlay(
            bad.roles[0], "kubernetes", "V1Pod", {"spec": {JOIN("containers", on="name"): [entry]}}
        )
        with pytest.raises(InvalidOverlayError, match=message):
            create_scheduler("s").submit_dryrun(bad, {})


def test_job_overlay() -> None:
    app = _app()
    set_overlay(app, "kubernetes", "VolcanoJob", {"spec": {"ttlSecondsAfterFinished": 60}})
    info = create_scheduler("s").submit_dryrun(app, {})
    assert info.request.resource["spec"]["ttlSecondsAfterFinished"] == 60


def test_dryrun_prints_yaml_of_the_request() -> None:
    info = create_scheduler("s").submit_dryrun(_app(), {})
    text = str(info)
    assert text.startswith("apiVersion: batch.volcano.sh/v1alpha1")
    assert "trainer-main-2" in text


def test_names_are_dns_safe_and_unique() -> None:
    s = create_scheduler("s")
    names = {s.submit_dryrun(_app(), {}).request.name for _ in range(50)}
    assert len(names) == 50
    assert all(len(n) <= 63 and n == pods.dns_label(n) for n in names)


def test_app_id_parsing() -> None:
    assert parse_app_id("ns:job") == ("ns", "job")
    assert parse_app_id("job") == ("default", "job")
    with pytest.raises(ValueError, match="namespace"):
        parse_app_id(":job")


# Volcano job phases (volcano.sh batch/v1alpha1 JobPhase), written independently of VOLCANO_STATES.
# A torchx cancel aborts the job, so Aborting/Aborted are CANCELLED, not FAILED.
VOLCANO_EXPECTED = {
    "Pending": specs.AppState.PENDING,
    "Running": specs.AppState.RUNNING,
    "Restarting": specs.AppState.RUNNING,
    "Completing": specs.AppState.RUNNING,
    "Terminating": specs.AppState.RUNNING,
    "Completed": specs.AppState.SUCCEEDED,
    "Aborting": specs.AppState.CANCELLED,
    "Aborted": specs.AppState.CANCELLED,
    "Terminated": specs.AppState.FAILED,
    "Failed": specs.AppState.FAILED,
}
# Pod phases (core/v1 PodStatus.phase); Volcano counts its tasks' pods under the same names.
POD_EXPECTED = {
    "Pending": specs.AppState.PENDING,
    "Running": specs.AppState.RUNNING,
    "Succeeded": specs.AppState.SUCCEEDED,
    "Failed": specs.AppState.FAILED,
    "Unknown": specs.AppState.UNKNOWN,
}
# MCAD AppWrapper status.state ("" before MCAD has looked at the wrapper).
MCAD_EXPECTED = {
    "": specs.AppState.SUBMITTED,
    "Pending": specs.AppState.PENDING,
    "Running": specs.AppState.RUNNING,
    "Completed": specs.AppState.SUCCEEDED,
    "Failed": specs.AppState.FAILED,
    "Deleted": specs.AppState.CANCELLED,
}


def test_state_tables_are_the_documented_ones() -> None:
    from torchx_core.schedulers.kubernetes.mcad import MCAD_STATES
    from torchx_core.schedulers.kubernetes.scheduler import VOLCANO_TASK_STATES

    assert VOLCANO_STATES == VOLCANO_EXPECTED
    assert VOLCANO_TASK_STATES == POD_EXPECTED
    assert pods.POD_PHASE_STATES == POD_EXPECTED
    assert MCAD_STATES == MCAD_EXPECTED


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        *sorted(VOLCANO_EXPECTED.items()),
        ("", specs.AppState.PENDING),
        ("Weird", specs.AppState.UNKNOWN),
    ],
)
def test_volcano_state_table(phase: str, expected: specs.AppState) -> None:
    obj = {"status": {"state": {"phase": phase}, "retryCount": 2}}
    assert _volcano_state(obj)[:2] == (expected, 2)


@pytest.mark.parametrize(("phase", "expected"), sorted(POD_EXPECTED.items()))
def test_volcano_task_phases(phase: str, expected: specs.AppState) -> None:
    from torchx_core.schedulers.kubernetes.scheduler import _volcano_task_states

    job = create_scheduler("s").submit_dryrun(_app(), {}).request.resource
    job["status"] = {"taskStatusCount": {"trainer-main-0": {"phase": {phase: 1}}}}
    assert _volcano_task_states(job) == {("Trainer_main", 0): expected}


@pytest.mark.parametrize(
    ("cpu", "quantity"),
    [(0.5, "500m"), (0.25, "250m"), (0.001, "1m"), (1, "1"), (1.5, "1500m"), (4, "4"), (2.0, "2")],
)
def test_cpu_quantity_keeps_millicores(cpu: float, quantity: str) -> None:
    assert pods.cpu_quantity(cpu) == quantity


def test_fractional_cpu_reaches_requests_and_limits() -> None:
    role = specs.Role(name="r", image="i", resource=specs.Resource(cpu=0.5, gpu=0, memMB=2048))  # type: ignore[arg-type]
    # limits are the resource; requests keep the node's reserve (100m cpu, 1024M memory) back
    assert pods.resource_requirements(role) == {
        "limits": {"cpu": "500m", "memory": "2048M"},
        "requests": {"cpu": "400m", "memory": "1024M"},
    }
    role.resource = specs.Resource(cpu=1.25, gpu=0, memMB=512)  # type: ignore[arg-type]
    assert pods.resource_requirements(role, reserved_millicpu=0, reserved_memmb=0) == {
        "limits": {"cpu": "1250m", "memory": "512M"},
        "requests": {"cpu": "1250m", "memory": "512M"},
    }
    assert pods.resource_requirements(specs.Role(name="r", image="i")) == {}


def test_jobset_states() -> None:
    def js(
        conds: list[str], suspend: bool = False, cancelled: bool = False, active: int = 0
    ) -> dict:
        return {
            "metadata": {
                "annotations": {"torchx.pytorch.org/cancelled": "true"} if cancelled else {}
            },
            "spec": {"suspend": suspend},
            "status": {
                "conditions": [{"type": c, "status": "True"} for c in conds],
                "replicatedJobsStatus": [{"name": "a", "active": active}],
            },
        }

    assert _jobset_state(js(["Completed"]))[0] == specs.AppState.SUCCEEDED
    assert _jobset_state(js(["Failed"]))[0] == specs.AppState.FAILED
    assert _jobset_state(js([], suspend=True, cancelled=True))[0] == specs.AppState.CANCELLED
    # Kueue keeps a JobSet suspended until it is admitted: that is pending, not cancelled
    assert _jobset_state(js(["Suspended"]))[0] == specs.AppState.PENDING
    assert _jobset_state(js([], active=2))[0] == specs.AppState.RUNNING
    assert _jobset_state(js([]))[0] == specs.AppState.PENDING


def test_mcad_app_wrapper_validates() -> None:
    info = create_mcad("s").submit_dryrun(
        _app(),
        {**CFG_COMMON, "priority": 5, "coscheduler_name": "scheduler-plugins", "max_requeues": 3},
    )
    aw = info.request.resource
    assert errors(aw) == []
    items = aw["spec"]["resources"]["GenericItems"]
    kinds = [i["generictemplate"]["kind"] for i in items]
    assert kinds == ["Pod"] * 4 + ["Service", "PodGroup"]
    assert aw["spec"]["priority"] == 5
    assert aw["spec"]["schedulingSpec"]["requeuing"]["maxNumRequeuings"] == 3
    app_id = aw["metadata"]["name"]
    pod0 = items[0]["generictemplate"]
    assert pod0["spec"]["hostname"] == f"{app_id}-trainer-main-0"
    assert pod0["spec"]["subdomain"] == app_id
    assert pod0["spec"]["schedulerName"] == "scheduler-plugins"
    svc = items[4]["generictemplate"]
    assert svc["spec"]["clusterIP"] == "None"


def test_mcad_rejects_replica_retries() -> None:
    with pytest.raises(UnsupportedFeatureError, match="APPLICATION"):
        create_mcad("s").submit_dryrun(_app(retry_policy=specs.RetryPolicy.REPLICA), {})


def test_dryrun_needs_no_kubernetes_import() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from torchx_core import specs;"
        "from torchx_core.schedulers.kubernetes.scheduler import create_scheduler;"
        "res = specs.resource(cpu=1, memMB=64);"
        "app = specs.AppDef('a', [specs.Role('r', image='i', entrypoint='e', resource=res)]);"
        "create_scheduler('s').submit_dryrun(app, {});"
        "print('kubernetes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_volcano_task_status_counts() -> None:
    from torchx_core.schedulers.kubernetes.scheduler import _volcano_task_states

    job = create_scheduler("s").submit_dryrun(_app(), {}).request.resource
    job["status"] = {
        "taskStatusCount": {
            "trainer-main-0": {"phase": {"Succeeded": 1}},
            "trainer-main-1": {"phase": {"Failed": 1}},
            "trainer-main-2": {"phase": {"Running": 0}},
        }
    }
    assert _volcano_task_states(job) == {
        ("Trainer_main", 0): specs.AppState.SUCCEEDED,
        ("Trainer_main", 1): specs.AppState.FAILED,
    }


def test_namespace_from_kubeconfig_context(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    cfg = Path(str(tmp_path)) / "kubeconfig"
    cfg.write_text(
        "current-context: dev\n"
        "contexts:\n"
        "  - name: dev\n    context: {cluster: c, namespace: team-dev}\n"
        "  - name: prod\n    context: {cluster: c, namespace: team-prod}\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(cfg))
    sched = create_scheduler("s")
    assert sched.submit_dryrun(_app(), {}).request.namespace == "team-dev"
    assert sched.submit_dryrun(_app(), {"context": "prod"}).request.namespace == "team-prod"
    assert sched.submit_dryrun(_app(), {"namespace": "explicit"}).request.namespace == "explicit"
    monkeypatch.setenv("KUBECONFIG", str(cfg) + ".missing")
    assert sched.submit_dryrun(_app(), {}).request.namespace == "default"


def _whole_node_app() -> specs.AppDef:
    role = specs.Role(
        name="trainer",
        image="ghcr.io/org/train:1",
        entrypoint="python",
        args=["-m", "train"],
        num_replicas=2,
        resource=specs.resource(h="aws_p4d.24xlarge"),
    )
    return specs.AppDef(name="whole_node", roles=[role])


def test_pod_resources_leave_the_node_reserve_as_torchx() -> None:
    """Migration break 3: TorchX requests = limits minus the node reserve (100 millicpu,
    1024 MB) with memory in ``M``, so a pod sized to a whole node (aws_p4d.24xlarge) is
    schedulable; devices are limits only."""
    info = create_scheduler("s").submit_dryrun(_whole_node_app(), {"queue": "q"})
    (c,) = info.request.resource["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert c["resources"] == {
        "limits": {
            "cpu": "96000m",
            "memory": "1132416M",
            "nvidia.com/gpu": "8",
            "vpc.amazonaws.com/efa": "4",
        },
        "requests": {"cpu": "95900m", "memory": "1131392M", "nvidia.com/gpu": "8"},
    }
    cfg = {"queue": "q", "reserved_millicpu": 2000, "reserved_memmb": 0, "efa_device_count": 0}
    info = create_scheduler("s").submit_dryrun(_whole_node_app(), cfg)
    (c,) = info.request.resource["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert c["resources"]["requests"] == {
        "cpu": "94000m",
        "memory": "1132416M",
        "nvidia.com/gpu": "8",
    }
    assert "vpc.amazonaws.com/efa" not in c["resources"]["limits"]


@pytest.mark.parametrize("kind", ["volcano", "jobset"])
def test_pod_labels_and_annotations_are_torchx_ones(kind: str) -> None:
    """Migration break 3: label selectors written for TorchX jobs keep matching."""
    from torchx_core import __version__

    info = create_scheduler("s").submit_dryrun(_whole_node_app(), {"queue": "q", "job_kind": kind})
    app_id = info.request.name
    text = str(info)
    metas = [t["template"]["metadata"] for t in info.request.resource["spec"].get("tasks", [])]
    if kind == "jobset":
        rjobs = info.request.resource["spec"]["replicatedJobs"]
        metas = [rj["template"]["spec"]["template"]["metadata"] for rj in rjobs]
    assert metas and "sidecar.istio.io/inject" in text
    for meta in metas:
        labels = meta["labels"]
        assert {
            k: v
            for k, v in labels.items()
            if k.startswith(("torchx.pytorch.org/", "app.kubernetes.io/"))
        } | {pods.LABEL_REPLICA_ID: "0"} == {
            "torchx.pytorch.org/version": __version__,
            "torchx.pytorch.org/app-name": "whole_node",
            "torchx.pytorch.org/role-index": "0",
            "torchx.pytorch.org/role-name": "trainer",
            "torchx.pytorch.org/replica-id": "0",
            "app.kubernetes.io/name": "whole_node",
            "app.kubernetes.io/managed-by": "torchx.pytorch.org",
            "app.kubernetes.io/instance": app_id,
        }
        assert meta["annotations"]["sidecar.istio.io/inject"] == "false"


def test_volcano_whole_node_golden_request(monkeypatch: pytest.MonkeyPatch) -> None:
    info = create_scheduler("s").submit_dryrun(_whole_node_app(), {"queue": "q", "namespace": "ml"})
    text = str(info).replace(info.request.name, "APP_ID")
    from torchx_core import __version__

    check_golden("kubernetes_volcano_dryrun.yaml", text.replace(__version__, "VERSION"), __file__)


@pytest.mark.parametrize("kind", ["volcano", "jobset"])
def test_field_path_env_becomes_value_from_as_torchx(kind: str) -> None:
    # TorchX: an env value starting with PLACEHOLDER_FIELD_PATH is a pod field reference
    from torchx_core.schedulers.kubernetes_scheduler import PLACEHOLDER_FIELD_PATH

    env = {"POD_IP": f"{PLACEHOLDER_FIELD_PATH}status.podIP", "A": "x[FIELD_PATH]"}
    role = specs.Role(
        "r", image="i", entrypoint="e", env=env, resource=specs.resource(h="cpu.small")
    )
    res = create_scheduler("s").submit_dryrun(specs.AppDef("a", roles=[role]), {"job_kind": kind})
    envs = [e for e in _all_values(res.request.resource, "env") for e in e]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in envs
    assert {"name": "A", "value": "x[FIELD_PATH]"} in envs  # only a prefix marks a field
    assert errors(res.request.resource) == []


def _all_values(obj: object, key: str) -> list[Any]:
    """Every value of ``key`` in a nested dict/list document."""
    if isinstance(obj, dict):
        found = [obj[key]] if key in obj else []
        return found + [v for x in obj.values() for v in _all_values(x, key)]
    if isinstance(obj, list):
        return [v for x in obj for v in _all_values(x, key)]
    return []
