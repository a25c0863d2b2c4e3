"""Unit tests of ``local_docker`` against the stateful fake Docker client (no engine needed)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from golden_files import check_golden
from support.docker_fixtures import BUSYBOX, FakeDockerClient

from torchx_core import __version__
from torchx_core.schedulers.api import InvalidLogQueryError, SchedulerError, Stream
from torchx_core.schedulers.docker.scheduler import (
    DockerScheduler,
    create_scheduler,
)
from torchx_core.specs import (
    AppDef,
    AppState,
    BindMount,
    DeviceMount,
    MissingDependencyError,
    Role,
    VolumeMount,
    macros,
    resource,
)
from torchx_core.workspace.docker_workspace import DockerEngineError


def _app(replicas: int = 2, **role_kwargs: object) -> AppDef:
    trainer = Role(
        name="trainer",
        image=BUSYBOX,
        entrypoint="sh",
        args=["-c", "echo", macros.replica_id, macros.app_id],
        env={"RANK0_VAR": macros.rank0_env, "ID": macros.replica_id},
        num_replicas=replicas,
        resource=resource(cpu=2, gpu=1, memMB=512),
        port_map={"tb": 6006},
        mounts=[
            BindMount("/data", "/mnt/data", read_only=True),
            VolumeMount("vol", "/v"),
            DeviceMount("/dev/fuse", "/dev/fuse"),
        ],
        max_retries=2,
        **role_kwargs,  # type: ignore[arg-type]
    )
    ps = Role(
        name="ps", image=BUSYBOX, entrypoint="echo", args=["ps"], resource=resource(cpu=1, memMB=64)
    )
    return AppDef("My App!", roles=[trainer, ps])


def _sched(client: FakeDockerClient | None = None) -> DockerScheduler:
    return DockerScheduler("test", client=client or FakeDockerClient(), stop_timeout=0.2)


def test_dryrun_golden_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPY_ME", "yes")
    info = _sched().submit_dryrun(
        _app(), {"privileged": True, "copy_env": ["COPY_*"], "env": {"EXTRA": "1"}}
    )
    req = info.request
    assert req.app_id.startswith("my-app-")
    # dryrun prints the native request: exactly the golden file (random app id replaced)
    text = str(info).replace(req.app_id, "APP_ID").replace(f'"{__version__}"', '"VERSION"')
    check_golden("docker_dryrun.json", text, __file__)
    # the printed request carries the run options as given
    first = json.loads(str(info))["containers"][0]
    assert first["kwargs"]["privileged"] is True
    assert {k: first["kwargs"]["environment"][k] for k in ("COPY_ME", "EXTRA")} == {
        "COPY_ME": "yes",
        "EXTRA": "1",
    }
    assert [c.kwargs["name"] for c in req.containers] == [
        f"{req.app_id}-trainer-0",
        f"{req.app_id}-trainer-1",
        f"{req.app_id}-ps-0",
    ]


def test_dryrun_shm_size_image_env_and_version_label_as_torchx() -> None:
    # TorchX: /dev/shm as large as the role's memory (Docker's default 64 MiB breaks DataLoader
    # workers and NCCL), TORCHX_IMAGE in the environment, the package version as version label
    from torchx_core.schedulers.kubernetes._pods import LABEL_VERSION as K8S_LABEL_VERSION
    from torchx_core.schedulers.kubernetes.scheduler import KubernetesScheduler

    req = _sched().submit_dryrun(_app(1), {}).request
    trainer, ps = req.containers
    assert (trainer.kwargs["mem_limit"], trainer.kwargs["shm_size"]) == ("512m", "512m")
    assert (ps.kwargs["mem_limit"], ps.kwargs["shm_size"]) == ("64m", "64m")
    assert trainer.kwargs["environment"]["TORCHX_IMAGE"] == BUSYBOX
    label = trainer.kwargs["labels"]["torchx.pytorch.org/version"]
    assert label == __version__
    k8s_app = AppDef(
        "a", roles=[Role("r", image="i", entrypoint="e", resource=resource(cpu=1, memMB=64))]
    )
    k8s = KubernetesScheduler("s", client=object()).submit_dryrun(k8s_app, {"queue": "q"})
    pod_labels = k8s.request.resource["spec"]["tasks"][0]["template"]["metadata"]["labels"]
    assert pod_labels[K8S_LABEL_VERSION] == label


def test_dryrun_without_memory_sets_no_shm_size() -> None:
    app = AppDef("a", roles=[Role("r", image=BUSYBOX, entrypoint="true")])
    kwargs = _sched().submit_dryrun(app, {}).request.containers[0].kwargs
    assert "shm_size" not in kwargs and "mem_limit" not in kwargs


def test_has_docker_and_ensure_network_as_torchx(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx_core.schedulers import docker_scheduler

    client = FakeDockerClient()
    docker_scheduler.ensure_network(client)
    docker_scheduler.ensure_network(client)  # a second call finds it
    assert client.networks.names == [docker_scheduler.NETWORK] == ["torchx"]
    assert docker_scheduler.Opts is docker_scheduler.DockerOpts
    monkeypatch.setitem(sys.modules, "docker", None)  # the SDK is not installed
    assert docker_scheduler.has_docker() is False


def test_dryrun_host_network_has_no_hostname_or_ports() -> None:
    req = _sched().submit_dryrun(_app(1), {"network": "host"}).request
    kwargs = req.containers[0].kwargs
    assert kwargs["network_mode"] == "host"
    assert "hostname" not in kwargs and "ports" not in kwargs and "network" not in kwargs
    assert kwargs["environment"]["TORCHX_RANK0_HOST"] == "localhost"


def test_dryrun_rejects_bad_pull_policy() -> None:
    with pytest.raises(SchedulerError, match=r"pull_policy='sometimes'.*missing, never, always"):
        _sched().submit_dryrun(_app(1), {"pull_policy": "sometimes"})


def test_dryrun_touches_no_engine() -> None:
    client = FakeDockerClient()
    _sched(client).submit_dryrun(_app(), {})
    assert client.containers.items == [] and client.networks.names == []


def test_schedule_describe_list_and_success() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    assert client.networks.names == ["torchx"]
    assert len(client.app_containers(app_id)) == 3
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert [(r.role, [x.id for x in r.replicas]) for r in desc.roles_statuses] == [
        ("trainer", [0, 1]),
        ("ps", [0]),
    ]
    assert [r.num_replicas for r in desc.roles] == [2, 1]
    client.finish(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    listed = {a.app_id: (a.state, a.name) for a in sched.list()}
    assert listed == {app_id: (AppState.SUCCEEDED, "My App!")}


def test_mounts_and_gpus_become_sdk_objects() -> None:
    client = FakeDockerClient()
    app_id = _sched(client).submit(_app(1), {})
    kwargs = client.app_containers(app_id)[0].kwargs
    from docker.types import DeviceRequest, Mount

    assert all(isinstance(m, Mount) for m in kwargs["mounts"])
    assert kwargs["mounts"][0]["Target"] == "/mnt/data" and kwargs["mounts"][0]["ReadOnly"]
    assert isinstance(kwargs["device_requests"][0], DeviceRequest)


def test_one_failed_replica_fails_the_app() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    client.finish(app_id, {1: 3})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.roles_statuses[0].replicas[1].state == AppState.FAILED
    assert desc.roles_statuses[0].replicas[0].state == AppState.SUCCEEDED
    assert desc.msg == "trainer/1 exited with 3"


def test_restarting_replica_is_pending_and_restarts_counted() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(1), {})
    c = client.app_containers(app_id)[0]
    c.status, c.restarts = "restarting", 1
    desc = sched.describe(app_id)
    assert desc is not None and desc.num_restarts == 1
    assert desc.roles_statuses[0].replicas[0].state == AppState.PENDING


def test_cancel_marks_cancelled_and_is_idempotent() -> None:
    client = FakeDockerClient()
    client.ignore_sigterm = True  # forces the SIGKILL path after stop_timeout
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    sched.cancel(app_id)
    containers = client.app_containers(app_id)
    assert all(c.signals == ["SIGTERM", "SIGKILL"] for c in containers)
    assert all(c.name.endswith("--cancelled") for c in containers)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    sched.cancel(app_id)  # no error, names not suffixed twice
    assert all(c.name.count("--cancelled") == 1 for c in client.app_containers(app_id))


def test_cancel_after_success_keeps_succeeded_replicas_terminal() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(1), {})
    client.finish(app_id)
    sched.cancel(app_id)
    assert all(c.signals == [] for c in client.app_containers(app_id))


def test_delete_removes_containers_and_unknown_app_is_none() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    sched.delete(app_id)
    assert client.app_containers(app_id) == []
    assert sched.describe(app_id) is None
    sched.cancel("nope-123")  # unknown: a no-op


def test_app_containers_come_from_get_containers_as_torchx() -> None:
    """TorchX users' tests patch ``DockerScheduler._get_containers``; describe reads through it."""
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    assert len(sched._get_containers(app_id)) == 3
    with mock.patch.object(sched, "_get_containers", return_value=[]):
        assert sched.describe(app_id) is None


