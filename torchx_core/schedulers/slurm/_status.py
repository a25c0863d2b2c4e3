"""Slurm job states and the parsing of ``squeue --json`` and ``sacct --parsable2`` output.

Robust to the output differences between Slurm 22.05 and 24.11+:

* ``job_state`` is a string (22.05) or a list of strings (23.11+: base state plus flags);
* ``exit_code`` is a raw wait status int (22.05) or ``{"status": [...], "return_code": N}``, where
  ``N`` may itself be ``{"set": true, "number": 3}`` (24.x);
* 22.05's ``squeue --json`` ignores ``-j``/``-t`` and returns every job: callers filter here;
* numbers may come as plain ints or ``{"set": bool, "infinite": bool, "number": int}``.

Each het component is one record; the app id is the het leader's id (or the job id).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from torchx_core.schedulers.api import DescribeAppResponse, SchedulerError
from torchx_core.specs import AppState, ReplicaStatus, Role, RoleStatus, is_terminal

__all__ = [
    "SACCT_FIELDS",
    "SLURM_STATES",
    "SlurmJobRecord",
    "app_ended",
    "appstate_from_slurm_state",
    "describe_from_records",
    "group_by_app",
    "parse_sacct",
    "parse_squeue_json",
    "role_and_replica",
]

logger: logging.Logger = logging.getLogger(__name__)

# Slurm job state -> AppState. https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
SLURM_STATES: Mapping[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "CONFIGURING": AppState.PENDING,
    "COMPLETING": AppState.RUNNING,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "LAUNCH_FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "OOM": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "POWER_UP_NODE": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "RECONFIG_FAIL": AppState.FAILED,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESIZING": AppState.RUNNING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "REVOKED": AppState.CANCELLED,
    "RUNNING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "SPECIAL_EXIT": AppState.FAILED,
    "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
    "UPDATE_DB": AppState.RUNNING,
}

# sacct columns we read (WorkDir last: it is the one field that may hold a '|').
SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "NodeList",
    "User",
    "Submit",
    "End",
    "WorkDir",
)


def appstate_from_slurm_state(state: str) -> AppState:
    """Maps a Slurm state (``RUNNING``, ``CANCELLED by 0``, ``OUT_OF_MEMORY``...) to AppState."""
    base = state.strip().split(" ")[0].rstrip("+").upper()
    found = SLURM_STATES.get(base)
    if found is None:
        logger.warning("unknown Slurm job state %r; reporting UNKNOWN", state)
        return AppState.UNKNOWN
    return found


@dataclass
class SlurmJobRecord:
    """One Slurm job or het component, normalized across Slurm versions.

    Args:
        job_id: the raw job id of this record.
        app_id: the het leader's id (the app id), or the job id itself.
        offset: the het component offset (0 for plain jobs).
        name: the job name (``{role}-{replica_id}`` for jobs this scheduler submitted).
        state: the base Slurm state (``RUNNING``...).
        reason: the pending/failure reason (``""`` when none).
        exit_code: the batch script's exit code, when known.
        derived_exit_code: the highest exit code of the component's steps, when known.
        signal: the signal that ended the batch script, when known.
        restarts: how often the job was requeued, when known (``squeue`` only).
        nodes: the allocated node list.
        work_dir: the job's working directory (the log dir of this scheduler's jobs).
        user: the owner's user name (or uid as a string).
        comment: the job's comment (where this scheduler records the app's owner).
        submitted: the submit time (epoch seconds), when known.
        ended: the end time (epoch seconds) of a finished job, when known (a running job's
            ``end_time`` in ``squeue`` is only its time limit's end: left out).
        state_text: the state as Slurm printed it when it says more than ``state`` (sacct's
            ``CANCELLED by 1000``), else ``""``.
    """

    job_id: str
    app_id: str
    offset: int
    name: str
    state: str
    reason: str = ""
    exit_code: int | None = None
    derived_exit_code: int | None = None
    signal: int | None = None
    restarts: int | None = None
    nodes: str = ""
    work_dir: str = ""
    user: str = ""
    comment: str = ""
    submitted: float | None = None
    ended: float | None = None
    state_text: str = ""


def _number(value: Any) -> int | None:
    """Reads ``5``, ``"5"`` or ``{"set": true, "number": 5}`` (24.x); ``None`` when unset."""
    if isinstance(value, Mapping):
        if value.get("set") is False or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _exit(value: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait status int or a 23.02+ exit code object."""
    if isinstance(value, Mapping):
        code = _number(value.get("return_code"))
        sig = value.get("signal")
        signo = _number(sig.get("id", sig.get("signal_id"))) if isinstance(sig, Mapping) else None
        return code, signo
    raw = _number(value)
    if raw is None:
        return None, None
    return (raw >> 8) & 0xFF, (raw & 0x7F) or None


def _state_of(value: Any) -> str:
    """The base state from a string (22.05) or a list of base state + flags (23.11+)."""
    states = [value] if isinstance(value, str) else list(value or [])
    for s in states:
        if str(s).upper() in SLURM_STATES:
            return str(s).upper()
    return str(states[0]).upper() if states else "UNKNOWN"


def _error_text(errors: object) -> str:
    """The ``errors`` of Slurm's JSON output as one line (``error``/``description`` of each)."""
    items = errors if isinstance(errors, list) else [errors]
    parts = []
    for e in items:
        if isinstance(e, dict):
            words = [str(e[k]) for k in ("error", "description") if e.get(k)]
            code = e.get("error_number")
            parts.append(" - ".join(dict.fromkeys(words)) + (f" (error {code})" if code else ""))
        else:
            parts.append(str(e))
    return "; ".join(parts)


def _hostname(job: Mapping[str, Any]) -> str:
    """The node(s) of a job across squeue's formats: the top-level ``nodes``, else
    ``job_resources``' ``nodes`` (a string, or ``{"list": ...}``, or 24.11's
    ``{"allocation": [{"name": ...}]}``), its ``allocated_nodes`` (before 23.02) or its
    ``scheduled_nodes``; ``job_resources`` is null for pending jobs on 24.11.5+."""
    if job.get("nodes"):
        return str(job["nodes"])
    res = job.get("job_resources")
    if not isinstance(res, Mapping):
        return str(job.get("scheduled_nodes") or "")
    nodes = res.get("nodes")
    if isinstance(nodes, str) and nodes:
        return nodes
    if isinstance(nodes, Mapping):
        if nodes.get("list"):
            return str(nodes["list"])
        allocation = nodes.get("allocation")
        if isinstance(allocation, list) and allocation:
            return ",".join(str(n.get("name", "")) for n in allocation if isinstance(n, Mapping))
    allocated = res.get("allocated_nodes")
    if isinstance(allocated, list) and allocated:
        return ",".join(str(n.get("nodename", "")) for n in allocated if isinstance(n, Mapping))
    return str(res.get("scheduled_nodes") or job.get("scheduled_nodes") or "")


def parse_squeue_json(text: str, asked: str | None = None) -> list[SlurmJobRecord]:
    """Parses ``squeue --json`` output into records (every job it lists).

    Args:
        text: squeue's output.
        asked: the one job id squeue was asked for (``squeue --json -j <id>``): a job listed
            without a ``job_id`` is taken as a component of it (as TorchX reads such output);
            without ``asked``, such jobs are skipped.

    Raises:
        SchedulerError: the output is not squeue JSON, or it reports errors (squeue exits 0
            with an ``errors`` list when the controller cannot be reached: not "no jobs").
    """
    try:
        data = json.loads(text)
        jobs = data["jobs"]
    except (ValueError, KeyError, TypeError) as e:
        raise SchedulerError(
            f"cannot parse `squeue --json` output ({e}); got: {text[:200]!r}. Check that squeue"
            " supports --json (Slurm >= 21.08)"
        ) from e
    errors = data.get("errors") if isinstance(data, dict) else None
    if errors:
        raise SchedulerError(f"`squeue --json` reported errors: {_error_text(errors)}")
    out = []
    for index, job in enumerate(jobs):
        job_id = _number(job.get("job_id"))
        if job_id is None and asked is None:
            continue
        het_id = _number(job.get("het_job_id"))
        array_id = _number(job.get("array_job_id"))
        array_task = _number(job.get("array_task_id"))
        app_id = str(het_id) if het_id else str(job_id)
        if array_id and array_task is not None:
            app_id = f"{array_id}_{array_task}"
        offset = (_number(job.get("het_job_offset")) or 0) if het_id else 0
        if job_id is None:
            app_id, offset = str(asked), index
        code, sig = _exit(job.get("exit_code"))
        derived, _ = _exit(job.get("derived_exit_code"))
        reason = str(job.get("state_reason") or "")
        state = _state_of(job.get("job_state"))
        out.append(
            SlurmJobRecord(
                job_id=str(job_id if job_id is not None else asked),
                app_id=app_id,
                offset=offset,
                name=str(job.get("name") or ""),
                state=state,
                reason="" if reason == "None" else reason,
                exit_code=code,
                derived_exit_code=derived,
                signal=sig,
                restarts=_number(job.get("restart_cnt")),
                nodes=_hostname(job),
                work_dir=str(job.get("current_working_directory") or ""),
                user=str(job.get("user_name") or job.get("user_id") or ""),
                comment=str(job.get("comment") or ""),
                submitted=float(_number(job.get("submit_time")) or 0) or None,
                ended=_end_time(state, job.get("end_time")),
            )
        )
    return out


def _finished(state: str) -> bool:
    """Whether the base Slurm ``state`` is a final one (``COMPLETED``, ``FAILED``...)."""
    return is_terminal(SLURM_STATES.get(state, AppState.UNKNOWN))


def _end_time(state: str, value: Any) -> float | None:
    """A finished job's ``end_time``; None while it runs (then it is the time limit's end)."""
    return float(_number(value) or 0) or None if _finished(state) else None


def app_ended(records: Iterable[SlurmJobRecord]) -> float | None:
    """When an app (its component records) ended: the last component's end; None while one
    still runs or an end is unknown."""
    ends = [r.ended for r in records]
    return None if not ends or None in ends else max(e for e in ends if e is not None)


def _sacct_exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    try:
        return int(code), (int(sig) or None) if sig else None
    except ValueError:
        return None, None


def _sacct_time(text: str) -> float | None:
    """Epoch seconds of sacct's local ``2026-11-28T10:40:12``; None for ``Unknown``/``None``."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def parse_sacct(text: str) -> list[SlurmJobRecord]:
    """Parses ``sacct --parsable2`` output (steps are skipped).

    The columns are read from sacct's header line when there is one (``JobID|JobName|...``,
    e.g. TorchX's ``sacct --parsable2 -j <id>`` with sacct's default columns), else they are
    :data:`SACCT_FIELDS` (``--noheader --format=<SACCT_FIELDS>``). Columns left out are
    unknown in the records.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    fields: tuple[str, ...] = SACCT_FIELDS
    if lines and lines[0].split("|", 1)[0] == "JobID":
        fields = tuple(lines.pop(0).split("|"))
    n = len(fields)
    out = []
    for line in lines:
        cols = line.split("|")
        if len(cols) < n or (len(cols) > n and fields[-1] != "WorkDir"):
            logger.debug("skipping sacct line %r", line)
            continue
        cols = [*cols[: n - 1], "|".join(cols[n - 1 :])]
        row = dict(zip(fields, cols, strict=True))
        job_id = row["JobID"]
        if "." in job_id:  # a step (``89.batch``, ``1853+0.0``; only without -X)
            continue
        if "WorkDir" in row and not row["WorkDir"]:
            # a placeholder ("allocation", no work dir) that slurmdbd shows for a few seconds
            # before the job's full record arrives: not an answer yet
            logger.debug("skipping incomplete sacct row %r", line)
            continue
        app_id, plus, offset = job_id.partition("+")
        code, sig = _sacct_exit(row.get("ExitCode", ""))
        derived, _ = _sacct_exit(row.get("DerivedExitCode", ""))
        nodes = row.get("NodeList", "")
        raw_state = row.get("State", "").strip()
        state = raw_state.split(" ")[0].rstrip("+").upper()
        out.append(
            SlurmJobRecord(
                job_id=row.get("JobIDRaw") or job_id,
                app_id=app_id,
                offset=int(offset) if plus and offset.isdigit() else 0,
                name=row.get("JobName", ""),
                state=state,
                exit_code=code,
                derived_exit_code=derived,
                signal=sig,
                nodes="" if nodes.startswith("None") else nodes,
                work_dir=row.get("WorkDir", ""),
                user=row.get("User", ""),
                submitted=_sacct_time(row.get("Submit", "")),
                ended=_sacct_time(row.get("End", "")) if _finished(state) else None,
                state_text=raw_state if " " in raw_state else "",
            )
        )
    return out


