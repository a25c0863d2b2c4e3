"""``lsf``: runs apps on IBM Spectrum LSF with ``bsub``, ``bjobs``, ``bkill``.

* **Submission**: one LSF job per replica, named ``{app_id}-{role}-{replica_id}``; the app id is
  made on the client (``{app name}_{random}``, only ``[a-z0-9_]``). ``submit_dryrun`` returns a
  :class:`LsfBsubRequest` that prints as the exact ``bsub`` commands. Each job runs one shell
  command line (LSF runs it with ``/bin/sh``): every word is quoted, so arguments and environment
  values reach the replica exactly.
* **Containers**: a role whose ``image`` is an image name runs in ``docker run`` (``host_network``
  -> ``--network=host``, ``shm_size`` -> ``--shm-size``, ``jobdir`` mounted at the same path,
  GPUs -> ``--gpus``); an empty image or an absolute directory runs the entrypoint on the host.
* **Resources**: ``cpu`` -> ``-n`` with ``span[hosts=1]``, ``memMB`` -> ``rusage[mem=...]`` (MB),
  ``gpu`` -> ``-gpu "num=N"``.
* **Rendezvous**: replica 0 writes its host name to ``{jobdir}/{app_id}.rank0`` (``jobdir`` is
  meant to be on a shared filesystem); the other replicas wait for it. All export
  ``TORCHX_RANK0_HOST`` (``macros.rank0_env``). ``app_id`` and ``replica_id`` are literal.
* **Status**: ``bjobs -a -json -o "<fields>"`` (LSF 10.1.0.4+); when ``bjobs`` rejects ``-json``,
  the classic ``bjobs -a -w`` table (no exit codes there, so a killed job reads FAILED). ``EXIT``
  with exit code 130 (``bkill``) is CANCELLED. One call for any number of apps.
* **Logs**: stdout and stderr of each replica go to ``{jobdir}/{app_id}-{role}-{k}.out`` (``-o``
  without ``-e``); ``log_iter`` reads, tails and filters it. ``cancel`` runs ``bkill``.

Output formats follow IBM's LSF 10.1.0 documentation (bsub, bjobs ``-o``/``-json``, bkill).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers._logs import iter_file_lines
from torchx_core.schedulers.api import (
    AppValidationError,
    DescribeAppResponse,
    InvalidLogQueryError,
    ListAppResponse,
    Scheduler,
    SchedulerError,
    Stream,
    StructuredOpts,
    filter_regex,
    require_combined_streams,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.specs.errors import UnknownAppException

__all__ = [
    "BJOBS_FIELDS",
    "LSF_STATES",
    "LsfBsubRequest",
    "LsfJob",
    "LsfJobRecord",
    "LsfOpts",
    "LsfScheduler",
    "create_scheduler",
    "parse_bjobs_json",
    "parse_bjobs_table",
]

logger: logging.Logger = logging.getLogger(__name__)

RANK0_ENV = "TORCHX_RANK0_HOST"
CANCELLED_EXIT_CODE = 130  # what bkill's SIGINT leaves as the job's exit code

#: App ids (the prefix of every job name): lowercase letters, digits and ``_``.
APP_ID_RULES = IdRules(allowed="a-z0-9_", max_name_len=40, lower=True, sep="_")

# LSF job state (bjobs STAT) -> AppState; EXIT is refined by the exit code.
LSF_STATES: Mapping[str, AppState] = {
    "PEND": AppState.PENDING,
    "PROV": AppState.PENDING,
    "WAIT": AppState.PENDING,
    "PSUSP": AppState.PENDING,
    "USUSP": AppState.PENDING,
    "SSUSP": AppState.PENDING,
    "RUN": AppState.RUNNING,
    "DONE": AppState.SUCCEEDED,
    "EXIT": AppState.FAILED,
    "UNKWN": AppState.UNKNOWN,
    "ZOMBI": AppState.FAILED,
}

BJOBS_FIELDS = ("jobid", "stat", "exit_code", "job_name", "exec_host", "output_file")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class LsfOpts(StructuredOpts):
    """Run options of the ``lsf`` scheduler."""

    lsf_queue: str | None = field(default=None, metadata={"help": "the queue to submit to (-q)"})
    jobdir: str | None = field(
        default=None,
        metadata={
            "help": "directory for the job files and logs (a shared filesystem for"
            " multi-host apps); default: the current directory"
        },
    )
    container_workdir: str | None = field(
        default=None, metadata={"help": "working directory inside the container (-w of docker run)"}
    )
    host_network: bool = field(
        default=False, metadata={"help": "containers use the host's network (--network=host)"}
    )
    shm_size: str = field(default="64m", metadata={"help": "size of /dev/shm in containers"})


@dataclass
class LsfJob:
    """One ``bsub`` submission (one replica).

    Args:
        name: the LSF job name ``{app_id}-{role}-{replica_id}``.
        role: the role name.
        replica_id: the replica index.
        bsub_args: the ``bsub`` options (argv form, without the command).
        command: the shell command line LSF runs for the replica.
    """

    name: str
    role: str
    replica_id: int
    bsub_args: list[str]
    command: str

    def argv(self) -> list[str]:
        """The full ``bsub`` argv; LSF runs ``command`` with ``/bin/sh``."""
        return ["bsub", *self.bsub_args, self.command]


@dataclass
class LsfBsubRequest:
    """All ``bsub`` submissions of one app; ``str()`` prints them as a shell script."""

    app_id: str
    jobdir: str
    jobs: list[LsfJob]

    def materialize(self) -> str:
        """The exact commands ``schedule`` runs, as a shell script."""
        lines = [
            "#!/bin/sh",
            f"# torchx-suite lsf app {self.app_id}",
            f"mkdir -p {shlex.quote(self.jobdir)}",
        ]
        lines += [shlex.join(job.argv()) for job in self.jobs]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.materialize()


@dataclass
class LsfJobRecord:
    """One row of ``bjobs`` output."""

    job_id: str
    stat: str
    exit_code: int | None
    name: str
    exec_host: str = ""
    output_file: str = ""


# -- bjobs parsing ----------------------------------------------------------------------------


def _code(text: object) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def _empty(text: object) -> str:
    s = str(text or "").strip()
    return "" if s == "-" else s


def parse_bjobs_json(text: str) -> list[LsfJobRecord]:
    """Parses ``bjobs -json -o "jobid stat exit_code job_name exec_host output_file"`` output.

    Records holding ``ERROR`` (e.g. "Job <x> is not found") are skipped.
    """
    try:
        data = json.loads(text)
        rows = data.get("RECORDS", [])
    except (ValueError, AttributeError) as e:
        raise SchedulerError(f"cannot parse `bjobs -json` output ({e}): {text[:200]!r}") from e
    out = []
    for row in rows:
        if "ERROR" in row or "JOBID" not in row:
            continue
        out.append(
            LsfJobRecord(
                job_id=str(row["JOBID"]),
                stat=str(row.get("STAT", "UNKWN")),
                exit_code=_code(row.get("EXIT_CODE", "")),
                name=str(row.get("JOB_NAME", "")),
                exec_host=_empty(row.get("EXEC_HOST")),
                output_file=_empty(row.get("OUTPUT_FILE")),
            )
        )
    return out


def parse_bjobs_table(text: str) -> list[LsfJobRecord]:
    """Parses the classic ``bjobs -a -w`` table::

        JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME
        1234    alice   RUN   normal     hostA       hostB       app-r-0    Oct 22 10:02
        1235    alice   PEND  normal     hostA                   app-r-1    Oct 22 10:02

    EXEC_HOST is empty while a job is pending; SUBMIT_TIME is always three words. The table has
    no exit codes.
    """
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] == "JOBID" or not words[0].isdigit():
            continue
        if len(words) == 10:
            host, name = words[5], words[6]
        elif len(words) == 9:
            host, name = "", words[5]
        else:
            logger.debug("skipping bjobs line %r", line)
            continue
        out.append(
            LsfJobRecord(job_id=words[0], stat=words[2], exit_code=None, name=name, exec_host=host)
        )
    return out


def _state(record: LsfJobRecord) -> AppState:
    if record.stat == "EXIT" and record.exit_code == CANCELLED_EXIT_CODE:
        return AppState.CANCELLED
    return LSF_STATES.get(record.stat, AppState.UNKNOWN)


def _app_state(states: list[AppState]) -> AppState:
    if not states:
        return AppState.UNKNOWN
    if all(is_terminal(s) for s in states):
        for s in (AppState.FAILED, AppState.CANCELLED):
            if s in states:
                return s
        return AppState.SUCCEEDED
    if AppState.RUNNING in states:
        return AppState.RUNNING
    if AppState.UNKNOWN in states:
        return AppState.UNKNOWN
    return AppState.PENDING


def _no_job(result: subprocess.CompletedProcess[str]) -> bool:
    text = result.stdout + result.stderr
    return "No job found" in text or "is not found" in text or "No unfinished job" in text


def _split_name(name: str) -> tuple[str, str, int] | None:
    app_id, sep, rest = name.partition("-")
    role, sep2, k = rest.rpartition("-")
    if not (sep and sep2 and k.isdigit()):
        return None
    return app_id, role, int(k)


# -- the scheduler ----------------------------------------------------------------------------

CommandRunner = Callable[..., "subprocess.CompletedProcess[str]"]


def run_command(args: Sequence[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs an LSF command, capturing text output (the default ``run_cmd``)."""
    try:
        return subprocess.run(
            list(args), input=input, capture_output=True, text=True, check=False, timeout=120
        )
    except FileNotFoundError as e:
        raise SchedulerError(
            f"`{args[0]}` is not on PATH; source your LSF profile"
            " (e.g. `. $LSF_ENVDIR/profile.lsf`)"
        ) from e


