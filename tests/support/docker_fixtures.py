"""Test helpers for ``local_docker`` and docker workspaces: a stateful fake Docker SDK client and
the real-engine fixture.

``FakeDockerClient`` mimics the parts of ``docker.DockerClient`` the scheduler uses: containers
(run, list with label filters, logs, kill, stop, rename, remove), networks and images (get, pull,
build, tag, push). Tests drive container states with :meth:`FakeDockerClient.finish`.

``docker_engine`` (session) starts dockerd through ``scripts/services/docker/start.sh`` (which
also imports the registry-free ``busybox:latest`` image) and stops it with ``stop.sh`` at session
end if this session started it; ``docker_registry`` does the same for a local registry on
127.0.0.1:5000 (push tests). A daemon that cannot start fails the tests, never skips them.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from support.service_helpers import run_service_script, start_service

DOCKER_HOST = "unix:///var/run/docker.sock"
BUSYBOX = "busybox:latest"


# -- real services ------------------------------------------------------------------------------


REGISTRY = f"127.0.0.1:{os.environ.get('REGISTRY_PORT', '5000')}"  # registry-start.sh's port


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A Docker SDK client on the real dockerd (started by our script) with busybox imported."""
    started = start_service("docker", "dockerd.pid")
    import docker

    client = docker.DockerClient(base_url=DOCKER_HOST)
    client.images.get(BUSYBOX)  # fails loudly if the image import did not happen
    yield client
    client.close()
    if started:
        run_service_script("docker", "stop.sh")


@pytest.fixture(scope="session")
def docker_registry(docker_engine: Any) -> Iterator[str]:
    """A local image registry on 127.0.0.1:5000 (``registry-start.sh``), for push tests."""
    started = start_service("docker", "registry.pid", "registry-start.sh")
    yield REGISTRY
    if started:
        run_service_script("docker", "registry-stop.sh")


# -- fake Docker SDK ------------------------------------------------------------------------------


class FakeNotFound(LookupError):
    """Raised like docker.errors.NotFound/ImageNotFound (the scheduler catches LookupError)."""


@dataclass
class FakeContainer:
    client: FakeDockerClient
    name: str
    image: str
    command: list[str]
    kwargs: dict[str, Any]
    status: str = "running"
    exit_code: int = 0
    restarts: int = 0
    output: list[tuple[str, str]] = field(default_factory=list)  # (stream, line)
    log_calls: list[dict[str, Any]] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    created: int = 0

    @property
    def labels(self) -> dict[str, str]:
        return self.kwargs.get("labels", {})

    @property
    def attrs(self) -> dict[str, Any]:
        return {
            "State": {"ExitCode": self.exit_code},
            "Config": {"Hostname": self.kwargs.get("hostname", "host"), "Image": self.image},
            "RestartCount": self.restarts,
            "Created": f"2024-01-01T00:00:{self.created:02d}Z",
        }

    def reload(self) -> None:
        pass

    def rename(self, name: str) -> None:
        self.name = name

    def kill(self, signal: str = "SIGKILL") -> None:
        self.signals.append(signal)
        if self.status in ("running", "restarting"):
            if signal == "SIGTERM" and self.client.ignore_sigterm:
                return
            self.status, self.exit_code = "exited", 137 if signal == "SIGKILL" else 143

    def stop(self, timeout: int = 10) -> None:
        self.status = "exited"

    def remove(self, force: bool = False) -> None:
        self.client.containers.items.remove(self)

    def logs(
        self,
        stdout: bool = True,
        stderr: bool = True,
        stream: bool = False,
        follow: bool = False,
        **kwargs: Any,
    ) -> Any:
        self.log_calls.append(
            {"stdout": stdout, "stderr": stderr, "stream": stream, "follow": follow, **kwargs}
        )
        text = "".join(
            line
            for s, line in self.output
            if (s == "stdout" and stdout) or (s == "stderr" and stderr)
        )
        if stream:
            # chunks that do not align with lines, like the real multiplexed stream
            data = text.encode()
            return iter([data[i : i + 5] for i in range(0, len(data), 5)])
        return text.encode()


