"""``slurm``: runs apps as Slurm batch jobs (``sbatch``), one heterogeneous job per app.

* **Submission**: ``submit_dryrun`` builds a :class:`SlurmBatchRequest` whose ``str()`` is the
  exact batch script; ``schedule`` runs ``sbatch --parsable <script file>`` (a temporary file,
  TorchX's shape; removed once sbatch has read it). With more than one replica
  the job is heterogeneous: one het component per replica (named ``{role}-{replica_id}``, one
  node each) and one ``srun`` with a ``--het-group`` per replica.
* **Resources**: ``cpu`` -> ``--cpus-per-task``, ``memMB`` -> ``--mem`` (left out with
  ``nomem=True``, for clusters that forbid it), ``gpu`` -> ``--gpus-per-node`` (Slurm >= 24.11 or
  unknown), ``--gpus-per-task`` (19.05 - 24.05) or ``--gres=gpu:N`` (older). The version comes from
  the injected ``probe``, asked only when a role wants GPUs; by default from :func:`version`
  (TorchX's ``sinfo --version``, looked up at call time so ``mock.patch`` of it works).
* **Macros**: ``app_id`` is ``$SLURM_JOB_ID`` (expanded by the batch script), ``replica_id`` the
  replica index, ``rank0_env`` is ``TORCHX_RANK0_HOST``: the address of the node running replica 0
  of the first role (its Slurm ``NodeAddr``), exported by the batch script.
* **Retries**: ``max_retries`` (the largest over the roles) requeues the whole job
  (``scontrol requeue``) while ``SLURM_RESTART_COUNT`` is below it. Slurm delays a requeued job's
  start (by about two minutes on 22.05). Every job is submitted with ``--requeue``, as TorchX
  does (``max_retries=0`` too): a job preempted or hit by a node failure is requeued by Slurm.
* **Logs**: each replica writes ``slurm-{app_id}-{role}-{replica_id}.out`` (stdout) and
  ``.err`` (stderr), kept apart as in TorchX, into the log dir: ``job_dir`` if given, else the
  submitting process's cwd. The dir is the job's
  ``--chdir``, so ``log_iter`` finds it again through Slurm from any process.
* **Status**: ``describe`` asks ``squeue --json --jobs=<id>`` (filtered client side: Slurm 22.05
  ignores ``-j``) and falls back to ``sacct`` for jobs squeue has forgotten (or fails on), each
  through ``subprocess.check_output`` as TorchX; :meth:`describe_many` and ``list`` use one call
  for many apps. ``cancel`` runs ``scancel``.
* **Workspace**: with ``job_dir`` set, the workspace is copied into it at submit time and the
  replicas run there; without it, a single-directory workspace is used in place.

Commands go through ``subprocess`` as TorchX calls it (``check_output`` for one app's status,
``run(..., check=True)`` for the others, each with a time-out: ``_probe.py``), or through an
injected ``run_cmd`` so unit tests use a fake cluster.
"""

from __future__ import annotations

import builtins
import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from torchx_core.schedulers._logs import SharedEndCheck, iter_files_lines
from torchx_core.schedulers.api import (
    AppValidationError,
    DescribeAppResponse,
    InvalidLogQueryError,
    ListAppResponse,
    ReplicaUsage,
    Scheduler,
    SchedulerError,
    Stream,
    StructuredOpts,
    UnsupportedFeatureError,
    filter_regex,
)
from torchx_core.schedulers.slurm import _usage
from torchx_core.schedulers.slurm._comment import TAG, parse_comment, submit_comment
from torchx_core.schedulers.slurm._probe import (
    CommandRunner,
    CommandSlurmProbe,
    SlurmProbe,
    StaticSlurmProbe,
    check_output,
    run_command,
    version,
)
from torchx_core.schedulers.slurm._script import (
    RANK0_ENV,
    SlurmBatchRequest,
    SlurmReplicaRequest,
    log_file_name,
)
from torchx_core.schedulers.slurm._status import (
    SACCT_FIELDS,
    SLURM_STATES,
    SlurmJobRecord,
    app_ended,
    appstate_from_slurm_state,
    describe_from_records,
    group_by_app,
    parse_sacct,
    parse_squeue_json,
    role_and_replica,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    RetryPolicy,
    Role,
    Workspace,
    is_terminal,
    runopts,
)
from torchx_core.specs.errors import UnknownAppException
from torchx_core.workspace.api import WorkspaceMixin, as_workspace, copy_workspace