def group_by_app(records: Iterable[SlurmJobRecord]) -> dict[str, list[SlurmJobRecord]]:
    """Groups records by app id, components sorted by het offset (duplicates dropped)."""
    groups: dict[str, dict[int, SlurmJobRecord]] = {}
    for r in records:
        groups.setdefault(r.app_id, {})[r.offset] = r
    return {app: [comps[k] for k in sorted(comps)] for app, comps in groups.items()}


def role_and_replica(name: str) -> tuple[str, int]:
    """``("trainer", 1)`` from the component name ``trainer-1`` (``(name, 0)`` otherwise)."""
    role, sep, idx = name.rpartition("-")
    if sep and idx.isdigit():
        return role, int(idx)
    return name, 0


def _replica_state(app_state: AppState, record: SlurmJobRecord, steps_failed: bool) -> AppState:
    """A component shares its job's state, except when the job has finished and its steps'
    exit codes tell the replicas apart: a replica whose steps exited non-zero FAILED, and, when
    some replica did fail, one whose steps exited 0 SUCCEEDED."""
    state = appstate_from_slurm_state(record.state)
    if app_state == AppState.CANCELLED and not is_terminal(state):
        return AppState.CANCELLED
    if not is_terminal(state) or state == AppState.CANCELLED:
        return state
    if record.derived_exit_code:
        return AppState.FAILED
    if state == AppState.FAILED and steps_failed and record.derived_exit_code == 0:
        return AppState.SUCCEEDED
    return state


