"""The supervisor's model of an app's replicas: a role as run (environment, entrypoint, retry
budget) and one slot per replica position, which outlives the processes restarted in it.

Standard library only, and no other module of the project but ``_layout``: the supervisor,
started as a bare interpreter (``python -S``), imports it as a top-level module.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

if __package__:
    from torchx_core.schedulers.local._layout import INSTANCE_ENV
else:  # loaded by the supervisor run by path (``python -S``): its siblings are top-level
    from _layout import INSTANCE_ENV  # type: ignore[no-redef]


def inherited_env(environ: Any, drop: Iterable[str]) -> dict[str, str]:
    """What replicas inherit: ``environ`` (the supervisor's own, i.e. the launcher's) less
    ``drop``, names or prefixes ending in ``*``."""
    names = {d for d in drop if not d.endswith("*")}
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    if not names and not prefixes:
        return dict(environ)
    return {k: v for k, v in environ.items() if k not in names and not k.startswith(prefixes)}


class ReplicaRole:
    __slots__ = (
        "argv",
        "cwd",
        "entrypoint",
        "env",
        "exe",
        "idx",
        "max_retries",
        "name",
        "policy",
        "replica_argv",
        "replica_env",
        "restarts",
        "slots",
    )  # fmt: skip

    def __init__(
        self, idx: int, spec: dict[str, Any], base_env: dict[str, str], instance: str = ""
    ) -> None:
        self.idx = idx
        self.name: str = spec["name"]
        self.cwd: str = spec["cwd"]
        self.entrypoint: str = spec["entrypoint"]
        self.argv: list[str] = spec["argv"]
        self.replica_argv: dict[str, list[str]] = spec.get("replica_argv") or {}
        env = dict(base_env)
        env.update(spec["env"])
        before, after = spec.get("path") or ("", "")
        path = os.pathsep.join(p for p in (before, base_env.get("PATH"), after) if p)
        if path or "PATH" in base_env:
            env["PATH"] = path
        if instance:
            env[INSTANCE_ENV] = instance
        self.env = env
        self.replica_env: list[dict[str, str]] = spec["replica_env"]
        self.max_retries: int = spec["max_retries"]
        self.policy: str = spec["retry_policy"]
        self.restarts = 0
        self.exe: str | None = None
        self.slots = [Slot(self, k) for k in range(spec["num_replicas"])]

    def resolve_exe(self) -> str:
        """Finds the entrypoint like ``execvpe`` would, with the replica's PATH and cwd."""
        ep = self.entrypoint
        if "/" in ep:
            path = os.path.join(self.cwd, ep)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path
            raise FileNotFoundError(
                f"entrypoint `{ep}` not found or not executable (cwd {self.cwd})"
            )
        for d in self.env.get("PATH", os.defpath).split(os.pathsep):
            path = os.path.join(self.cwd, d or ".", ep)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path
        raise FileNotFoundError(
            f"entrypoint `{ep}` not found on PATH={self.env.get('PATH', '')!r} (cwd {self.cwd})"
        )


class Slot:
    """One replica position (role, k); survives restarts of the process behind it."""

    __slots__ = (
        "exitcode", "files", "k", "last_pid", "nfds", "partial", "pid", "restarts", "role", "state",
        "stopping", "truncated",
    )  # fmt: skip

    def __init__(self, role: ReplicaRole, k: int) -> None:
        self.role = role
        self.k = k
        self.pid = 0
        self.last_pid = 0
        self.exitcode: int | None = None
        self.state = "P"
        self.restarts = 0
        self.stopping = False
        self.files: list[int] = [-1, -1, -1]  # stdout, stderr, combined (opened lazily)
        self.partial = [b"", b""]  # incomplete last line per stream, for the combined log
        self.nfds = 0  # open output pipes
        self.truncated = False  # a log write failed (full disk): output is drained, not kept