__all__ = [
    "RANK0_ENV",
    "SLURM_STATES",
    "CommandRunner",
    "CommandSlurmProbe",
    "SlurmBatchRequest",
    "SlurmOpts",
    "SlurmProbe",
    "SlurmReplicaRequest",
    "SlurmScheduler",
    "StaticSlurmProbe",
    "appstate_from_slurm_state",
    "create_scheduler",
    "run_command",
    "version",
]

logger: logging.Logger = logging.getLogger(__name__)

#: Followed logs (``should_tail``) of this process learn that their apps ended from one batched
#: ``squeue`` per interval for all of them, not one per replica and poll.
_FOLLOWED = SharedEndCheck(interval=2.0)

_ROLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@-]*$")


@dataclass
class SlurmOpts(StructuredOpts):
    """Run options of the ``slurm`` scheduler (sbatch options of the same name)."""

    partition: str | None = field(
        default=None,
        metadata={"help": "the partition to run in (--partition); cluster default if unset"},
    )
    time: str | None = field(
        default=None,
        metadata={"help": "wall time limit per job (--time), e.g. '30', '1:00:00', '2-00:00:00'"},
    )
    account: str | None = field(
        default=None, metadata={"help": "the account to charge (--account)"}
    )
    qos: str | None = field(
        default=None, metadata={"help": "the Quality of Service (QoS) to run under (--qos)"}
    )
    constraint: str | None = field(
        default=None, metadata={"help": "node features the job needs (--constraint)"}
    )
    comment: str | None = field(
        default=None,
        metadata={
            "help": "a comment on the job (--comment); torchx appends `torchx:app=<name>` (and the"
            " owner of the app, see ARCHITECTURE.md)"
        },
    )
    mail_user: str | None = field(
        default=None, metadata={"help": "who gets mail about the job (--mail-user)"}
    )
    mail_type: str | None = field(
        default=None,
        metadata={"help": "which events send mail (--mail-type), e.g. 'END,FAIL' or 'ALL'"},
    )
    exclusive: bool = field(
        default=False, metadata={"help": "do not share the nodes with other jobs (--exclusive)"}
    )
    nomem: bool = field(
        default=False,
        metadata={"help": "leave out --mem (for clusters that forbid or manage memory requests)"},
    )
    job_dir: str | None = field(
        default=None,
        metadata={
            "help": "the directory the job runs in and writes its logs to; the workspace is"
            " copied there. Default: the current directory"
        },
    )


# -- the default probe ------------------------------------------------------------------


class _VersionProbe:
    """The default probe: :func:`version`, looked up when asked (so patching it works)."""

    def version(self) -> tuple[int, int] | None:
        return version()


def _should_use_gpus_per_node_from_version() -> bool:
    """Whether this Slurm (:func:`version`) takes ``--gpus-per-node`` (24.11 and later), as
    TorchX; older ones get ``--gpus-per-task`` (see :func:`gpu_options`)."""
    return version() >= (24, 11)


# -- the scheduler ----------------------------------------------------------------------------


