"""One app per identity when two attempts attach at the same moment, on the real backends.

Local: the name lock in the root serializes the look-up and the submit (no duplicate ever
starts). Slurm: each attempt lists by name right after its submit; the later job cancels itself
and its attempt reattaches to the earlier one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from attach_race import check, check_owners, race, race_owners
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

from torchx_core import specs

TRIALS = 20


def _app() -> specs.AppDef:
    role = specs.Role(
        "worker",
        image="",
        entrypoint=sys.executable,
        args=["-c", "import time; time.sleep(300)"],
        resource=specs.Resource(cpu=1, gpu=0, memMB=100),
    )
    return specs.AppDef("race", roles=[role])


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.timeout(600)
def test_two_attempts_at_once_start_one_local_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    result = race("local_cwd", {}, _app(), TRIALS)
    assert check(result, TRIALS) == []
    # nothing was submitted twice: the second attempt always reattached
    assert all(
        sorted(h for _, h, _ in result["attached"][t]) == ["reattached", "submitted"]
        for t in range(TRIALS)
    )


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.timeout(900)
@pytest.mark.parametrize("attempts", [2, 5])
def test_the_owner_of_a_raced_local_app_is_the_last_adopter_and_no_stale_kill_cancels_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: int
) -> None:
    """``attempts`` processes attach one identity at once, 30 times; then each one's kill path
    runs. The owner recorded is always the attempt that held the name lock last, only its kill
    path cancels the app, and every stale attempt's sees it superseded."""
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    result = race_owners(_app(), attempts, 30, str(tmp_path / "trace"))
    assert check_owners(result, attempts) == []


@pytest.mark.integration
@pytest.mark.slurm
@pytest.mark.timeout(900)
def test_two_attempts_at_once_keep_one_slurm_job(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    result = race("slurm", {"job_dir": str(tmp_path)}, _app(), TRIALS)
    assert check(result, TRIALS) == []