def describe_from_records(app_id: str, records: list[SlurmJobRecord]) -> DescribeAppResponse:
    """Builds a DescribeAppResponse from the (sorted) component records of one app."""
    leader = records[0]
    state = appstate_from_slurm_state(leader.state)
    if state == AppState.SUCCEEDED and any(
        not is_terminal(appstate_from_slurm_state(r.state)) for r in records[1:]
    ):
        # a heterogeneous job has succeeded only once its last component has ended
        state = AppState.RUNNING
    roles: dict[str, list[ReplicaStatus]] = {}
    steps_failed = any(r.derived_exit_code for r in records)
    for r in records:
        role, replica_id = role_and_replica(r.name)
        roles.setdefault(role, []).append(
            ReplicaStatus(
                id=replica_id,
                state=_replica_state(state, r, steps_failed),
                role=role,
                hostname=r.nodes,
            )
        )
    # Slurm's reason, else sacct's fuller state ("CANCELLED by 1000": who cancelled it)
    msg = leader.reason or leader.state_text
    if state == AppState.FAILED:
        detail = [f"slurm state {leader.state}"]
        if leader.exit_code is not None:
            detail.append(f"exit code {leader.exit_code}")
        if leader.signal:
            detail.append(f"signal {leader.signal}")
        if leader.reason:
            detail.append(f"reason {leader.reason}")
        msg = ", ".join(detail)
    response = DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=leader.restarts if leader.restarts is not None else -1,
        roles_statuses=[
            RoleStatus(role, sorted(reps, key=lambda x: x.id)) for role, reps in roles.items()
        ],
        # what Slurm can tell of the roles as submitted: their names and replica counts
        roles=[Role(name=role, image="", num_replicas=len(reps)) for role, reps in roles.items()],
    )
    if msg:
        response.msg = msg
    return response