class SlurmScheduler(WorkspaceMixin[None], Scheduler[SlurmBatchRequest]):
    """Runs apps on Slurm through its command-line tools (``sbatch``, ``squeue``, ``sacct``,
    ``scancel``).

    Args:
        session_name: the runner session name.
        run_cmd: runs a command and returns a ``CompletedProcess[str]`` (default: subprocess).
        probe: cluster facts for dry-run (default: :func:`version` when needed; with an
            injected ``run_cmd``, ``sbatch --version`` through it).
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates
    _hook_takes_workspace = True  # its hook takes the Workspace, not a path

    def __init__(
        self,
        session_name: str,
        run_cmd: CommandRunner | None = None,
        probe: SlurmProbe | None = None,
    ) -> None:
        super().__init__("slurm", session_name)
        self._injected_run_cmd = run_cmd
        self._run_cmd: CommandRunner = run_cmd or run_command
        if probe is None:
            probe = _VersionProbe() if run_cmd is None else CommandSlurmProbe(self._run_cmd)
        self._probe: SlurmProbe = probe

    # -- options & workspace ----------------------------------------------------------------

    def _run_opts(self) -> runopts:
        # SlurmOpts' fields, listed under TorchX's option names (``mail-user``, ``mail-type``)
        opts = runopts()
        for name, opt in SlurmOpts.as_runopts():
            opts.add(
                _TORCHX_OPT_NAMES.get(name, name),
                opt.opt_type,
                opt.help,
                default=opt.default,
                required=opt.is_required,
            )
        return opts

    def _requires_resource(self) -> bool:
        # as TorchX (whose Slurm scheduler skips the resource check): a role without a resource
        # gets the partition's defaults (no --cpus-per-task/--mem/--gpus-* words)
        return False

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Points ``role.image`` at where the workspace will be (copied at submit time)."""
        job_dir = cfg.get("job_dir")
        ws = as_workspace(workspace)
        if job_dir:
            role.image = os.path.abspath(str(job_dir))
            return
        if ws.is_unmapped_single_project():
            role.image = os.path.abspath(os.path.expanduser(next(iter(ws.projects))))
            return
        raise UnsupportedFeatureError(
            f"workspace {str(ws)!r} maps several projects; the slurm scheduler can only merge them"
            " into a job_dir: pass -cfg job_dir=<shared directory>"
        )

    # -- dry run ----------------------------------------------------------------------------

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[SlurmBatchRequest]:
        opts = SlurmOpts.from_cfg(_dash_aliases(cfg))
        log_dir = os.path.abspath(os.path.expanduser(opts.job_dir or os.getcwd()))
        problems = []
        if "%" in log_dir:
            problems.append(
                f"job_dir {log_dir!r} holds '%', which Slurm reads as a file name"
                " pattern; choose a directory without '%'"
            )
        replicas: dict[str, SlurmReplicaRequest] = {}
        names = [r.name for r in app.roles]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            problems.append(f"role names {dupes} are used twice; give every role its own name")
        for role in app.roles:
            if not _ROLE_NAME.match(role.name):
                problems.append(
                    f"role name {role.name!r} is not usable as a Slurm job name; use letters,"
                    " digits and '_', '.', '-', '+', '@'"
                )
            if role.retry_policy != RetryPolicy.APPLICATION and role.max_retries:
                logger.warning(
                    "role %s: slurm requeues the whole job; retry_policy %s acts as APPLICATION",
                    role.name,
                    role.retry_policy,
                )
            if role.mounts:
                logger.warning(
                    "role %s: slurm ignores mounts (jobs see the node's filesystem)", role.name
                )
            for k in range(role.num_replicas):
                replica = SlurmReplicaRequest.from_role(
                    f"{role.name}-{k}", role, opts, replica_id=k, probe=self._probe
                )
                problems += [p for p in replica.validate() if p not in problems]
                replicas[replica.name] = replica
        job_opts: dict[str, str | None] = {"chdir": log_dir, "output": "slurm-%j.out"}
        comment = submit_comment(opts.comment, app.name)
        if comment:
            job_opts["comment"] = comment
        # as TorchX: mail and account options are words of the sbatch command (the account is
        # also on every het component's #SBATCH line); --requeue is on every component
        cmd = ["sbatch", "--parsable"]
        for key, value in (
            ("mail-user", opts.mail_user),
            ("mail-type", opts.mail_type),
            ("account", opts.account),
        ):
            if value:
                cmd.append(f"--{key}={value}")
        max_retries = max((r.max_retries for r in app.roles), default=0)
        workspace = app.roles[0].workspace if app.roles else None
        request = SlurmBatchRequest(
            cmd=cmd,
            replicas=replicas,
            job_opts=job_opts,
            log_dir=log_dir,
            max_retries=max_retries,
            app_name=app.name,
            workspace_src=str(workspace) if workspace and opts.job_dir else None,
        )
        try:
            request.materialize()  # checks every #SBATCH value
        except AppValidationError as e:
            problems.append(str(e))
        if problems:
            raise AppValidationError(
                f"app `{app.name}` cannot run on slurm: " + "; ".join(problems)
            )
        return AppDryRunInfo(request, _format_request)

    # -- submit -----------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """Creates the log dir (copying the workspace there), runs ``sbatch --parsable``."""
        req = dryrun_info.request
        os.makedirs(req.log_dir, exist_ok=True)
        if req.workspace_src:
            copy_workspace(req.workspace_src, req.log_dir)
        script = req.materialize()
        try:
            result = self._sbatch(req.cmd, script)
        except SchedulerError as e:
            if "Memory specification" in str(e) and any(
                "mem" in r.sbatch_opts for r in req.replicas.values()
            ):
                # TorchX drops --mem at dry run when the partition reports <= 1000 MB per node
                # (an `sinfo` per dry run, ~9 s when the controller is unreachable); ours asks
                # nothing at dry run and says here what to do (and, from sinfo, how much the
                # partition has)
                partition = next(
                    (r.sbatch_opts.get("partition") for r in req.replicas.values()), None
                )
                memmb = self._partition_memmb(partition)
                has = (
                    f" (partition {partition or '(default)'}: {memmb} MB per node)"
                    if memmb is not None
                    else ""
                )
                raise SchedulerError(
                    f"{e}\nThe roles ask for more memory per node than the partition has{has}, or"
                    " the cluster does not manage memory: lower the roles' memMB, or pass"
                    " -cfg nomem=True to leave out --mem"
                ) from e
            raise
        job_id = result.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SchedulerError(f"sbatch answered {result.stdout!r}; expected a job id")
        try:  # readable by its owner only: the script holds the roles' environment values
            copy = os.path.join(req.log_dir, f"slurm-{job_id}-torchx.sbatch")
            fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            os.fchmod(fd, 0o600)  # also a copy that was already there
            with os.fdopen(fd, "w") as f:
                f.write(script)
        except OSError as e:  # a copy for humans only
            logger.debug("could not keep a copy of the batch script: %s", e)
        logger.info("submitted slurm job %s (logs in %s)", job_id, req.log_dir)
        return job_id

    def _sbatch(self, cmd: Sequence[str], script: str) -> subprocess.CompletedProcess[str]:
        """Runs ``cmd`` with the batch script as its last word, as TorchX: the script is written
        to a temporary file (sbatch sends its text to the controller) removed afterwards."""
        fd, path = tempfile.mkstemp(prefix="torchx-sbatch-", suffix=".sh")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(script)
            return self._run([*cmd, path])
        finally:
            os.unlink(path)

    def _run(
        self,
        args: Sequence[str],
        input: str | None = None,
        ok: Callable[[subprocess.CompletedProcess[str]], bool] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        result = (
            self._run_cmd(list(args), input=input)
            if input is not None
            else self._run_cmd(list(args))
        )
        if result.returncode != 0 and not (ok and ok(result)):
            raise SchedulerError(
                f"`{' '.join(args)}` failed with exit code {result.returncode}:"
                f" {(result.stderr or result.stdout).strip()}"
            )
        return result

    # -- status -----------------------------------------------------------------------------

    def _squeue(self, app_ids: Sequence[str] | None) -> list[SlurmJobRecord]:
        args = ["squeue", "--json"]
        if app_ids:
            args.append("--jobs=" + ",".join(app_ids))
        result = self._run_cmd(args)
        if result.returncode != 0 and app_ids:
            # newer Slurm fails on ids it forgot: ask for everything and filter here
            result = self._run_cmd(["squeue", "--json"])
        if result.returncode != 0:
            raise SchedulerError(
                f"`squeue --json` failed with exit code {result.returncode}:"
                f" {(result.stderr or result.stdout).strip()}"
            )
        return parse_squeue_json(result.stdout)

    def _sacct(self, app_ids: Sequence[str] | None) -> list[SlurmJobRecord]:
        args = ["sacct", "-X", "--parsable2", "--noheader", "--format=" + ",".join(SACCT_FIELDS)]
        if app_ids:
            args.append("--jobs=" + ",".join(app_ids))
        result = self._run_cmd(args)
        if result.returncode != 0:
            # e.g. "Slurm accounting storage is disabled": squeue is all we have
            logger.debug("sacct unavailable: %s", (result.stderr or result.stdout).strip())
            return []
        return parse_sacct(result.stdout)

    def _records(self, app_ids: Sequence[str]) -> dict[str, list[SlurmJobRecord]]:
        ids = [a for a in dict.fromkeys(app_ids) if _valid_app_id(a)]
        if not ids:
            return {}
        wanted = set(ids)
        found = {k: v for k, v in group_by_app(self._squeue(ids)).items() if k in wanted}
        missing = [a for a in ids if a not in found]
        if missing:
            found.update(
                {k: v for k, v in group_by_app(self._sacct(missing)).items() if k in wanted}
            )
        return found

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's status from ``squeue --json``, else ``sacct``; None when Slurm forgot it.

        As TorchX: :meth:`_describe_squeue` first, then :meth:`_describe_sacct` (also when the
        first raises ``CalledProcessError``).
        """
        try:
            desc = self._describe_squeue(app_id)
        except subprocess.CalledProcessError as e:
            logger.info("squeue cannot describe %s (%s); asking sacct", app_id, e.stderr)
            desc = None
        return desc or self._describe_sacct(app_id)

    def _output(self, args: Sequence[str]) -> str:
        """A command's stdout; ``CalledProcessError`` when it fails (TorchX's contract of
        ``_describe_squeue``/``_describe_sacct``). By default ``subprocess.check_output`` (see
        :func:`check_output`), else the injected ``run_cmd``."""
        if self._injected_run_cmd is None:
            return check_output(args)
        result = self._injected_run_cmd(list(args))
        if result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, list(args), result.stdout, result.stderr
            )
        return result.stdout

    def _describe_squeue(self, app_id: str) -> DescribeAppResponse | None:
        """The app's status from ``squeue --json --jobs=<app_id>`` alone (None: squeue does not
        list it). Raises ``CalledProcessError`` when squeue fails (newer Slurm, for an id it
        forgot), as TorchX; :meth:`describe` then asks sacct."""
        if not _valid_app_id(app_id):
            return None
        text = self._output(["squeue", "--json", f"--jobs={app_id}"])
        records = group_by_app(parse_squeue_json(text, asked=app_id)).get(app_id)
        return describe_from_records(app_id, records) if records else None

    def _describe_sacct(self, app_id: str) -> DescribeAppResponse | None:
        """The app's status from ``sacct`` alone (None: no accounting record of it, or sacct
        failed: accounting off)."""
        if not _valid_app_id(app_id):
            return None
        fmt = ",".join(SACCT_FIELDS)
        try:
            text = self._output(
                ["sacct", "--parsable2", "-X", f"--format={fmt}", f"--jobs={app_id}"]
            )
        except subprocess.CalledProcessError as e:
            logger.info("sacct cannot describe %s (%s)", app_id, e.stderr)
            return None
        records = group_by_app(parse_sacct(text)).get(app_id)
        return describe_from_records(app_id, records) if records else None

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps with one ``squeue`` (and at most one ``sacct``) call."""
        ids = list(app_ids)
        records = self._records(ids)
        return {a: describe_from_records(a, records[a]) if a in records else None for a in ids}

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """The current user's jobs: ``squeue`` (live and recently finished) plus today's
        ``sacct`` rows when accounting is on. Two calls, whatever the number of jobs."""
        me = _current_user()
        groups = group_by_app(self._sacct(None))
        groups.update(group_by_app(self._squeue(None)))
        out = []
        for app_id, records in groups.items():
            leader = records[0]
            if me and leader.user not in me:
                continue
            comment = parse_comment(leader.comment)
            replicas: dict[str, int] = {}
            for r in records:
                state = appstate_from_slurm_state(r.state).name
                replicas[state] = replicas.get(state, 0) + 1
            out.append(
                ListAppResponse(
                    app_id=app_id,
                    state=appstate_from_slurm_state(leader.state),
                    name=comment.app or leader.name,
                    created=leader.submitted,
                    owner=comment.owner or None,
                    replicas=replicas,
                    ended=app_ended(records),
                )
            )
        return sorted(out, key=lambda r: (len(r.app_id), r.app_id))

    def _list_squeue(self) -> builtins.list[ListAppResponse]:
        """Every job ``squeue --json`` lists (all users'), one row per app with the job's
        name, as TorchX's ``_list_squeue``; het components after the first are left out."""
        records = self._squeue(None)
        return [
            ListAppResponse(app_id=r.app_id, state=appstate_from_slurm_state(r.state), name=r.name)
            for r in records
            if r.job_id == r.app_id
        ]

    def _partition_memmb(self, partition: str | None) -> int | None:
        """The memory (MB) per node of ``partition`` (the default one when None) from
        ``sinfo --format=%P,%m``, as TorchX; None when unknown. Not asked at dry run (see
        ``docs/compat-notes-schedulers.md``): only to explain sbatch's memory refusal."""
        try:
            result = self._run_cmd(["sinfo", "--format=%P,%m"])
        except SchedulerError as e:
            logger.info("cannot ask sinfo for the partitions' memory: %s", e)
            return None
        if result.returncode != 0:
            return None
        for line in result.stdout.splitlines()[1:]:
            name, _, mem = line.strip().partition(",")
            default = name.endswith("*")
            if (partition is None and default) or name.rstrip("*") == partition:
                digits = mem.strip().rstrip("+")
                return int(digits) if digits.isdigit() else None
        return None

    # -- logs -------------------------------------------------------------------------------

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[str]:
        """``slurm-{app_id}-{role}-{k}.out`` and/or ``.err`` in the job's directory."""
        records = self._records([app_id]).get(app_id)
        if not records:
            raise UnknownAppException(app_id)
        replicas: dict[str, set[int]] = {}
        for r in records:
            role, idx = role_and_replica(r.name)
            replicas.setdefault(role, set()).add(idx)
        if role_name not in replicas:
            raise InvalidLogQueryError(
                f"app {app_id} has no role {role_name!r}; its roles are {sorted(replicas)}"
            )
        if k not in replicas[role_name]:
            raise InvalidLogQueryError(
                f"role {role_name!r} of app {app_id} has replicas {sorted(replicas[role_name])};"
                f" got k={k}"
            )
        work_dir = records[0].work_dir
        exts = {Stream.STDOUT: ["out"], Stream.STDERR: ["err"]}.get(streams, ["out", "err"])  # type: ignore[arg-type]
        paths = [os.path.join(work_dir, log_file_name(app_id, role_name, k, e)) for e in exts]
        return paths

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
        """Lines of ``slurm-{app_id}-{role}-{k}.out`` (stdout) and ``.err`` (stderr), as TorchX.

        ``streams=Stream.STDOUT``/``STDERR`` reads one file; ``None``/``COMBINED`` reads both
        (following, in the order lines arrive; their relative order is approximate). TorchX
        reads only stderr for ``None``. ``since``/``until`` are ignored (no timestamps).
        """
        if since or until:
            logger.info("slurm logs carry no timestamps; ignoring since/until")
        paths = self.log_files(app_id, role_name, k, streams)

        def ended_many(ids: list[str]) -> dict[str, bool]:
            return {
                a: d is None or is_terminal(d.state) for a, d in self.describe_many(ids).items()
            }

        lines: Iterable[str] = iter_files_lines(
            paths,
            should_tail=should_tail,
            is_done=lambda: _FOLLOWED.is_done(app_id, ended_many),
            poll_interval=0.5,
            wait_for_file=5.0 if should_tail else 0.0,
        )
        if should_tail:
            lines = _FOLLOWED.follow(app_id, lines)
        if regex:
            lines = filter_regex(regex, lines)
        return lines

    def resource_usage(self, app_id: str) -> dict[tuple[str, int], ReplicaUsage] | None:
        """Per replica CPU time and memory of the job's steps: ``sstat`` while it runs, ``sacct``
        once it ended (None without accounting, or for an unknown app): ``slurm/_usage.py``."""
        records = self._records([app_id]).get(app_id)
        return _usage.replica_usage(self._run_cmd, records) if records else None

    # -- cancel -----------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        self._run(["scancel", app_id], ok=lambda r: "already completing or completed" in r.stderr)

    # -- ownership (in the job's comment, see slurm/_comment.py) ------------------------------

    def set_owner(self, app_id: str, owner: str) -> bool:
        """Records ``owner`` in the job's comment (``scontrol update JobId=<id> Comment=...``),
        keeping the user's comment and the app name. False for an unknown or finished job."""
        records = self._records([app_id]).get(app_id) if _valid_app_id(app_id) else None
        if not records or TAG in owner:
            return False
        comment = replace(parse_comment(records[0].comment), owner=owner)
        result = self._run_cmd(["scontrol", "update", f"JobId={app_id}", f"Comment={comment}"])
        if result.returncode != 0:
            logger.warning(
                "cannot record the owner of slurm job %s: %s",
                app_id,
                (result.stderr or result.stdout).strip(),
            )
            return False
        return True

    def submit_order(self, app_ids: Sequence[str]) -> builtins.list[str]:
        """Job ids earliest first: slurmctld hands them out in submission order."""
        return sorted(app_ids, key=lambda a: (0, int(a), "") if a.isdigit() else (1, 0, a))

    def get_owner(self, app_id: str) -> str | None:
        """The owner recorded by :meth:`set_owner`, while ``squeue`` still lists the job."""
        records = self._records([app_id]).get(app_id) if _valid_app_id(app_id) else None
        return parse_comment(records[0].comment).owner or None if records else None