def test_pull_policy() -> None:
    client = FakeDockerClient(images=())
    sched = _sched(client)
    with pytest.raises(
        SchedulerError, match="not present on the docker engine and pull_policy=never"
    ):
        sched.submit(_app(1), {"pull_policy": "never"})
    assert client.images.pulled == []
    sched.submit(_app(1), {"pull_policy": "missing"})
    assert client.images.pulled == [BUSYBOX]
    sched.submit(_app(1), {"pull_policy": "missing"})
    assert client.images.pulled == [BUSYBOX]  # present now: not pulled again
    sched.submit(_app(1), {"pull_policy": "always"})
    assert client.images.pulled == [BUSYBOX, BUSYBOX]


def test_log_iter_streams_regex_time_and_tail() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    c = client.app_containers(app_id)[1]
    c.output = [("stdout", "hello 1\n"), ("stderr", "oops\n"), ("stdout", "bye 1\n")]
    assert list(sched.log_iter(app_id, "trainer", 1)) == ["hello 1\n", "oops\n", "bye 1\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.STDERR)) == ["oops\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, regex="^(hello|bye)")) == [
        "hello 1\n",
        "bye 1\n",
    ]
    since = datetime(2024, 1, 1, tzinfo=timezone.utc)
    until = datetime(2024, 1, 2, tzinfo=timezone.utc)
    assert list(
        sched.log_iter(app_id, "trainer", 1, should_tail=True, since=since, until=until)
    ) == ["hello 1\n", "oops\n", "bye 1\n"]
    call = c.log_calls[-1]
    assert call["follow"] and call["stream"]
    assert call["since"] == since.timestamp() and call["until"] == until.timestamp()


