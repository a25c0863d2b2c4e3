"""A Kubernetes API emulator (PyPI ``kmock``) served over real HTTP on 127.0.0.1.

No kube-apiserver can run on these machines; the emulator stores objects in memory and serves the
official ``kubernetes`` client over loopback. It runs no controllers: tests play the controller by
patching ``status`` and creating pods. The label selectors it ignores are filtered on our side.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

RESOURCES = {
    "batch.volcano.sh/v1alpha1/jobs": "Job",
    "bus.volcano.sh/v1alpha1/commands": "Command",
    "jobset.x-k8s.io/v1alpha2/jobsets": "JobSet",
    "workload.codeflare.dev/v1beta1/appwrappers": "AppWrapper",
    "v1/pods": "Pod",
    "v1/services": "Service",
}


@dataclass
class K8sEmulator:
    url: str
    emulator: Any
    loop: asyncio.AbstractEventLoop

    def api_client(self) -> Any:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        return client.ApiClient(cfg)

    def add_log(self, namespace: str, pod: str, text: str) -> None:
        """Serves ``text`` as the log of ``pod``."""

        def add() -> None:
            self.emulator[f"get /api/v1/namespaces/{namespace}/pods/{pod}/log"] << text.encode()

        self.loop.call_soon_threadsafe(add)


@pytest.fixture(scope="session")
def k8s_emulator() -> Iterator[K8sEmulator]:
    import kmock

    ready = threading.Event()
    box: dict[str, Any] = {}

    async def serve() -> None:
        async with kmock.KubernetesEmulator() as k, kmock.Server(k, host="127.0.0.1") as srv:
            for resource, kind in RESOURCES.items():
                k.resources[resource] = kmock.ResourceInfo(kind=kind, namespaced=True)
            box["url"], box["k"], box["loop"] = (
                str(srv.url).rstrip("/"),
                k,
                asyncio.get_running_loop(),
            )
            box["stop"] = asyncio.Event()
            ready.set()
            await box["stop"].wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True, name="kmock")
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the Kubernetes API emulator (kmock) did not start within 30 s")
    if not box["url"].startswith("http://127.0.0.1:"):
        raise RuntimeError(f"the emulator must serve on loopback, got {box['url']}")
    yield K8sEmulator(url=box["url"], emulator=box["k"], loop=box["loop"])
    box["loop"].call_soon_threadsafe(box["stop"].set)
    thread.join(10)
