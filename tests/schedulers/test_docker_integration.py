"""``local_docker`` end to end on a real dockerd (scripts/services/docker), with the registry-free
busybox image. Containers use host networking (``network=host``) and never pull."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from support.docker_fixtures import BUSYBOX
from support.service_helpers import free_port, wait_for_app

from torchx_core.schedulers.api import Stream
from torchx_core.schedulers.docker.scheduler import DockerScheduler
from torchx_core.specs import (
    AppDef,
    AppState,
    BindMount,
    Role,
    Workspace,
    is_terminal,
    macros,
    resource,
)

pytestmark = [pytest.mark.integration, pytest.mark.docker]

CFG = {"network": "host", "pull_policy": "never"}


class Apps:
    """Submits apps and deletes every one of them at teardown."""

    def __init__(self, sched: DockerScheduler) -> None:
        self.sched = sched
        self.ids: list[str] = []

    def submit(self, app: AppDef, **cfg: Any) -> str:
        app_id = self.sched.submit(app, {**CFG, **cfg})
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, until: Any = is_terminal, timeout: float = 120) -> Any:
        return wait_for_app(self.sched, app_id, until, timeout)


@pytest.fixture
def apps(docker_engine: Any) -> Iterator[Apps]:
    sched = DockerScheduler("it", client=docker_engine, stop_timeout=1)
    a = Apps(sched)
    yield a
    for app_id in a.ids:
        sched.delete(app_id)
    assert all(sched.describe(app_id) is None for app_id in a.ids)


def sh(name: str, script: str, replicas: int = 1, **kwargs: Any) -> Role:
    return Role(
        name=name,
        image=BUSYBOX,
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        **kwargs,
    )


def test_multi_role_success_logs_and_list(apps: Apps) -> None:
    app = AppDef(
        "hello",
        roles=[
            sh(
                "worker",
                f"echo hello {macros.replica_id} of {macros.app_id}; echo to-err >&2",
                replicas=2,
            ),
            sh("ps", "echo ps up"),
        ],
    )
    app_id = apps.submit(app)
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("worker", 2), ("ps", 1)]
    # stdout and stderr travel through separate pipes: their relative order is not kept
    assert sorted(apps.sched.log_iter(app_id, "worker", 1)) == [
        f"hello 1 of {app_id}\n",
        "to-err\n",
    ]
    assert list(apps.sched.log_iter(app_id, "worker", 1, streams=Stream.STDOUT)) == [
        f"hello 1 of {app_id}\n"
    ]
    assert list(apps.sched.log_iter(app_id, "worker", 1, streams=Stream.STDERR)) == ["to-err\n"]
    assert list(apps.sched.log_iter(app_id, "ps", 0)) == ["ps up\n"]
    assert list(apps.sched.log_iter(app_id, "worker", 0, regex="^hello")) == [
        f"hello 0 of {app_id}\n"
    ]
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert list(apps.sched.log_iter(app_id, "worker", 0, since=future)) == []
    listed = {a.app_id: a.state for a in apps.sched.list()}
    assert listed[app_id] == AppState.SUCCEEDED


def test_failure_is_reported_per_replica(apps: Apps) -> None:
    app_id = apps.submit(
        AppDef(
            "fail", roles=[sh("w", f"[ {macros.replica_id} = 1 ] && exit 3; echo ok", replicas=2)]
        )
    )
    desc = apps.wait(app_id, until=lambda s: s == AppState.FAILED)
    states = [r.state for r in desc.roles_statuses[0].replicas]
    assert states[1] == AppState.FAILED
    assert "w/1 exited with 3" in desc.msg
    assert states[0] in (AppState.SUCCEEDED, AppState.RUNNING)


def test_cancel_stops_containers(apps: Apps) -> None:
    app_id = apps.submit(AppDef("sleeper", roles=[sh("w", "echo started; sleep 600", replicas=2)]))
    apps.wait(app_id, until=lambda s: s == AppState.RUNNING)
    apps.sched.cancel(app_id)
    desc = apps.wait(app_id)
    assert desc.state == AppState.CANCELLED
    assert all(r.state == AppState.CANCELLED for r in desc.roles_statuses[0].replicas)
    assert list(apps.sched.log_iter(app_id, "w", 0)) == ["started\n"]
    apps.sched.cancel(app_id)  # idempotent


def test_retries_restart_the_replica(apps: Apps) -> None:
    app_id = apps.submit(AppDef("retry", roles=[sh("w", "echo try; exit 1", max_retries=1)]))
    desc = apps.wait(
        app_id,
        until=lambda s: False if apps.sched.describe(app_id).num_restarts < 1 else is_terminal(s),
    )
    assert desc.state == AppState.FAILED and desc.num_restarts == 1
    assert list(apps.sched.log_iter(app_id, "w", 0)) == ["try\n", "try\n"]


def test_tail_follows_until_exit(apps: Apps) -> None:
    app_id = apps.submit(
        AppDef("ticker", roles=[sh("w", "for i in 1 2 3; do echo tick $i; sleep 0.3; done")])
    )
    apps.wait(app_id, until=lambda s: s != AppState.PENDING)
    lines = list(apps.sched.log_iter(app_id, "w", 0, should_tail=True))
    assert lines == ["tick 1\n", "tick 2\n", "tick 3\n"]
    assert apps.wait(app_id).state == AppState.SUCCEEDED


def test_replicas_reach_rank0_over_host_network(apps: Apps) -> None:
    # a port free now (on the host's network a fixed one may be held by another listener, which
    # then takes the client's connection); a server that cannot listen fails the app
    port = str(free_port())
    server = sh("server", 'nc -l -p "$PORT" > /tmp/got & echo listening; wait $! || exit 9;'
                " cat /tmp/got", env={"PORT": port})  # fmt: skip
    client = sh(
        "client",
        'for i in $(seq 1 50); do echo "from $ID" | nc "$TORCHX_RANK0_HOST" "$PORT"'
        " && exit 0; sleep 0.2; done; exit 1",
        env={"ID": macros.replica_id, "PORT": port},
    )
    app_id = apps.submit(AppDef("rdzv", roles=[server, client]))
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    # the engine copies a container's output to its log asynchronously (bounded by its own wait
    # at exit): read again for a few seconds before calling the last line missing
    deadline = time.monotonic() + 10
    while (got := list(apps.sched.log_iter(app_id, "server", 0))) != ["listening\n", "from 0\n"]:
        client_log = list(apps.sched.log_iter(app_id, "client", 0))
        assert time.monotonic() < deadline, f"server log {got}, client log {client_log}"
        time.sleep(0.5)


def test_bind_mount_writes_to_host(apps: Apps, tmp_path: Path) -> None:
    app_id = apps.submit(
        AppDef(
            "mount",
            roles=[
                sh(
                    "w",
                    "echo written > /out/result.txt",
                    mounts=[BindMount(src_path=str(tmp_path), dst_path="/out")],
                )
            ],
        )
    )
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert (tmp_path / "result.txt").read_text() == "written\n"


def test_workspace_image_with_dockerfile_torchx(
    apps: Apps, tmp_path: Path, docker_engine: Any
) -> None:
    (tmp_path / "hello.txt").write_text("from the workspace\n")
    (tmp_path / "Dockerfile.torchx").write_text(
        "ARG IMAGE\nFROM $IMAGE\nCOPY hello.txt /ws/hello.txt\nENV WS=yes\n"
    )
    role = Role(
        name="w",
        image=BUSYBOX,
        entrypoint="sh",
        args=["-c", "cat /ws/hello.txt; echo $WS"],
        workspace=Workspace({str(tmp_path): ""}),
    )
    app_id = apps.submit(AppDef("ws", roles=[role]))
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(app_id, "w", 0)) == ["from the workspace\n", "yes\n"]
    docker_engine.images.remove(role.image, force=True)


def test_workspace_default_dockerfile_copies_into_workdir(
    apps: Apps, tmp_path: Path, docker_engine: Any
) -> None:
    (tmp_path / "data.txt").write_text("patched\n")
    role = Role(
        name="w",
        image=BUSYBOX,
        entrypoint="cat",
        args=["data.txt"],
        workspace=Workspace({str(tmp_path): ""}),
    )
    app_id = apps.submit(AppDef("wsdefault", roles=[role]))
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(app_id, "w", 0)) == ["patched\n"]
    docker_engine.images.remove(role.image, force=True)


def test_workspace_image_pushed_to_image_repo(
    apps: Apps, tmp_path: Path, docker_engine: Any, docker_registry: str
) -> None:
    import json
    import urllib.request

    (tmp_path / "pushed.txt").write_text("from the registry\n")
    repo = f"{docker_registry}/torchx-it/ws"
    role = Role(
        name="w",
        image=BUSYBOX,
        entrypoint="cat",
        args=["pushed.txt"],
        workspace=Workspace({str(tmp_path): ""}),
    )
    app_id = apps.submit(AppDef("push", roles=[role]), image_repo=repo)
    assert role.image.startswith(f"{repo}:")
    tag = role.image.rsplit(":", 1)[1]
    with urllib.request.urlopen(f"http://{docker_registry}/v2/torchx-it/ws/tags/list") as r:
        assert tag in json.load(r)["tags"]
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(app_id, "w", 0)) == ["from the registry\n"]
    # the pushed image runs after the local copy is gone: an explicit pull from the loopback
    # registry (pull_policy=always), never from the internet
    image_id = docker_engine.images.get(role.image).id
    apps.sched.delete(app_id)
    docker_engine.images.remove(image_id, force=True)
    again = apps.submit(
        AppDef(
            "pull", roles=[Role(name="w", image=role.image, entrypoint="cat", args=["pushed.txt"])]
        ),
        pull_policy="always",
    )
    assert apps.wait(again).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(again, "w", 0)) == ["from the registry\n"]
    apps.sched.delete(again)
    docker_engine.images.remove(role.image, force=True)


def test_cpu_and_memory_limits_apply(apps: Apps, docker_engine: Any) -> None:
    import os as _os

    role = sh(
        "w",
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
        " || cat /sys/fs/cgroup/memory.max",
        resource=resource(cpu=64, memMB=96),
    )
    app_id = apps.submit(AppDef("limits", roles=[role]))
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(app_id, "w", 0)) == [f"{96 * 1024 * 1024}\n"]
    (container,) = docker_engine.containers.list(
        all=True, filters={"label": f"torchx.pytorch.org/app-id={app_id}"}
    )
    # 64 CPUs asked: capped to the engine's CPU count
    assert container.attrs["HostConfig"]["NanoCpus"] == (_os.cpu_count() or 1) * 10**9


def test_refused_replica_leaves_no_containers(
    apps: Apps, docker_engine: Any, tmp_path: Path
) -> None:
    from torchx_core.schedulers.api import SchedulerError

    bad = sh("bad", "true", mounts=[BindMount(src_path=str(tmp_path / "missing"), dst_path="/m")])
    info = apps.sched.submit_dryrun(AppDef("refused", roles=[sh("ok", "sleep 600"), bad]), CFG)
    with pytest.raises(SchedulerError, match="bind source path does not exist"):
        apps.sched.schedule(info)
    assert (
        docker_engine.containers.list(
            all=True, filters={"label": f"torchx.pytorch.org/app-id={info.request.app_id}"}
        )
        == []
    )


def test_describe_many_one_engine_call_matches_describe(apps: Apps, docker_engine: Any) -> None:
    ok = apps.submit(AppDef("many-ok", roles=[sh("w", "echo ok", replicas=2)]))
    bad = apps.submit(AppDef("many-bad", roles=[sh("w", "exit 3")]))
    apps.wait(ok)
    apps.wait(bad)
    from docker.models.containers import ContainerCollection

    calls: list[Any] = []
    real_list = ContainerCollection.list

    def counting_list(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_list(self, *args, **kwargs)

    ContainerCollection.list = counting_list  # type: ignore[method-assign]
    try:
        many = apps.sched.describe_many([ok, bad, "no-such-app"])
    finally:
        ContainerCollection.list = real_list  # type: ignore[method-assign]
    assert len(calls) == 1
    assert list(many) == [ok, bad, "no-such-app"]
    assert many["no-such-app"] is None
    for app_id, expected_state in ((ok, AppState.SUCCEEDED), (bad, AppState.FAILED)):
        one = apps.sched.describe(app_id)
        assert many[app_id] == one
        assert many[app_id].state == expected_state
    assert [len(r.replicas) for r in many[ok].roles_statuses] == [2]


def test_shm_is_as_large_as_the_memory_as_torchx(apps: Apps) -> None:
    # TorchX gives /dev/shm the role's memory (Docker's default of 64 MiB breaks DataLoader
    # workers and NCCL); the container also sees its image as TORCHX_IMAGE
    role = sh(
        "shm",
        "df -k /dev/shm | tail -n 1; echo image=$TORCHX_IMAGE",
        resource=resource(cpu=1, memMB=256),
    )
    app_id = apps.submit(AppDef("shm", roles=[role]))
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    out = list(apps.sched.log_iter(app_id, "shm", 0, streams=Stream.STDOUT))
    shm_kib = int(out[0].split()[1])  # "shm 262144 0 262144 0% /dev/shm"
    assert shm_kib == 256 * 1024
    assert out[1] == f"image={BUSYBOX}\n"