def test_log_iter_unknown_replica_and_bad_regex() -> None:
    sched = _sched()
    app_id = sched.submit(_app(1), {})
    with pytest.raises(InvalidLogQueryError, match="no replica 5 of role 'trainer'"):
        sched.log_iter(app_id, "trainer", 5)
    with pytest.raises(InvalidLogQueryError, match="invalid log regex"):
        list(sched.log_iter(app_id, "trainer", 0, regex="("))


def test_run_opts_and_registry_factory() -> None:
    opts = _sched().run_opts()
    for key in ("copy_env", "env", "privileged", "network", "pull_policy", "image_repo", "quiet"):
        assert opts.get(key) is not None, key
    assert isinstance(create_scheduler("s", client=FakeDockerClient()), DockerScheduler)


def test_missing_docker_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    # not installed at all (an installed package that fails to import gets another message)
    monkeypatch.setattr("torchx_core.specs._dependencies.installed_version", lambda _dist: None)
    sched = DockerScheduler("test")
    sched.submit_dryrun(_app(1), {})  # dryrun needs no SDK
    with pytest.raises(
        MissingDependencyError,
        match=r"needed by the local_docker scheduler.*checkout>\[docker\]",
    ):
        sched.describe("x-1")


def test_cancel_of_never_started_container_is_cancelled() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(1), {})
    for c in client.app_containers(app_id):
        c.status = "created"  # e.g. created, then its start failed
    sched.cancel(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert {r.state for rs in desc.roles_statuses for r in rs.replicas} == {AppState.CANCELLED}


def test_cpu_limit_capped_to_engine_cpus() -> None:
    client = FakeDockerClient()
    client.ncpu = 1
    app_id = _sched(client).submit(_app(1), {})  # the trainer asks for 2 CPUs
    limits = {
        c.kwargs["labels"]["torchx.pytorch.org/role-name"]: c.kwargs["nano_cpus"]
        for c in client.app_containers(app_id)
    }
    assert limits == {"trainer": 10**9, "ps": 10**9}


def test_long_names_fit_hostnames() -> None:
    app = _app(1)
    app.name = "x" * 80
    app.roles[0].name = "r" * 80
    for c in _sched().submit_dryrun(app, {}).request.containers:
        assert len(c.kwargs["hostname"]) <= 63


def test_engine_unreachable_or_failing_is_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{missing}")
    sched = DockerScheduler("test")
    for call in (
        lambda: sched.describe("x-1"),
        sched.list,
        lambda: sched.cancel("x-1"),
        lambda: sched.submit(_app(1), {}),
    ):
        with pytest.raises(DockerEngineError) as e:
            call()
        assert f"cannot reach the Docker engine at unix://{missing}" in str(e.value)
        assert "DOCKER_HOST" in str(e.value)

    class Broken(FakeDockerClient):
        def __init__(self) -> None:
            super().__init__()
            self.containers.list = self._fail  # type: ignore[method-assign]

        def _fail(self, **kwargs: object) -> None:
            raise ConnectionError("Connection aborted")

    with pytest.raises(SchedulerError, match="failed to look up app x-1: Connection aborted"):
        _sched(Broken()).describe("x-1")
    with pytest.raises(SchedulerError, match="failed to list the torchx containers"):
        _sched(Broken()).list()


def test_container_status_mapping() -> None:
    client = FakeDockerClient()
    sched = _sched(client)
    app_id = sched.submit(_app(1), {})
    c = client.app_containers(app_id)[0]
    expected = {
        "created": AppState.PENDING,
        "restarting": AppState.PENDING,
        "paused": AppState.PENDING,
        "running": AppState.RUNNING,
        "removing": AppState.RUNNING,
        "dead": AppState.FAILED,
        "what": AppState.UNKNOWN,
    }
    for status, state in expected.items():
        c.status = status
        desc = sched.describe(app_id)
        assert desc is not None and desc.roles_statuses[0].replicas[0].state == state, status
    c.status, c.exit_code = "exited", 0
    assert sched.describe(app_id).roles_statuses[0].replicas[0].state == AppState.SUCCEEDED  # type: ignore[union-attr]
    c.exit_code = 137
    assert sched.describe(app_id).roles_statuses[0].replicas[0].state == AppState.FAILED  # type: ignore[union-attr]


def test_failed_start_removes_the_replicas_already_started() -> None:
    from docker.errors import APIError

    client = FakeDockerClient()
    real_run = client.containers.run

    def run(image: str, command: list[str], detach: bool = False, **kwargs: Any) -> Any:
        if kwargs["name"].endswith("-ps-0"):  # the 3rd replica: the engine refuses it
            real_run(image, command, detach=detach, **kwargs)  # created, then its start fails
            raise APIError("invalid mount config: bind source path does not exist")
        return real_run(image, command, detach=detach, **kwargs)

    client.containers.run = run  # type: ignore[method-assign]
    sched = _sched(client)
    info = sched.submit_dryrun(_app(), {})
    with pytest.raises(SchedulerError, match=f"failed to start app {info.request.app_id}: .*bind"):
        sched.schedule(info)
    assert client.app_containers(info.request.app_id) == []
    assert sched.describe(info.request.app_id) is None


def test_named_devices_are_mounted_from_the_host_as_torchx() -> None:
    """Resource.devices (EFA, Neuron) become host device mounts (TorchX's devices.py)."""
    app = _app(replicas=1)
    app.roles[0].resource.devices = {"vpc.amazonaws.com/efa": 2}
    req = _sched().submit_dryrun(app, {}).request
    devices = req.containers[0].kwargs["devices"]
    assert devices == [
        "/dev/fuse:/dev/fuse:rwm",
        "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm",
        "/dev/infiniband/uverbs1:/dev/infiniband/uverbs1:rwm",
    ]
    assert len(app.roles[0].mounts) == 3  # the role itself is not changed


def test_make_unique_is_the_patchable_id_source(monkeypatch: pytest.MonkeyPatch) -> None:
    # TorchX's tests and users patch docker_scheduler.make_unique to fix the app id
    from torchx_core.schedulers import docker_scheduler

    monkeypatch.setattr(docker_scheduler, "make_unique", lambda name: "app_name_42")
    req = _sched().submit_dryrun(_app(1), {}).request
    assert req.app_id == "app_name_42"
    env = req.containers[0].kwargs["environment"]
    assert env["TORCHX_RANK0_HOST"] == "app_name_42-trainer-0"


def test_container_names_stay_hostnames_with_a_long_app_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx_core.schedulers import docker_scheduler

    long_id = "_.-" + "x" * 100 + "-abc12345"
    monkeypatch.setattr(docker_scheduler, "make_unique", lambda name: long_id)
    req = _sched().submit_dryrun(_app(2), {}).request
    names = [c.kwargs["name"] for c in req.containers]
    assert all(len(n) <= 63 and n[0].isalnum() for n in names)
    assert names[0].endswith("x-abc12345-trainer-0") and len(set(names)) == 3
    assert req.containers[0].kwargs["hostname"] == names[0]
    assert req.containers[1].kwargs["environment"]["TORCHX_RANK0_HOST"] == names[0]
