"""The slurm scheduler's resource use per replica (``sstat`` / ``sacct``, slurm/_usage.py) and
the end times of its listed apps, on output recorded from the real 22.05 test cluster."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from support.slurm_fixtures import FakeJob, FakeSlurm

from torchx_core import specs
from torchx_core.schedulers.api import ReplicaUsage, SchedulerError
from torchx_core.schedulers.slurm._status import parse_squeue_json
from torchx_core.schedulers.slurm._usage import (
    SACCT_USAGE_FIELDS,
    SSTAT_FIELDS,
    parse_cpu_time,
    parse_memory,
    parse_steps,
)
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, StaticSlurmProbe
from torchx_core.specs import AppState

# `sstat --allsteps --parsable2 --noheader --noconvert --format=JobID,TRESUsageInTot,NTasks,Pids
# --jobs=175,176` of a running two-replica app (het job 175: components 175 and 176), as the
# test cluster (Slurm 22.05) printed it
SSTAT_175 = (
    "175.batch|cpu=00:00:00,energy=0,fs/disk=75358,mem=15486976,pages=0,vmem=565284864|1|"
    "30194,30176,30138\n"
    "175.0|cpu=00:00:01,energy=0,fs/disk=50397,mem=38785024,pages=0,vmem=42844160|1|30237\n"
    "176.0|cpu=00:00:01,energy=0,fs/disk=50397,mem=39018496,pages=0,vmem=42844160|1|30243\n"
)
# `sacct --parsable2 --noheader --noconvert --format=JobID,JobIDRaw,TotalCPU,TRESUsageInTot,
# NTasks --jobs=175,176` of the same app once it ended
SACCT_175 = (
    "175+0|175|00:08.096||\n"
    "175+0.batch|175.batch|00:00.034|cpu=00:00:00,energy=0,fs/disk=75358,mem=15486976,pages=0,"
    "vmem=565284864|1\n"
    "175+0.0|175.0|00:08.062|cpu=00:00:06,energy=0,fs/disk=50397,mem=38785024,pages=0,"
    "vmem=42844160|1\n"
    "175+1|176|00:07.729||\n"
    "175+1.0|176.0|00:07.729|cpu=00:00:05,energy=0,fs/disk=50397,mem=39018496,pages=0,"
    "vmem=42844160|1\n"
)


@dataclass
class UsageSlurm(FakeSlurm):
    """FakeSlurm that also answers ``sstat`` and ``sacct``'s usage columns with given text, and
    puts ``end_time`` (``ends``, by component job id) into ``squeue --json``."""

    sstat_out: str = ""
    sstat_rc: int = 0
    sacct_usage: str = ""
    ends: dict[int, int] = field(default_factory=dict)

    def _sstat(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        err = "" if self.sstat_rc == 0 else "sstat: error: slurm_load_jobs: Unable to contact"
        return self._done(args, self.sstat_rc, self.sstat_out, err)

    def _sacct(self, args: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        if any(a.startswith("--format=") and "TotalCPU" in a for a in args):
            if not self.accounting:
                return self._done(args, 1, "", "Slurm accounting storage is disabled\n")
            return self._done(args, 0, self.sacct_usage)
        return super()._sacct(args, input)

    def _json_record(self, job: FakeJob, offset: int, comp: object) -> dict[str, object]:
        record = super()._json_record(job, offset, comp)  # type: ignore[arg-type]
        record["end_time"] = self.ends.get(comp.job_id, 0)  # type: ignore[attr-defined]
        return record


def two_replicas(tmp_path: Path, fake: FakeSlurm) -> tuple[SlurmScheduler, str]:
    role = specs.Role(
        "burn",
        image="",
        entrypoint="python",
        args=["-c", "pass"],
        num_replicas=2,
        resource=specs.Resource(cpu=1, gpu=0, memMB=100),
    )
    sched = SlurmScheduler("t", run_cmd=fake, probe=StaticSlurmProbe((22, 5)))
    app_id = sched.submit(specs.AppDef("usage", roles=[role]), {"job_dir": str(tmp_path)})
    return sched, app_id


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:03", 3.0),
        ("00:04.984", 4.984),
        ("12:00", 720.0),
        ("1-02:03:04", 93784.0),
        ("", None),
        ("INVALID", None),
    ],
)
def test_cpu_time_in_every_slurm_spelling(text: str, seconds: float | None) -> None:
    assert parse_cpu_time(text) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(
    ("text", "n"), [("38785024", 38785024), ("52476K", 52476 * 1024), ("2G", 2 << 30), ("", None)]
)
def test_memory_in_bytes_or_binary_units(text: str, n: int | None) -> None:
    assert parse_memory(text) == n


def test_recorded_sstat_lines_are_read_step_by_step() -> None:
    steps = parse_steps(SSTAT_175, SSTAT_FIELDS)
    assert [(s.job, s.step, s.cpu_seconds, s.rss_bytes, s.processes) for s in steps] == [
        ("175", "batch", 0.0, 15486976, 3),
        ("175", "0", 1.0, 38785024, 1),
        ("176", "0", 1.0, 39018496, 1),
    ]


def test_a_running_app_is_measured_per_replica_with_sstat(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    sched, app_id = two_replicas(tmp_path, fake)
    fake.set_state(app_id, "RUNNING")
    fake.sstat_out = SSTAT_175
    assert sched.resource_usage(app_id) == {
        # the batch step (the batch script and srun) is Slurm's, not replica 0's
        ("burn", 0): ReplicaUsage(cpu_seconds=1.0, rss_bytes=38785024, processes=1),
        ("burn", 1): ReplicaUsage(cpu_seconds=1.0, rss_bytes=39018496, processes=1),
    }
    [sstat] = fake.commands("sstat")
    assert "--jobs=175,176" in sstat and "--noconvert" in sstat and "--allsteps" in sstat


def test_steps_named_by_het_leader_and_offset_and_several_steps_add_up(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    sched, app_id = two_replicas(tmp_path, fake)
    fake.set_state(app_id, "RUNNING")
    fake.sstat_out = (
        "175+1.0|cpu=00:01:00,mem=1000|1|7\n"
        "175+1.1|cpu=00:00:30,mem=500|2|8,9\n"
        "175+1.extern|cpu=00:00:09,mem=9999|1|5\n"
        "999.0|cpu=00:09:00,mem=1|1|3\n"  # another job's line
    )
    assert sched.resource_usage(app_id) == {("burn", 1): ReplicaUsage(90.0, 1500, 3)}


def test_a_finished_app_is_read_from_sacct_or_none_without_accounting(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    sched, app_id = two_replicas(tmp_path, fake)
    fake.set_state(app_id, "COMPLETED")
    fake.sacct_usage = SACCT_175
    assert sched.resource_usage(app_id) == {
        ("burn", 0): ReplicaUsage(cpu_seconds=8.062, rss_bytes=38785024, processes=1),
        ("burn", 1): ReplicaUsage(cpu_seconds=7.729, rss_bytes=39018496, processes=1),
    }
    assert not fake.commands("sstat")
    fake.accounting = False
    assert sched.resource_usage(app_id) is None


def test_pending_unknown_and_failing_sstat(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    sched, app_id = two_replicas(tmp_path, fake)
    assert sched.resource_usage(app_id) == {}  # pending: nothing runs yet
    assert sched.resource_usage("4242") is None
    assert sched.resource_usage("not-a-job") is None
    assert not fake.commands("sstat")
    fake.set_state(app_id, "RUNNING")
    fake.sstat_rc = 1
    with pytest.raises(SchedulerError, match=r"sstat.*exit code 1.*Unable to contact"):
        sched.resource_usage(app_id)


def test_finished_jobs_still_in_squeue_list_their_end_time(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    fake.ends = {175: 1_795_861_977, 176: 1_795_861_979, 177: 1_795_862_583}
    sched, done = two_replicas(tmp_path, fake)
    _, running = two_replicas(tmp_path, fake)
    fake.set_state(done, "COMPLETED")
    fake.set_state(running, "RUNNING")
    for job in fake.jobs.values():
        job.user, job.user_id = "me", 0
    import torchx_core.schedulers.slurm.scheduler as mod

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "_current_user", lambda: {"me"})
        rows = {r.app_id: r for r in sched.list()}
    assert rows[done].state == AppState.SUCCEEDED
    assert rows[done].ended == 1_795_861_979.0  # the last component's end
    # a running job's end_time is only when its time limit runs out
    assert rows[running].state == AppState.RUNNING and rows[running].ended is None


@pytest.mark.parametrize(
    ("state", "end_time", "ended"),
    [
        ("COMPLETED", 1_795_861_977, 1_795_861_977.0),
        (["FAILED"], {"set": True, "infinite": False, "number": 17}, 17.0),
        ("CANCELLED", 0, None),
        ("RUNNING", 1_795_862_583, None),
        ("PENDING", 0, None),
    ],
)
def test_end_time_only_of_finished_jobs(
    state: object, end_time: object, ended: float | None
) -> None:
    job = {"job_id": 1, "name": "w-0", "job_state": state, "end_time": end_time}
    [record] = parse_squeue_json(json.dumps({"jobs": [job]}))
    assert record.ended == ended


def test_sacct_lines_of_jobs_not_steps_are_left_out() -> None:
    steps = parse_steps(SACCT_175, SACCT_USAGE_FIELDS)
    assert {(s.job, s.step) for s in steps} == {
        ("175+0", "batch"),
        ("175", "batch"),
        ("175+0", "0"),
        ("175", "0"),
        ("175+1", "0"),
        ("176", "0"),
    }


def test_jobs_only_sacct_knows_list_their_submit_and_end_time(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=175)
    sched, done = two_replicas(tmp_path, fake)
    _, running = two_replicas(tmp_path, fake)
    fake.set_state(done, "CANCELLED")
    fake.set_state(running, "RUNNING")
    for job in fake.jobs.values():
        job.user, job.user_id, job.in_squeue = "me", 0, False  # MinJobAge passed
        job.submit, job.end = "2026-11-28T10:00:00", "2026-11-28T10:05:30"
    fake.jobs[running].end = "Unknown"
    import torchx_core.schedulers.slurm.scheduler as mod

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "_current_user", lambda: {"me"})
        rows = {r.app_id: r for r in sched.list()}
    submitted = datetime(2026, 11, 28, 10, 0, 0).timestamp()  # sacct prints local time
    assert rows[done].state == AppState.CANCELLED
    assert (rows[done].created, rows[done].ended) == (submitted, submitted + 330)
    assert rows[running].created == submitted and rows[running].ended is None


def test_a_short_finished_step_without_memory_samples_still_gives_its_cpu(tmp_path: Path) -> None:
    fake = UsageSlurm(next_id=222)
    sched, app_id = two_replicas(tmp_path, fake)
    fake.set_state(app_id, "FAILED")
    # recorded from the test cluster: steps that ended before the first JobAcctGather sample
    fake.sacct_usage = (
        "222+0|222|00:00.056||\n"
        "222+0.batch|222.batch|00:00.027|energy=0|1\n"
        "222+0.0|222.0|00:00.029|energy=0|1\n"
        "222+1|223|00:00.017||\n"
        "222+1.0|223.0|00:00.017|energy=0|1\n"
    )
    assert sched.resource_usage(app_id) == {
        ("burn", 0): ReplicaUsage(cpu_seconds=0.029, rss_bytes=0, processes=1),
        ("burn", 1): ReplicaUsage(cpu_seconds=0.017, rss_bytes=0, processes=1),
    }
