"""What the replicas of a Slurm app use: CPU time and memory of their job steps.

* **Running** components: ``sstat --allsteps --parsable2 --noconvert`` (slurmstepd polls the
  steps' processes when asked, so the values are current): ``TRESUsageInTot``'s ``cpu`` (CPU time
  of all the step's tasks so far, whole seconds) and ``mem`` (their resident memory now, bytes),
  and the step's ``Pids``.
* **Finished** jobs: ``sacct`` (needs accounting; None without it): ``TotalCPU`` (exact, from
  the tasks' rusage) and ``TRESUsageInTot``'s ``mem`` (for a finished step, the peak of each
  task; absent, and counted 0, for a step that ended before Slurm first sampled it: every
  ``JobAcctGatherFrequency``, 30 s by default).

A replica is one het component (``{role}-{replica_id}``, see ``_script.py``); its usage is the sum
of its numbered steps (the ``srun`` of the replica; a requeued job's steps restart at 0). The
``batch`` and ``extern`` steps are Slurm's and the batch script's own, not the replica's.
Slurm names a component's steps by its raw job id (``144.0``, 22.05's ``sstat``) or by the het
leader's id and offset (``143+1.0``, ``sacct``): both are read.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torchx_core.schedulers.api import ReplicaUsage, SchedulerError
from torchx_core.schedulers.slurm._probe import CommandRunner
from torchx_core.schedulers.slurm._status import (
    SlurmJobRecord,
    appstate_from_slurm_state,
    role_and_replica,
)
from torchx_core.specs import AppState, is_terminal

__all__ = [
    "SACCT_USAGE_FIELDS",
    "SSTAT_FIELDS",
    "StepUsage",
    "parse_cpu_time",
    "parse_memory",
    "parse_steps",
    "replica_usage",
    "usage_by_replica",
]

logger: logging.Logger = logging.getLogger(__name__)

#: ``sstat`` columns read (``Pids`` last: a comma-separated list)
SSTAT_FIELDS = ("JobID", "TRESUsageInTot", "NTasks", "Pids")
#: ``sacct`` columns read for a finished job
SACCT_USAGE_FIELDS = ("JobID", "JobIDRaw", "TotalCPU", "TRESUsageInTot", "NTasks")

_CPU_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclass(frozen=True)
class StepUsage:
    """One job step's line: the job it belongs to (``144`` or ``143+1``), its step id (``0``,
    ``batch``...), CPU seconds, resident bytes and process count (None: not reported)."""

    job: str
    step: str
    cpu_seconds: float | None
    rss_bytes: int | None
    processes: int


def parse_cpu_time(text: str) -> float | None:
    """Seconds from Slurm's ``[DD-][HH:]MM:SS[.mmm]`` (``00:04.984``, ``1-02:03:04``); None if
    empty or not of that form.

    >>> parse_cpu_time("1-02:03:04.5"), parse_cpu_time("00:04.984"), parse_cpu_time("")
    (93784.5, 4.984, None)
    """
    m = _CPU_TIME.match(text.strip())
    if not m:
        return None
    days, hours, minutes, seconds = m.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def parse_memory(text: str) -> int | None:
    """Bytes from ``53735424`` (``--noconvert``) or ``52476K`` (binary units); None if empty.

    >>> parse_memory("53735424"), parse_memory("1.5M"), parse_memory("")
    (53735424, 1572864, None)
    """
    m = _MEMORY.match(text.strip())
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _tres(text: str) -> dict[str, str]:
    """``{"cpu": "00:00:03", "mem": "53735424", ...}`` from a TRES string."""
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep:
            out[name.strip()] = value.strip()
    return out


def _count(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0


def parse_steps(text: str, fields: Sequence[str]) -> list[StepUsage]:
    """The steps of ``sstat``/``sacct`` ``--parsable2 --noheader --noconvert`` output of
    ``fields`` (a subset of :data:`SSTAT_FIELDS` + :data:`SACCT_USAGE_FIELDS`, ``JobID``
    first). Lines of jobs rather than steps (``sacct``'s ``143+0``) and short lines are left
    out."""
    out = []
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) != len(fields):
            if line.strip():
                logger.debug("skipping usage line %r", line)
            continue
        row = dict(zip(fields, cols, strict=True))
        job, dot, step = row["JobID"].strip().partition(".")
        if not dot:
            continue
        tres = _tres(row.get("TRESUsageInTot", ""))
        cpu = parse_cpu_time(row["TotalCPU"]) if "TotalCPU" in row else None
        if cpu is None:
            cpu = parse_cpu_time(tres.get("cpu", ""))
        pids = [p for p in row.get("Pids", "").split(",") if p.strip()]
        out.append(
            StepUsage(
                job=job,
                step=step,
                cpu_seconds=cpu,
                rss_bytes=parse_memory(tres.get("mem", "")),
                processes=len(pids) or _count(row.get("NTasks", "")),
            )
        )
        if "JobIDRaw" in row:  # sacct: also under the component's raw id (144.0)
            raw_job, _, _ = row["JobIDRaw"].strip().partition(".")
            if raw_job and raw_job != job:
                out.append(StepUsage(raw_job, step, cpu, out[-1].rss_bytes, out[-1].processes))
    return out


def usage_by_replica(
    records: Iterable[SlurmJobRecord], steps: Iterable[StepUsage]
) -> dict[tuple[str, int], ReplicaUsage]:
    """Sums the numbered steps of each component of ``records`` per ``(role, replica)``; steps
    without a CPU time, and components without such steps, are left out. A step without a
    memory figure counts 0 bytes (a step that ended before Slurm's first sample of it)."""
    replica_of: dict[str, tuple[str, int]] = {}
    for r in records:
        replica = role_and_replica(r.name)
        replica_of[r.job_id] = replica
        replica_of[f"{r.app_id}+{r.offset}"] = replica
        if r.offset == 0:
            replica_of.setdefault(r.app_id, replica)  # an array task: ``123_4.0``
    seen: set[tuple[tuple[str, int], str]] = set()
    out: dict[tuple[str, int], ReplicaUsage] = {}
    for s in steps:
        owner = replica_of.get(s.job)
        if owner is None or not s.step.isdigit() or s.cpu_seconds is None:
            continue
        if (owner, s.step) in seen:
            continue  # sacct names each step twice (``143+1.0`` and ``144.0``)
        seen.add((owner, s.step))
        before = out.get(owner, ReplicaUsage(0.0, 0, 0))
        out[owner] = ReplicaUsage(
            cpu_seconds=before.cpu_seconds + s.cpu_seconds,
            rss_bytes=before.rss_bytes + (s.rss_bytes or 0),
            processes=before.processes + s.processes,
        )
    return out


def _read(run_cmd: CommandRunner, args: list[str]) -> str | None:
    result = run_cmd(args)
    if result.returncode != 0:
        logger.debug("`%s` failed: %s", " ".join(args), (result.stderr or result.stdout).strip())
        return None
    return result.stdout


def replica_usage(
    run_cmd: CommandRunner, records: Sequence[SlurmJobRecord]
) -> dict[tuple[str, int], ReplicaUsage] | None:
    """The usage of the replicas of one app (its component ``records``, het leader first):
    ``sstat`` of the running components; for a finished app ``sacct`` (None when accounting is
    unavailable); ``{}`` while nothing runs yet.

    Raises:
        SchedulerError: ``sstat`` failed (its message is kept: a missing binary, a controller
            that does not answer).
    """
    states = [appstate_from_slurm_state(r.state) for r in records]
    running = [r.job_id for r, s in zip(records, states, strict=True) if s == AppState.RUNNING]
    if running:
        args = ["sstat", "--allsteps", "--parsable2", "--noheader", "--noconvert"]
        args += ["--format=" + ",".join(SSTAT_FIELDS), "--jobs=" + ",".join(running)]
        result = run_cmd(args)
        if result.returncode != 0:
            raise SchedulerError(
                f"`{' '.join(args)}` failed with exit code {result.returncode}:"
                f" {(result.stderr or result.stdout).strip()}"
            )
        return usage_by_replica(records, parse_steps(result.stdout, SSTAT_FIELDS))
    if not records or not all(is_terminal(s) for s in states):
        return {}
    args = ["sacct", "--parsable2", "--noheader", "--noconvert"]
    args += ["--format=" + ",".join(SACCT_USAGE_FIELDS)]
    args += ["--jobs=" + ",".join(r.job_id for r in records)]
    text = _read(run_cmd, args)  # e.g. "Slurm accounting storage is disabled"
    return (
        None if text is None else usage_by_replica(records, parse_steps(text, SACCT_USAGE_FIELDS))
    )
