"""Test helpers for the slurm scheduler: a stateful fake Slurm and the real-cluster fixture.

``FakeSlurm`` is injected as ``run_cmd``. It keeps a job table and answers ``sbatch``,
``squeue --json``, ``sacct`` and ``scancel`` in the output shapes of a chosen Slurm version. The
22.05 shapes (plain strings and ints, raw wait-status exit codes, ``-j`` ignored by ``--json``)
were taken from the real cluster of ``scripts/services/slurm``. For newer releases the fake
follows the data_parser OpenAPI specs as far as this scheduler reads them: exit codes as
``{"status", "return_code", "signal"}`` objects (23.02+), ``job_state`` as a list (23.11+),
optional numbers as ``{"set", "infinite", "number"}`` (24.05+), and ``squeue -j`` honoured,
failing when every given id is unknown.

``slurm_cluster`` (session) starts the real cluster with ``scripts/services/slurm/start.sh`` and
stops it at session end with ``stop.sh`` (by PID files) if this session started it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLURM_SCRIPTS = os.path.join(REPO, "scripts", "services", "slurm")


@dataclass
class FakeComponent:
    job_id: int
    name: str
    chdir: str
    nodes: str = ""
    derived_exit_code: int = 0  # highest step exit code


@dataclass
class FakeJob:
    app_id: int
    components: list[FakeComponent]
    script: str
    state: str = "PENDING"
    reason: str = "None"
    exit_code: int = 0
    signal: int = 0
    restarts: int = 0
    user: str = "alice"
    user_id: int = 1000
    in_squeue: bool = True  # False: only sacct still knows it (MinJobAge passed)
    submit: str = "2026-11-28T10:00:00"  # sacct's Submit and End (local time)
    end: str = "Unknown"


_SBATCH_OPT = re.compile(r'--([a-z-]+)(?:=("[^"]*"|\S+))?')


@dataclass
class FakeSlurm:
    """A stateful fake of the Slurm command-line tools (inject as ``run_cmd``)."""

    version: tuple[int, int] = (22, 5)
    accounting: bool = True
    next_id: int = 100
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)

    # -- test controls ----------------------------------------------------------------------

    def set_state(
        self,
        app_id: str,
        state: str,
        exit_code: int = 0,
        signal: int = 0,
        reason: str = "None",
        derived: dict[int, int] | None = None,
    ) -> None:
        job = self.jobs[app_id]
        job.state, job.exit_code, job.signal, job.reason = state, exit_code, signal, reason
        for i, comp in enumerate(job.components):
            if state != "PENDING" and not comp.nodes:
                comp.nodes = f"node{i + 1}"
            comp.derived_exit_code = (derived or {}).get(i, 0)

    def forget(self, app_id: str) -> None:
        """The job leaves squeue (MinJobAge passed); sacct still has it."""
        self.jobs[app_id].in_squeue = False

    def commands(self, name: str) -> list[list[str]]:
        return [c for c in self.calls if c[0] == name]

    # -- the command runner -----------------------------------------------------------------

    def __call__(
        self, args: Sequence[str], input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        args = list(args)
        self.calls.append(args)
        handler = getattr(self, "_" + args[0], None)
        if handler is None:
            return self._done(args, 127, "", f"{args[0]}: command not found")
        return handler(args, input)

    @staticmethod
    def _done(
        args: list[str], rc: int, out: str, err: str = ""
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, rc, out, err)

    def _sbatch(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        if "--version" in args:
            return self._done(args, 0, f"slurm {self.version[0]}.{self.version[1]:02d}.8\n")
        if input is None:  # the script is sbatch's last word (a file), as TorchX gives it
            with open(args[-1], encoding="utf-8") as f:
                input = f.read()
        comps: list[FakeComponent] = []
        chdir = "/"
        for line in input.splitlines():
            if not line.startswith("#SBATCH"):
                continue
            opts = {k: v.strip('"') if v else "" for k, v in _SBATCH_OPT.findall(line)}
            if line.strip() == "#SBATCH hetjob":
                continue
            chdir = opts.get("chdir", chdir)
            comps.append(
                FakeComponent(self.next_id + len(comps), opts.get("job-name", "sbatch"), chdir)
            )
        app_id = self.next_id
        self.next_id += max(1, len(comps))
        self.jobs[str(app_id)] = FakeJob(app_id, comps, input)
        return self._done(args, 0, f"{app_id}\n")

    def _visible(self, args: list[str]) -> tuple[list[FakeJob], bool]:
        ids = next((a.split("=", 1)[1].split(",") for a in args if a.startswith("--jobs=")), None)
        jobs = [j for j in self.jobs.values() if j.in_squeue]
        if ids is None or self.version < (23, 2):  # 22.05: --json ignores -j
            return jobs, True
        picked = [j for j in jobs if str(j.app_id) in ids]
        return picked, bool(picked)

    def _squeue(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        assert "--json" in args
        jobs, ok = self._visible(args)
        if not ok:
            return self._done(args, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
        records = [self._json_record(j, i, c) for j in jobs for i, c in enumerate(j.components)]
        return self._done(args, 0, json.dumps({"meta": {}, "errors": [], "jobs": records}))

    def _num(self, n: int) -> object:
        return {"set": True, "infinite": False, "number": n} if self.version >= (24, 5) else n

    def _json_record(self, job: FakeJob, offset: int, comp: FakeComponent) -> dict[str, object]:
        het = len(job.components) > 1
        if self.version >= (23, 2):
            state: object = [job.state] if self.version >= (23, 11) else job.state
            exit_code: object = {
                "status": ["SIGNALED" if job.signal else "EXITED"],
                "return_code": self._num(job.exit_code),
                "signal": {"id": self._num(job.signal), "name": ""},
            }
            derived: object = {
                "status": ["EXITED"],
                "return_code": self._num(comp.derived_exit_code),
            }
        else:
            state = job.state
            exit_code = (job.exit_code << 8) | job.signal
            derived = comp.derived_exit_code << 8
        return {
            "job_id": comp.job_id,
            "het_job_id": self._num(job.app_id if het else 0),
            "het_job_offset": self._num(offset if het else 0),
            "array_job_id": self._num(0),
            "array_task_id": None,
            "name": comp.name,
            "job_state": state,
            "state_reason": job.reason,
            "exit_code": exit_code,
            "derived_exit_code": derived,
            "restart_cnt": job.restarts,
            "nodes": comp.nodes,
            "current_working_directory": comp.chdir,
            "user_id": job.user_id,
            "user_name": job.user,
        }

    def _sacct(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        if not self.accounting:
            return self._done(args, 1, "", "Slurm accounting storage is disabled\n")
        ids = next((a.split("=", 1)[1].split(",") for a in args if a.startswith("--jobs=")), None)
        fmt = next(a.split("=", 1)[1] for a in args if a.startswith("--format="))
        rows = []
        for job in self.jobs.values():
            if ids is not None and str(job.app_id) not in ids:
                continue
            het = len(job.components) > 1
            for i, comp in enumerate(job.components):
                state = f"CANCELLED by {job.user_id}" if job.state == "CANCELLED" else job.state
                values = {
                    "JobID": f"{job.app_id}+{i}" if het else str(job.app_id),
                    "JobIDRaw": str(comp.job_id),
                    "JobName": comp.name,
                    "State": state,
                    "ExitCode": f"{job.exit_code}:{job.signal}",
                    "DerivedExitCode": f"{comp.derived_exit_code}:0",
                    "NodeList": comp.nodes or "None assigned",
                    "User": job.user,
                    "Submit": job.submit,
                    "End": job.end,
                    "WorkDir": comp.chdir,
                }
                rows.append("|".join(values[f] for f in fmt.split(",")))
        return self._done(args, 0, "".join(r + "\n" for r in rows))

    def _scancel(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        job = self.jobs.get(args[1])
        if job is None:
            return self._done(args, 1, "", f"scancel: error: Invalid job id {args[1]}\n")
        if job.state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            return self._done(
                args,
                1,
                "",
                f"scancel: error: Kill job error on job id {args[1]}:"
                " Job/step already completing or completed\n",
            )
        self.set_state(args[1], "CANCELLED", signal=15)
        return self._done(args, 0, "")


@pytest.fixture
def fake_slurm() -> FakeSlurm:
    return FakeSlurm()


# -- the real cluster ---------------------------------------------------------------------------


@dataclass
class SlurmCluster:
    """The running test cluster: ``SLURM_CONF`` is set in ``os.environ`` while it is up."""

    conf: str
    started_here: bool

    def run(self, *args: str) -> str:
        return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def _pid_alive(pidfile: str) -> bool:
    """Whether the PID in ``pidfile`` is a live (non-zombie) process."""
    try:
        with open(pidfile, encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """Starts the one-machine Slurm cluster (reusing a healthy one) and stops it at the end.

    Fails (never skips) when the cluster cannot start: run ``scripts/services/slurm/install.sh``.
    """
    run_dir = os.path.join(os.environ.get("CI_RUN_DIR", "/run/torchx-ci"), "slurm")
    # a live slurmctld (not merely its PID file: a killed session leaves stale ones) means a
    # cluster someone else started: reuse it and leave it running
    was_running = _pid_alive(os.path.join(run_dir, "slurmctld.pid"))
    proc = subprocess.run(
        ["bash", os.path.join(SLURM_SCRIPTS, "start.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"the Slurm test cluster did not start (scripts/services/slurm/start.sh exit"
            f" {proc.returncode}):\n{proc.stdout}\n{proc.stderr}\nInstall it with"
            " `bash scripts/services/slurm/install.sh` (or `make services-install`)."
        )
    conf = next(
        line.split("=", 1)[1] for line in proc.stdout.splitlines() if line.startswith("SLURM_CONF=")
    )
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    try:
        yield SlurmCluster(conf=conf, started_here=not was_running)
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        if not was_running:
            subprocess.run(
                ["bash", os.path.join(SLURM_SCRIPTS, "stop.sh")],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