@dataclass
class FakeContainers:
    client: FakeDockerClient
    items: list[FakeContainer] = field(default_factory=list)

    def run(
        self, image: str, command: list[str], detach: bool = False, **kwargs: Any
    ) -> FakeContainer:
        if any(c.name == kwargs.get("name") for c in self.items):
            raise RuntimeError(f"container name {kwargs.get('name')} in use")
        c = FakeContainer(
            self.client,
            kwargs.get("name", f"c{len(self.items)}"),
            image,
            command,
            kwargs,
            created=len(self.items),
        )
        self.items.append(c)
        return c

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> list[FakeContainer]:
        out = list(self.items)
        label = (filters or {}).get("label")
        if label:
            key, sep, value = label.partition("=")
            out = [c for c in out if key in c.labels and (not sep or c.labels[key] == value)]
        if not all:
            out = [c for c in out if c.status == "running"]
        return out[::-1]  # newest first, like dockerd


@dataclass
class FakeImage:
    id: str
    tags: list[str] = field(default_factory=list)
    client: FakeDockerClient | None = None

    def tag(self, repo: str, tag: str | None = None) -> bool:
        self.tags.append(f"{repo}:{tag}")
        return True


@dataclass
class FakeImages:
    client: FakeDockerClient
    present: dict[str, FakeImage] = field(default_factory=dict)
    pulled: list[str] = field(default_factory=list)
    builds: list[dict[str, Any]] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)

    def get(self, name: str) -> FakeImage:
        if name not in self.present:
            raise FakeNotFound(name)
        return self.present[name]

    def pull(self, name: str) -> FakeImage:
        self.pulled.append(name)
        self.present[name] = FakeImage(id=f"sha256:{len(self.present):064d}")
        return self.present[name]

    def build(self, fileobj: io.BytesIO, **kwargs: Any) -> tuple[FakeImage, list[dict[str, str]]]:
        with tarfile.open(fileobj=fileobj) as tar:
            files = {
                m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers()
                if m.isfile()
            }
        self.builds.append({"files": files, **kwargs})
        image = FakeImage(id=f"sha256:{len(self.builds):0>4}{'ab' * 30}")
        self.present[image.id] = image
        return image, [{"stream": "Step 1/3 : ARG IMAGE\n"}]

    def push(
        self, repo: str, tag: str | None = None, stream: bool = False, decode: bool = False
    ) -> Iterator[dict[str, str]]:
        self.pushed.append(f"{repo}:{tag}")
        if self.client.push_error:
            return iter([{"status": "Preparing"}, {"error": self.client.push_error}])
        return iter([{"status": "Pushed"}])


@dataclass
class FakeAPIClient:
    """``client.api``: the low-level build (TorchX's call), recorded in ``images.builds``."""

    images: FakeImages
    build_error: str = ""

    def build(
        self, fileobj: io.BytesIO, decode: bool = False, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        image, log = self.images.build(fileobj, **kwargs)
        if self.build_error:
            return iter([*log, {"error": self.build_error}])
        return iter([*log, {"aux": {"ID": image.id}}])


@dataclass
class FakeNetworks:
    names: list[str] = field(default_factory=list)

    def list(self, names: list[str] | None = None) -> list[str]:
        return [n for n in self.names if names is None or n in names]

    def create(self, name: str, **kwargs: Any) -> str:
        self.names.append(name)
        return name


class FakeDockerClient:
    """A small stateful stand-in for ``docker.DockerClient``."""

    def __init__(self, images: tuple[str, ...] = (BUSYBOX,)) -> None:
        self.containers = FakeContainers(self)
        self.images = FakeImages(self)
        self.api = FakeAPIClient(self.images)
        self.networks = FakeNetworks()
        self.ignore_sigterm = False
        self.push_error = ""
        self.ncpu = 2
        self.closed = False
        for name in images:
            self.images.present[name] = FakeImage(id=f"sha256:{abs(hash(name)):064d}"[:71])

    def close(self) -> None:
        self.closed = True

    def info(self) -> dict[str, Any]:
        return {"NCPU": self.ncpu}

    # -- test controls ----------------------------------------------------------------------

    def app_containers(self, app_id: str) -> list[FakeContainer]:
        found = self.containers.list(
            all=True, filters={"label": f"torchx.pytorch.org/app-id={app_id}"}
        )
        return sorted(found, key=lambda c: c.created)  # run order

    def finish(self, app_id: str, exit_codes: dict[int, int] | None = None) -> None:
        """Ends every container of the app (exit code per index in run order, default 0)."""
        for i, c in enumerate(self.app_containers(app_id)):
            c.status, c.exit_code = "exited", (exit_codes or {}).get(i, 0)