class LsfScheduler(Scheduler[LsfBsubRequest]):
    """Runs apps on LSF through ``bsub``/``bjobs``/``bkill``.

    Args:
        session_name: the runner session name.
        run_cmd: runs a command, returns ``CompletedProcess[str]`` (default: subprocess).
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates

    def __init__(self, session_name: str, run_cmd: CommandRunner | None = None) -> None:
        super().__init__("lsf", session_name)
        self._run_cmd: CommandRunner = run_cmd or run_command
        self._json_ok: bool | None = None

    def _run_opts(self) -> runopts:
        return LsfOpts.as_runopts()

    # -- dry run ----------------------------------------------------------------------------

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[LsfBsubRequest]:
        opts = LsfOpts.from_cfg(cfg)
        jobdir = os.path.abspath(os.path.expanduser(opts.jobdir or os.getcwd()))
        app_id = unique_id(app.name, APP_ID_RULES)
        problems = []
        if "%" in jobdir:
            problems.append(
                f"jobdir {jobdir!r} holds '%', which bsub reads as a file name"
                " pattern (%J, %I); choose a directory without '%'"
            )
        jobs = []
        for role in app.roles:
            if role.max_retries:
                logger.warning(
                    "role %s: the lsf scheduler does not retry (max_retries=%s ignored)",
                    role.name,
                    role.max_retries,
                )
            if not _NAME.match(role.name):
                problems.append(
                    f"role name {role.name!r} is not usable in an LSF job name; use"
                    " letters, digits, '_' and '.'"
                )
            bad_env = [k for k in role.env if not _ENV_NAME.match(k)]
            if bad_env:
                problems.append(
                    f"role `{role.name}` has invalid environment variable names {bad_env}"
                )
            for k in range(role.num_replicas):
                jobs.append(
                    self._job(
                        app_id, role, k, opts, jobdir, is_rank0=role is app.roles[0] and k == 0
                    )
                )
        if problems:
            raise AppValidationError(f"app `{app.name}` cannot run on lsf: " + "; ".join(problems))
        return AppDryRunInfo(LsfBsubRequest(app_id, jobdir, jobs), str)

    def _job(
        self, app_id: str, role: Role, k: int, opts: LsfOpts, jobdir: str, is_rank0: bool
    ) -> LsfJob:
        name = f"{app_id}-{role.name}-{k}"
        values = macros.Values(
            img_root=role.image, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV
        )
        resolved = values.apply(role)
        args = ["-J", name, "-cwd", jobdir, "-o", os.path.join(jobdir, f"{name}.out")]
        if opts.lsf_queue:
            args += ["-q", opts.lsf_queue]
        res = role.resource
        if res.cpu > 0:
            args += ["-n", str(res.cpu)]
        req = "span[hosts=1]"
        if res.memMB > 0:
            req += f" rusage[mem={res.memMB}]"
        args += ["-R", req]
        if res.gpu > 0:
            args += ["-gpu", f"num={res.gpu}"]
        env = {**resolved.env}
        use_container = bool(role.image) and not role.image.startswith("/")
        if use_container:
            run = [
                "docker",
                "run",
                "--rm",
                f"--name={name}",
                f"--shm-size={opts.shm_size}",
                "-v",
                f"{jobdir}:{jobdir}",
                "-e",
                RANK0_ENV,
            ]
            if opts.host_network:
                run.append("--network=host")
            if opts.container_workdir:
                run += ["-w", opts.container_workdir]
            if res.gpu > 0:
                run += ["--gpus", str(res.gpu)]
            for key, value in env.items():
                run += ["-e", f"{key}={value}"]
            run += ["--entrypoint", role.entrypoint, role.image, *resolved.args]
            command = shlex.join(run)
        else:
            command = shlex.join(
                ["env", *(f"{k2}={v}" for k2, v in env.items()), role.entrypoint, *resolved.args]
            )
            if role.image.startswith("/"):
                command = f"cd {shlex.quote(role.image)} && exec {command}"
        rank0 = shlex.quote(os.path.join(jobdir, f"{app_id}.rank0"))
        if is_rank0:
            prologue = (
                f'{RANK0_ENV}=$(hostname); echo "${RANK0_ENV}" > {rank0}.tmp &&'
                f" mv {rank0}.tmp {rank0}; export {RANK0_ENV}; "
            )
        else:
            prologue = (
                f"while [ ! -s {rank0} ]; do sleep 1; done;"
                f" {RANK0_ENV}=$(cat {rank0}); export {RANK0_ENV}; "
            )
        return LsfJob(
            name=name,
            role=role.name,
            replica_id=k,
            bsub_args=args,
            command=prologue + ("" if command.startswith("cd ") else "exec ") + command,
        )

    # -- submit -----------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[LsfBsubRequest]) -> str:
        """Runs one ``bsub`` per replica; returns the app id."""
        req = dryrun_info.request
        os.makedirs(req.jobdir, exist_ok=True)
        for job in req.jobs:
            result = self._run_cmd(job.argv())
            m = re.search(r"Job <(\d+)> is submitted", result.stdout or "")
            if result.returncode != 0 or not m:
                raise SchedulerError(
                    f"bsub for {job.name} failed (exit {result.returncode}):"
                    f" {(result.stderr or result.stdout).strip()}"
                )
            logger.info("submitted LSF job %s as %s", job.name, m.group(1))
        return req.app_id

    # -- status -----------------------------------------------------------------------------

    def _bjobs(self, app_id: str | None) -> list[LsfJobRecord]:
        name = ["-J", f"{app_id}-*"] if app_id else []
        if self._json_ok is not False:
            r = self._run_cmd(["bjobs", "-a", "-json", "-o", " ".join(BJOBS_FIELDS), *name])
            if r.stdout.lstrip().startswith("{"):  # errors ("not found") come as JSON records too
                self._json_ok = True
                return parse_bjobs_json(r.stdout)
            if _no_job(r):
                return []
            self._json_ok = False
            logger.info("bjobs rejected -json (%s); reading the classic table", r.stderr.strip())
        r = self._run_cmd(["bjobs", "-a", "-w", *name])
        if r.returncode != 0 and not _no_job(r):
            raise SchedulerError(f"`bjobs -a -w` failed (exit {r.returncode}): {r.stderr.strip()}")
        return parse_bjobs_table(r.stdout)

    def _records(self, app_id: str | None) -> dict[str, list[tuple[str, int, LsfJobRecord]]]:
        apps: dict[str, list[tuple[str, int, LsfJobRecord]]] = {}
        for rec in self._bjobs(app_id):
            parts = _split_name(rec.name)
            if parts is None or (app_id and parts[0] != app_id):
                continue
            apps.setdefault(parts[0], []).append((parts[1], parts[2], rec))
        return apps

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's status from one ``bjobs`` call; None when LSF knows none of its jobs."""
        return _describe_records(app_id, self._records(app_id).get(app_id))

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps from one ``bjobs -a`` call (every job of the user)."""
        records = self._records(None)
        return {a: _describe_records(a, records.get(a)) for a in dict.fromkeys(app_ids)}

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every app of the current user that ``bjobs -a`` still shows (one call)."""
        return [
            ListAppResponse(app_id=a, state=_app_state([_state(r) for _, _, r in recs]))
            for a, recs in sorted(self._records(None).items())
        ]

    # -- logs & cancel ----------------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Lines of the replica's job output file (stdout and stderr together)."""
        require_combined_streams(streams, "lsf job output files")
        found = self._records(app_id).get(app_id)
        if not found:
            raise UnknownAppException(app_id)
        rec = next((r for role, i, r in found if role == role_name and i == k), None)
        if rec is None:
            raise InvalidLogQueryError(
                f"app {app_id} has no replica {role_name}/{k}; it has"
                f" {sorted((role, i) for role, i, _ in found)}"
            )
        path = rec.output_file
        if not path:
            cwd_guess = os.getcwd()
            path = os.path.join(cwd_guess, f"{rec.name}.out")

        def is_done() -> bool:
            d = self.describe(app_id)
            return d is None or is_terminal(d.state)

        lines: Iterable[str] = iter_file_lines(
            path,
            should_tail=should_tail,
            is_done=is_done,
            poll_interval=0.5,
            wait_for_file=5.0 if should_tail else 0.0,
        )
        return filter_regex(regex, lines) if regex else lines

    def _cancel_existing(self, app_id: str) -> None:
        found = self._records(app_id).get(app_id) or []
        ids = [rec.job_id for _, _, rec in found if not is_terminal(_state(rec))]
        if ids:
            r = self._run_cmd(["bkill", *ids])
            if r.returncode != 0 and "already finished" not in r.stderr:
                raise SchedulerError(f"bkill {' '.join(ids)} failed: {r.stderr.strip()}")


