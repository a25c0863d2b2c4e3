"""How the ``slurm`` scheduler runs Slurm commands and learns facts about the cluster.

``run_command`` is the default command runner; a probe answers the Slurm version (asked only when
a role wants GPUs). :func:`version` is TorchX's ``slurm_scheduler.version``.
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from torchx_core.schedulers.api import SchedulerError

logger: logging.Logger = logging.getLogger(__name__)

CommandRunner = Callable[..., "subprocess.CompletedProcess[str]"]
"""``run_cmd(args, input=None) -> CompletedProcess[str]`` (stdout/stderr captured as text)."""


#: Seconds a Slurm command may take before the scheduler gives up on it (a hung controller).
COMMAND_TIMEOUT = 120


def output_text(value: object) -> str:
    """A command's captured output as text (``subprocess`` gives ``str`` or ``bytes``)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else ""


def run_command(args: Sequence[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs a Slurm command, capturing its output. The default ``run_cmd``.

    As TorchX, through ``subprocess.run(..., check=True)`` (a failure raises
    ``CalledProcessError``), here with a time-out; the failure comes back as the returned
    ``returncode`` and ``stderr`` for the caller to report.

    Raises:
        SchedulerError: the command is not installed, or did not answer within
            :data:`COMMAND_TIMEOUT` seconds.
    """
    argv = list(args)
    try:
        done = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            check=True,
            timeout=COMMAND_TIMEOUT,
        )
    except subprocess.CalledProcessError as e:
        return subprocess.CompletedProcess(
            argv, e.returncode, output_text(e.stdout), output_text(e.stderr)
        )
    except FileNotFoundError as e:
        raise _not_installed(argv) from e
    except subprocess.TimeoutExpired as e:
        raise _timed_out(argv) from e
    return subprocess.CompletedProcess(argv, 0, output_text(done.stdout), output_text(done.stderr))


def check_output(args: Sequence[str]) -> str:
    """A Slurm command's stdout, as TorchX reads one app's status:
    ``subprocess.check_output(args, stderr=PIPE, encoding="utf-8")``, with a time-out.

    Raises:
        subprocess.CalledProcessError: the command failed (its ``stderr`` says why).
        SchedulerError: the command is not installed, or did not answer in time.
    """
    argv = list(args)
    try:
        out = subprocess.check_output(
            argv, stderr=subprocess.PIPE, encoding="utf-8", timeout=COMMAND_TIMEOUT
        )
    except FileNotFoundError as e:
        raise _not_installed(argv) from e
    except subprocess.TimeoutExpired as e:
        raise _timed_out(argv) from e
    return output_text(out)


def _not_installed(argv: list[str]) -> SchedulerError:
    return SchedulerError(
        f"`{argv[0]}` is not installed or not on PATH; install the Slurm client tools"
        " (Debian: apt-get install slurm-client) on the machine that submits jobs"
    )


def _timed_out(argv: list[str]) -> SchedulerError:
    return SchedulerError(
        f"`{' '.join(argv)}` did not answer within {COMMAND_TIMEOUT} s; check that slurmctld"
        " is reachable (`scontrol ping`)"
    )


class SlurmProbe(Protocol):
    """Facts about the cluster that shape the request (asked only when needed)."""

    def version(self) -> tuple[int, int] | None:
        """The Slurm (major, minor) version, or None when unknown."""
        ...


@dataclass
class StaticSlurmProbe:
    """A probe with fixed answers (tests, or clusters whose facts are known in advance)."""

    slurm_version: tuple[int, int] | None = None

    def version(self) -> tuple[int, int] | None:
        """Returns the fixed version."""
        return self.slurm_version


@functools.cache
def version() -> tuple[int, int]:
    """The Slurm (major, minor) version from ``sinfo --version``, asked once per process.

    As TorchX: when ``sinfo`` is missing or fails (a dry run off the cluster), or here does not
    answer within :data:`COMMAND_TIMEOUT` seconds, warns
    (``RuntimeWarning``) and assumes Slurm 24.05. ``version.cache_clear()`` forgets the answer.
    """
    cmd = ["sinfo", "--version"]
    try:
        out = subprocess.check_output(
            cmd, stderr=subprocess.PIPE, encoding="utf-8", timeout=COMMAND_TIMEOUT
        )
    except (subprocess.SubprocessError, OSError):  # failed, hung (time-out) or missing
        warnings.warn(
            f"could not run `{' '.join(cmd)}` to read the Slurm version (outside the cluster's"
            " login node, e.g. in a dry run?); assuming Slurm 24.05",
            RuntimeWarning,
            stacklevel=2,
        )
        return (24, 5)
    m = re.search(r"(\d+)\.(\d+)", out or "")
    if m is None:
        warnings.warn(
            f"`{' '.join(cmd)}` printed no version ({out!r}); assuming Slurm 24.05",
            RuntimeWarning,
            stacklevel=2,
        )
        return (24, 5)
    return (int(m.group(1)), int(m.group(2)))


class CommandSlurmProbe:
    """Asks ``sbatch --version`` once (cached); unknown when sbatch is missing or unreadable."""

    def __init__(self, run_cmd: CommandRunner) -> None:
        self._run_cmd = run_cmd
        self._version: tuple[int, int] | None = None
        self._asked = False

    def version(self) -> tuple[int, int] | None:
        """The version reported by ``sbatch --version`` (e.g. ``slurm 22.05.8`` -> (22, 5))."""
        if not self._asked:
            self._asked = True
            try:
                out = self._run_cmd(["sbatch", "--version"]).stdout
            except SchedulerError as e:
                logger.info("cannot read the Slurm version (%s); assuming a recent Slurm", e)
                return None
            m = re.search(r"(\d+)\.(\d+)", out or "")
            self._version = (int(m.group(1)), int(m.group(2))) if m else None
        return self._version