# SlurmOpts field -> the run option name TorchX uses for it (sbatch's own spelling)
_TORCHX_OPT_NAMES = {"mail_user": "mail-user", "mail_type": "mail-type"}


def _dash_aliases(cfg: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
    """Maps TorchX's sbatch-style option names (``mail-user``) to SlurmOpts fields."""
    out = dict(cfg)
    for key in [k for k in cfg if "-" in k]:
        value = out.pop(key)
        if value is not None:
            out[key.replace("-", "_")] = value
    return out


def _valid_app_id(app_id: str) -> bool:
    return bool(re.fullmatch(r"\d+(_\d+)?", app_id))


def _current_user() -> set[str]:
    try:
        import pwd

        uid = os.getuid()
        return {str(uid), pwd.getpwuid(uid).pw_name}
    except (ImportError, KeyError, AttributeError):
        return set()


def _format_request(req: SlurmBatchRequest) -> str:
    return req.materialize()


def create_scheduler(session_name: str, **kwargs: object) -> SlurmScheduler:
    """Creates the ``slurm`` scheduler (``run_cmd=`` and ``probe=`` may be injected)."""
    run_cmd = kwargs.get("run_cmd")
    probe = kwargs.get("probe")
    if probe is not None and not callable(getattr(probe, "version", None)):
        raise SchedulerError(
            f"slurm probe={probe!r} has no version() method; pass a SlurmProbe such as"
            " StaticSlurmProbe((24, 11)), or leave it out to ask `sbatch --version`"
        )
    return SlurmScheduler(
        session_name,
        run_cmd=run_cmd if callable(run_cmd) else None,
        probe=probe,  # type: ignore[arg-type]  # checked above
    )