def _describe_records(
    app_id: str, found: list[tuple[str, int, LsfJobRecord]] | None
) -> DescribeAppResponse | None:
    """The app's status from its ``bjobs`` records (None when there are none)."""
    if not found:
        return None
    roles: dict[str, list[ReplicaStatus]] = {}
    for role, k, rec in found:
        roles.setdefault(role, []).append(ReplicaStatus(k, _state(rec), role, rec.exec_host))
    state = _app_state([_state(rec) for _, _, rec in found])
    resp = DescribeAppResponse(
        app_id=app_id,
        state=state,
        roles_statuses=[
            RoleStatus(r, sorted(reps, key=lambda x: x.id)) for r, reps in roles.items()
        ],
        roles=[Role(name=r, image="", num_replicas=len(reps)) for r, reps in roles.items()],
    )
    failed = [f"{rec.name}: exit code {rec.exit_code}" for _, _, rec in found if rec.stat == "EXIT"]
    if failed:
        resp.msg = "; ".join(failed)
    return resp


def create_scheduler(session_name: str, **kwargs: object) -> LsfScheduler:
    """Creates the ``lsf`` scheduler (``run_cmd=`` may be injected)."""
    run_cmd = kwargs.get("run_cmd")
    return LsfScheduler(session_name, run_cmd=run_cmd if callable(run_cmd) else None)
