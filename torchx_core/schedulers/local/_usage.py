"""What the replicas of a local app use, read from ``/proc``: CPU time and resident memory of
each replica's process and all its descendants, in one scan of ``/proc``."""

from __future__ import annotations

import os
from collections.abc import Mapping

from torchx_core.schedulers.api import ReplicaUsage
from torchx_core.schedulers.local._layout import StatusDoc
from torchx_core.schedulers.local._procs import read_proc_file

__all__ = ["ProcStat", "parse_stat", "replica_usage", "running_replicas", "usage_of_trees"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

#: ``(parent pid, CPU seconds, resident bytes)`` of one process
ProcStat = tuple[int, float, int]


def parse_stat(text: bytes) -> ProcStat | None:
    """``(ppid, utime + stime in seconds, rss in bytes)`` from a ``/proc/<pid>/stat``; None if
    it cannot be read (the command name in parentheses may hold spaces and parentheses)."""
    try:
        fields = text.rsplit(b")", 1)[1].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE
    except (IndexError, ValueError):
        return None


def usage_of_trees(
    stats: Mapping[int, ProcStat], roots: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], ReplicaUsage]:
    """The usage of each replica: its root process (``roots``) and every descendant in
    ``stats`` (``{pid: (ppid, cpu seconds, rss bytes)}``); replicas whose root is gone are left
    out."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out = {}
    for replica, root in roots.items():
        if root not in stats:
            continue
        cpu, rss, count, todo = 0.0, 0, 0, [root]
        while todo:
            pid = todo.pop()
            _, c, r = stats[pid]
            cpu, rss, count = cpu + c, rss + r, count + 1
            todo.extend(children.get(pid, ()))
        out[replica] = ReplicaUsage(cpu_seconds=cpu, rss_bytes=rss, processes=count)
    return out


def replica_usage(roots: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], ReplicaUsage]:
    """:func:`usage_of_trees` over the processes in ``/proc`` now."""
    if not roots:
        return {}
    stats: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            raw = read_proc_file(f"/proc/{name}/stat")
            parsed = parse_stat(raw) if raw else None
            if parsed is not None:
                stats[int(name)] = parsed
    return usage_of_trees(stats, roots)


def running_replicas(doc: StatusDoc) -> dict[tuple[str, int], int]:
    """``{(role, replica index): pid}`` of the replicas the status document shows running."""
    return {
        (r.name, k): pid
        for r in doc.roles
        for k, (pid, state) in enumerate(zip(r.pids, r.states, strict=False))
        if pid and state == "R"
    }
