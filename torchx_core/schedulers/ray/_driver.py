"""Job driver of the ``ray`` scheduler: runs inside the Ray job, not in the client.

``RayScheduler.schedule`` copies this file into the job's working directory next to
``torchx_ray_actors.json`` and submits ``python _ray_driver.py`` as the job entrypoint. The driver:

1. reserves one placement-group bundle per replica (CPU/GPU/memory) and waits for it;
2. starts one actor per replica on its bundle and asks replica 0 for its node address, exported to
   every replica as ``TORCHX_RANK0_HOST``;
3. runs each replica's command in a subprocess (killed with its actor: ``PR_SET_PDEATHSIG``),
   printing every output line prefixed with ``[role/replica_id] `` so the scheduler can split the
   job log per replica;
4. exits with the first non-zero replica exit code (and stops the other replicas) or 0.

Only the standard library and ``ray`` are imported: the file runs with the cluster's Python.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

ACTORS_FILE = "torchx_ray_actors.json"
RANK0_ENV = "TORCHX_RANK0_HOST"


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class CommandActor:
    """Runs one replica's command and relays its output with a ``[role/k] `` prefix."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def node_ip(self) -> str:
        import ray

        # ray leaves get_node_ip_address unannotated (it returns the node's address as a str)
        ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return ip

    def run(self, command: list[str], env: dict[str, str], prefix: str) -> int:
        self.proc = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            # only a prctl() call between fork and exec: no locks that other threads could hold
            preexec_fn=_die_with_parent,
        )
        for line in self.proc.stdout or ():
            print(prefix + line, end="", flush=True)
        return self.proc.wait()


def main() -> int:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    with open(ACTORS_FILE, encoding="utf-8") as f:
        spec: dict[str, Any] = json.load(f)
    actors: list[dict[str, Any]] = spec["actors"]
    ray.init()
    bundles = []
    for a in actors:
        bundle = {"CPU": float(a["num_cpus"])}
        if a.get("num_gpus"):
            bundle["GPU"] = float(a["num_gpus"])
        if a.get("memory"):
            bundle["memory"] = float(a["memory"])
        bundles.append(bundle)
    pg = placement_group(bundles, strategy=spec.get("placement_strategy", "PACK"))
    timeout = spec.get("placement_timeout")
    ready, _ = ray.wait([pg.ready()], timeout=timeout)
    if not ready:
        print(f"torchx: placement group {bundles} not ready after {timeout}s", flush=True)
        return 2
    remote_cls: Any = ray.remote(CommandActor)  # an actor class; ray's stubs cannot type it
    handles: list[Any] = [
        remote_cls.options(
            num_cpus=bundles[i]["CPU"],
            num_gpus=bundles[i].get("GPU", 0),
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=i
            ),
        ).remote()
        for i in range(len(actors))
    ]
    rank0 = ray.get(handles[0].node_ip.remote())
    pending = {
        h.run.remote(
            a["command"], {**a["env"], RANK0_ENV: rank0}, f"[{a['role']}/{a['replica_id']}] "
        ): a
        for h, a in zip(handles, actors, strict=True)
    }
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            actor = pending.pop(ref)
            code = ray.get(ref)
            if code != 0:
                print(
                    f"torchx: replica {actor['role']}/{actor['replica_id']} exited with {code}",
                    flush=True,
                )
                for h in handles:
                    ray.kill(h)
                return code if 0 < code < 256 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
