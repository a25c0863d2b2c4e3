"""The sbatch request of the ``slurm`` scheduler and the batch script it prints as.

One app becomes one batch job. With more than one replica in total it is a heterogeneous job:
every replica of every role is one het component (``#SBATCH hetjob`` separates them; Slurm never
puts two components on one node) and one ``srun`` launches them all, one ``--het-group`` each.

Shell safety: every argument, environment value, entrypoint and path reaches the job exactly.
Words are single-quoted by :func:`shell_word`; the only shell expansions in the script are the
ones this module writes itself (``"$SLURM_JOB_ID"`` for the ``app_id`` macro, and the
``TORCHX_*`` variables it exports). Values that end up on ``#SBATCH`` lines (parsed by sbatch,
not by bash) are checked by :func:`sbatch_value` instead, since sbatch cannot escape everything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchx_core import __version__
from torchx_core.schedulers.api import AppValidationError
from torchx_core.specs import CfgVal, Role, macros

if TYPE_CHECKING:
    from torchx_core.schedulers.slurm._probe import SlurmProbe
    from torchx_core.schedulers.slurm.scheduler import SlurmOpts

__all__ = [
    "APP_ID_SENTINEL",
    "RANK0_ENV",
    "SlurmBatchRequest",
    "SlurmReplicaRequest",
    "gpu_options",
    "log_file_name",
    "sbatch_value",
    "shell_word",
]

# Stands for the app id inside args/env until the script is written: NUL can never be part of a
# real argv or env value, so the sentinel cannot collide with user text.
APP_ID_SENTINEL = "\x00torchx-app-id\x00"
# The macro ``rank0_env`` names this variable; the batch script exports it (see ``_RANK0_LINE``).
RANK0_ENV = "TORCHX_RANK0_HOST"
_APP_ID_EXPANSION = '"$SLURM_JOB_ID"'
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FILE_SAFE = re.compile(r"[^A-Za-z0-9_.+@-]")
_SBATCH_FORBIDDEN = ('"', "\\", "\n", "\r", "\x00")
# srun splits its argv on every bare ':' word (het-group separator), even inside the command.
# A replica whose command has such a word runs through this bash prologue instead: every word made
# of backslashes and one final ':' goes in with one more leading backslash, which it strips again.
_COLON_WORD = re.compile(r"^\\*:$")
COLON_UNESCAPE = (
    "re='^\\\\+:$'; for a in \"$@\"; do if [[ $a =~ $re ]]; then a=${a:1}; fi;"
    ' set -- "$@" "$a"; shift; done; exec "$@"'
)

# The batch script runs on the first node of component 0, i.e. where replica 0 of the first role
# runs. Its address is the node's NodeAddr (the name Slurm itself uses to reach it), which also
# works for "fake" nodes whose NodeName does not resolve.
_RANK0_LINE = (
    f'{RANK0_ENV}="$(scontrol show node "${{SLURMD_NODENAME:-}}" 2>/dev/null'
    " | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p' | head -n 1)\"\n"
    f'export {RANK0_ENV}="${{{RANK0_ENV}:-${{SLURMD_NODENAME:-$(hostname)}}}}"'
)


def shell_word(value: str) -> str:
    """Quotes ``value`` as one bash word that expands to exactly ``value``.

    The app id sentinel (:data:`APP_ID_SENTINEL`) becomes ``"$SLURM_JOB_ID"``, written as TorchX
    writes it: each piece around it quoted on its own, empty ones as ``''``. Everything else is
    literal (single-quoted where needed).

    >>> print(shell_word("it's $HOME"))
    'it'"'"'s $HOME'
    >>> print(shell_word("hello " + APP_ID_SENTINEL))
    'hello '"$SLURM_JOB_ID"''
    >>> print(shell_word("a\\rb"))
    a$'\\r'b
    """
    if "\x00" in value.replace(APP_ID_SENTINEL, ""):
        raise AppValidationError(f"value {value!r} holds a NUL byte, which no process argument can")
    pieces = value.split(APP_ID_SENTINEL)
    out = []
    for i, piece in enumerate(pieces):
        if i:
            out.append(_APP_ID_EXPANSION)
        if not piece and len(pieces) > 1:
            out.append("''")  # an empty piece next to the app id, quoted as TorchX quotes it
            continue
        # a carriage return goes in as bash's $'\r': sbatch refuses scripts that hold "\r\n"
        for j, part in enumerate(piece.split("\r")):
            if j:
                out.append("$'\\r'")
            if part:
                out.append(shlex.quote(part))
    return "".join(out) or "''"


def sbatch_value(option: str, value: str) -> str:
    """Formats ``--option=value`` for an ``#SBATCH`` line (double-quoted when it has spaces).

    Raises:
        AppValidationError: the value holds a character sbatch cannot read back (``"``, ``\\``,
            newline), so it would not reach Slurm exactly.
    """
    bad = [c for c in _SBATCH_FORBIDDEN if c in value]
    if bad or APP_ID_SENTINEL in value:
        raise AppValidationError(
            f"sbatch option --{option}={value!r} holds {bad or ['the app_id macro']}, which an"
            " #SBATCH line cannot carry; remove them (double quotes, backslashes and line breaks"
            " are not allowed in Slurm job options)"
        )
    if value == "" or any(c.isspace() or c in "#'" for c in value):
        return f'--{option}="{value}"'
    return f"--{option}={value}"


def log_file_name(app_id: str, role: str, replica_id: int, ext: str = "out") -> str:
    """A replica's log file, relative to the job's log dir: ``ext`` is ``out`` (stdout) or
    ``err`` (stderr), kept apart as TorchX does."""
    return f"slurm-{app_id}-{_FILE_SAFE.sub('_', role)}-{replica_id}.{ext}"


def _opt_words(opts: Mapping[str, str | None]) -> list[str]:
    return [f"--{k}" if v is None else sbatch_value(k, v) for k, v in opts.items()]


def gpu_options(gpus: int, version: tuple[int, int] | None) -> dict[str, str]:
    """The sbatch option asking for ``gpus`` GPUs per replica on a Slurm of ``version``.

    ``--gpus-per-node`` on Slurm >= 24.11 or unknown, ``--gpus-per-task`` on 19.05 - 24.05 (as
    TorchX), ``--gres=gpu:N`` before.

    >>> gpu_options(2, (24, 5)), gpu_options(2, (24, 11)), gpu_options(2, (18, 8))
    ({'gpus-per-task': '2'}, {'gpus-per-node': '2'}, {'gres': 'gpu:2'})
    """
    if version is None or version >= (24, 11):
        return {"gpus-per-node": str(gpus)}
    if version >= (19, 5):
        return {"gpus-per-task": str(gpus)}
    return {"gres": f"gpu:{gpus}"}


@dataclass
class SlurmReplicaRequest:
    """One replica: one het component (``#SBATCH`` options) and one ``srun`` part.

    Args:
        name: the component's job name, ``{role}-{replica_id}`` (``describe`` parses it back).
        role: the role name.
        replica_id: the replica index within its role.
        entrypoint: the program to run.
        args: its arguments (macros applied; the app id is :data:`APP_ID_SENTINEL`).
        env: extra environment variables for the replica.
        sbatch_opts: ``#SBATCH`` options of this component (``None`` value: a bare flag).
        srun_opts: ``srun`` options of this part, besides ``--het-group`` and the log file.
    """

    name: str
    role: str
    replica_id: int
    entrypoint: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    sbatch_opts: dict[str, str | None] = field(default_factory=dict)
    srun_opts: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_role(
        cls,
        name: str,
        role: Role,
        cfg: SlurmOpts | Mapping[str, CfgVal],
        nomem: bool = False,
        replica_id: int | None = None,
        probe: SlurmProbe | None = None,
    ) -> SlurmReplicaRequest:
        """Builds the request of one replica of ``role`` (TorchX's builder, same arguments).

        Args:
            name: the component's job name, ``{role}-{replica_id}`` as in TorchX (``describe``
                reads the role and replica back from it).
            role: the role; its macros are applied (``app_id`` is ``$SLURM_JOB_ID``).
            cfg: the run options (a :class:`SlurmOpts` or a run config mapping).
            nomem: leave out ``--mem`` (also when ``cfg`` says ``nomem``).
            replica_id: the replica index; default: the number ending ``name``, else 0.
            probe: answers the Slurm version, asked only when the role wants GPUs; default:
                ``slurm_scheduler.version()`` (looked up when called, so patching it works).
        """
        from torchx_core.schedulers.slurm import scheduler as sched

        opts = (
            cfg
            if isinstance(cfg, sched.SlurmOpts)
            else sched.SlurmOpts.from_cfg(sched._dash_aliases(cfg))
        )
        if replica_id is None:
            tail = name.rsplit("-", 1)[-1]
            replica_id = int(tail) if "-" in name and tail.isdigit() else 0
        values = macros.Values(
            img_root=role.image,
            app_id=APP_ID_SENTINEL,
            replica_id=str(replica_id),
            rank0_env=RANK0_ENV,
        )
        resolved = values.apply(role)
        # TorchX's words in TorchX's order (``--mem`` in MB, Slurm's default unit); one task on
        # one node per replica: ``--ntasks=1`` always (TorchX: only with ``--gpus-per-task``)
        sbatch: dict[str, str | None] = {"requeue": None}
        for key in ("partition", "time", "constraint", "qos"):
            value = getattr(opts, key)
            if value:
                sbatch[key] = str(value)
        sbatch["ntasks-per-node"] = "1"
        res = role.resource
        if res.cpu > 0:
            sbatch["cpus-per-task"] = str(res.cpu)
        if res.memMB > 0 and not (nomem or opts.nomem):
            sbatch["mem"] = str(res.memMB)
        if res.gpu > 0:
            sbatch.update(gpu_options(res.gpu, (probe or sched._VersionProbe()).version()))
        sbatch["ntasks"] = "1"
        if opts.account:  # on every het component, so each one is charged to it
            sbatch["account"] = str(opts.account)
        if opts.exclusive:
            sbatch["exclusive"] = None
        # as TorchX writes them: end the job's tasks 60 s after the first one exits, and all of
        # them at once when one exits with an error
        srun: dict[str, str | None] = {"wait": "60", "kill-on-bad-exit": "1"}
        if role.image.startswith("/"):
            srun["chdir"] = role.image
        return cls(
            name=name,
            role=role.name,
            replica_id=replica_id,
            entrypoint=role.entrypoint,
            args=list(resolved.args),
            env=dict(resolved.env),
            sbatch_opts=sbatch,
            srun_opts=srun,
        )

    def materialize(self, log_dir: str = "") -> tuple[list[str], list[str]]:
        """This replica's ``#SBATCH`` words and its ``srun`` words, as TorchX's ``materialize``.

        They are the ones :meth:`SlurmBatchRequest.materialize` writes for this replica (job-wide
        options and ``--het-group`` aside); log files are relative to ``log_dir`` (default: the
        job's working directory).
        """
        sbatch = _opt_words({"job-name": self.name, **self.sbatch_opts})
        return sbatch, self.srun_words(None, log_dir)

    def validate(self) -> list[str]:
        """Returns the problems that would keep this replica from reaching Slurm exactly."""
        problems = []
        bad_env = [k for k in self.env if not _ENV_NAME.match(k)]
        if bad_env:
            problems.append(
                f"role `{self.role}` has invalid environment variable name(s) {bad_env};"
                " use letters, digits and '_' (not starting with a digit)"
            )
        if not self.entrypoint or "=" in self.entrypoint:
            problems.append(
                f"role `{self.role}` has entrypoint {self.entrypoint!r}; give a program name or"
                " path without '='"
            )
        return problems

    def srun_words(self, het_group: int | None, log_dir: str) -> list[str]:
        """The shell words of this replica's part of the ``srun`` line."""
        words = []
        if het_group is not None:
            words.append(f"--het-group={het_group}")
        base = log_dir.rstrip("/")
        for option, ext in (("output", "out"), ("error", "err")):
            log = log_file_name(APP_ID_SENTINEL, self.role, self.replica_id, ext)
            log = f"{base}/{log}" if log_dir else log
            words.append(f"--{option}={shell_word(log)}")
        words.append("--open-mode=append")
        words += [
            f"--{k}" if v is None else f"--{k}={shell_word(v)}" for k, v in self.srun_opts.items()
        ]
        # `env` adds the role's variables without a shell in between (srun passes argv as is)
        words.append("env")
        words += [shell_word(f"{k}={v}") for k, v in self.env.items()]
        command = [self.entrypoint, *self.args]
        if ":" in command:
            escaped = ["\\" + w if _COLON_WORD.match(w) else w for w in command]
            command = ["bash", "-c", COLON_UNESCAPE, "torchx-argv", *escaped]
        words += [shell_word(w) for w in command]
        return words


@dataclass
class SlurmBatchRequest:
    """An sbatch submission: the command and the batch script (see :meth:`materialize`).

    Args:
        cmd: the submit command; the script file is added as its last word at submit time.
        replicas: job name (``{role}-{replica_id}``) -> replica, in het-component order (role
            by role), as in TorchX.
        job_opts: job-wide ``#SBATCH`` options (first component only), e.g. ``mail-user``.
        log_dir: absolute directory for the batch output and per-replica logs (``--chdir``).
        max_retries: how often a failed run is requeued (``scontrol requeue``).
        app_name: the AppDef name (a comment in the script).
        workspace_src: a local workspace to copy into ``log_dir`` when scheduling, if any.
    """

    cmd: list[str]
    replicas: dict[str, SlurmReplicaRequest]
    job_opts: dict[str, str | None] = field(default_factory=dict)
    log_dir: str = ""
    max_retries: int = 0
    app_name: str = ""
    workspace_src: str | None = None

    @property
    def is_hetjob(self) -> bool:
        """Whether the job has more than one component."""
        return len(self.replicas) > 1

    def materialize(self) -> str:
        """Returns the batch script exactly as it is submitted."""
        lines = [
            "#!/bin/bash",
            "#",
            f"# Generated by torchx-suite {__version__} for app `{_comment(self.app_name)}`",
            f"# Submit with: {_comment(shlex.join(self.cmd))} <this script file>",
            "#",
        ]
        for i, replica in enumerate(self.replicas.values()):
            if i:
                lines.append("#SBATCH hetjob")
            opts: dict[str, str | None] = {"job-name": replica.name}
            if i == 0:
                opts.update(self.job_opts)
            opts.update(replica.sbatch_opts)
            lines.append("#SBATCH " + " ".join(_opt_words(opts)))
        lines += [
            "",
            "export PYTHONUNBUFFERED=1",
            "export SLURM_UNBUFFEREDIO=1",
            f"export TORCHX_MAX_RETRIES={int(self.max_retries)}",
            f"export TORCHX_JOB_DIR={shell_word(self.log_dir)}",
            _RANK0_LINE,
            "",
            "set +e",
            self._srun_line(),
            "exitcode=$?",
            (
                'echo "torchx: job ${SLURM_JOB_ID} run ${SLURM_RESTART_COUNT:-0} exited with code'
                ' ${exitcode}"'
            ),
            (
                'if [ "${exitcode}" -ne 0 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt'
                ' "${TORCHX_MAX_RETRIES}" ]; then'
            ),
            '    echo "torchx: requeueing job ${SLURM_JOB_ID}"',
            '    scontrol requeue "${SLURM_JOB_ID}"',
            "fi",
            'exit "${exitcode}"',
            "",
        ]
        return "\n".join(lines)

    def _srun_line(self) -> str:
        parts = []
        for i, replica in enumerate(self.replicas.values()):
            group = i if self.is_hetjob else None
            parts.append(" ".join(replica.srun_words(group, self.log_dir)))
        return "srun " + " \\\n    : ".join(parts)

    def __str__(self) -> str:
        return self.materialize()


def _comment(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")
