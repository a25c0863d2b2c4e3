"""The Prefect blocks on a real Prefect server: ``prefect block register -m torchx_prefect``,
a ``TorchXScheduler`` saved here and loaded in another process (secrets masked), flows that
name it and run apps on ``local_cwd`` and on the real Slurm cluster, and a ``TorchXJob``
(Prefect's JobBlock/JobRun) that completes, and that cancels its app on timeout."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect_fixtures import PrefectAPI
from prefect_helpers import flow_run_logs, wait_no_app_processes, wait_terminal

from torchx_core.runner import get_runner
from torchx_core.specs import AppDef, AppState, Resource, Role

pytestmark = [pytest.mark.integration, pytest.mark.prefect]

REPO = Path(__file__).resolve().parents[2]
from support.slurm_fixtures import SlurmCluster, slurm_cluster  # noqa: E402, F401 - a fixture

SECRET_VAR, MARK_VAR = "TORCHX_BLOCK_SECRET", "TORCHX_BLOCK_MARK"


@pytest.fixture(scope="module")
def registered(prefect_server: PrefectAPI) -> PrefectAPI:
    """The block types, registered with the CLI as the README says."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "prefect"), "block", "register", "-m", "torchx_prefect"],
        env={**os.environ, **prefect_server.env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TorchX Scheduler" in proc.stdout and "TorchX Job" in proc.stdout, proc.stdout
    return prefect_server


@pytest.fixture
def local_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "torchx-local"
    root.mkdir()
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(root))
    yield root
    assert wait_no_app_processes(root) == []


def env_printer(name: str, image: str = str(REPO), **role: Any) -> AppDef:
    code = (
        f"import os; print('mark=' + os.environ.get({MARK_VAR!r}, '-'),"
        f" 'secret=' + os.environ.get({SECRET_VAR!r}, '-'), flush=True)"
    )
    return AppDef(
        name=name,
        roles=[
            Role(
                name="worker",
                image=image,
                entrypoint=sys.executable,
                args=["-u", "-c", code],
                **role,
            )
        ],
    )


def save_scheduler_block(name: str, scheduler: str, **fields: Any) -> dict[str, str]:
    from torchx_prefect import TorchXScheduler

    tag = uuid.uuid4().hex[:8]
    values = {"mark": f"mark-{tag}", "secret": f"s3cret-{tag}"}
    TorchXScheduler(
        scheduler=scheduler,
        env={MARK_VAR: values["mark"], **fields.pop("env", {})},
        secret_env={SECRET_VAR: values["secret"]},
        **fields,
    ).save(name, overwrite=True)
    return values


def test_register_lists_both_block_types(registered: PrefectAPI) -> None:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        names = {client.read_block_type_by_slug(s).name for s in ("torchx-scheduler", "torchx-job")}
    assert names == {"TorchX Scheduler", "TorchX Job"}


def test_scheduler_block_saved_here_loads_in_another_process(registered: PrefectAPI) -> None:
    from prefect import get_client

    name = f"sched-{uuid.uuid4().hex[:6]}"
    values = save_scheduler_block(name, "local_cwd", cfg={"prepend_cwd": True})
    code = (
        "import json; from torchx_prefect import TorchXScheduler\n"
        f"b = TorchXScheduler.load({name!r})\n"
        "print(json.dumps({'scheduler': b.scheduler, 'cfg': b.cfg, 'env': b.env,"
        " 'masked': repr(b.secret_env), 'environment': b.environment()}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **registered.env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["scheduler"] == "local_cwd" and got["cfg"] == {"prepend_cwd": True}
    assert got["env"] == {MARK_VAR: values["mark"]}
    assert values["secret"] not in got["masked"]
    assert got["environment"] == {MARK_VAR: values["mark"], SECRET_VAR: values["secret"]}
    # the server hands the secret out only when asked for it
    with get_client(sync_client=True) as client:
        doc = client.read_block_document_by_name(name, "torchx-scheduler", include_secrets=False)
    assert values["secret"] not in json.dumps(doc.data, default=str)


@pytest.mark.parametrize("how", ["name", "prefixed", "block"])
def test_flow_runs_an_app_on_a_named_scheduler_block(
    registered: PrefectAPI, local_root: Path, tmp_path: Path, how: str
) -> None:
    from prefect import flow

    from torchx_prefect import TorchXScheduler, run_app_sync

    name = f"local-{uuid.uuid4().hex[:6]}"
    log_dir = tmp_path / "logs"
    values = save_scheduler_block(name, "local_cwd", cfg={"log_dir": str(log_dir)})
    scheduler: Any = {
        "name": name,
        "prefixed": f"torchx-scheduler/{name}",
        "block": TorchXScheduler.load(name),
    }[how]

    @flow
    def f() -> Any:
        return run_app_sync(env_printer("blocky"), scheduler=scheduler, poll_interval=0.2)

    state = f(return_state=True)
    assert state.is_completed(), state
    result = state.result()
    with get_runner() as runner:
        lines = [ln.strip() for ln in runner.log_lines(result.app_handle, "worker", 0)]
    assert lines == [f"mark={values['mark']} secret={values['secret']}"]
    session, app_id = result.app_handle.split("://", 1)[1].split("/")
    assert (log_dir / session / app_id).is_dir()  # the block's cfg (log_dir) applied
    assert MARK_VAR not in os.environ and SECRET_VAR not in os.environ  # restored after the task


def test_env_drop_in_a_blocks_cfg_keeps_its_secret_from_local_replicas(
    registered: PrefectAPI, local_root: Path
) -> None:
    """What the README says keeps a block's secret from the replicas on local_cwd: its cfg's
    ``env_drop`` (a role's own env is still set)."""
    from prefect import flow

    from torchx_prefect import run_app_sync

    name = f"local-drop-{uuid.uuid4().hex[:6]}"
    values = save_scheduler_block(name, "local_cwd", cfg={"env_drop": [SECRET_VAR]})

    @flow
    def f() -> Any:
        return run_app_sync(env_printer("dropper"), scheduler=name, poll_interval=0.2)

    state = f(return_state=True)
    assert state.is_completed(), state
    with get_runner() as runner:
        lines = [ln.strip() for ln in runner.log_lines(state.result().app_handle, "worker", 0)]
    assert lines == [f"mark={values['mark']} secret=-"]


def test_an_unknown_scheduler_name_is_a_clear_error(registered: PrefectAPI) -> None:
    from prefect import flow

    from torchx_prefect import InvalidTaskArgumentError, run_app_sync

    @flow
    def f() -> Any:
        return run_app_sync(env_printer("nope"), scheduler="no-such-block-or-scheduler")

    state = f(return_state=True)
    with pytest.raises(InvalidTaskArgumentError, match="neither a TorchX scheduler") as info:
        state.result()
    assert "local_cwd" in str(info.value) and ".save('no-such-block-or-scheduler')" in str(
        info.value
    )


@pytest.mark.slurm
def test_flow_runs_an_app_on_slurm_through_a_block(
    registered: PrefectAPI,
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    from prefect import flow

    from torchx_prefect import run_app_sync

    name = f"slurm-{uuid.uuid4().hex[:6]}"
    # the job runs (and Slurm writes its output files) in tmp_path: the block's cfg applies
    values = save_scheduler_block(
        name,
        "slurm",
        env={"SLURM_CONF": slurm_cluster.conf},
        cfg={"time": "5:00", "job_dir": str(tmp_path)},
    )
    app = env_printer("slurmy", image=str(tmp_path), resource=Resource(cpu=1, gpu=0, memMB=100))

    @flow
    def f() -> Any:
        return run_app_sync(app, scheduler=name, poll_interval=0.5)

    state = f(return_state=True)
    assert state.is_completed(), state
    result = state.result()
    assert result.app_handle.startswith("slurm://")
    with get_runner() as runner:
        lines = [ln.strip() for ln in runner.log_lines(result.app_handle, "worker", 0)]
    assert f"mark={values['mark']} secret={values['secret']}" in lines
    assert list(tmp_path.glob("slurm-*-worker-0.out"))  # ran in the block's job_dir


def test_job_block_triggers_waits_and_fetches_the_result(
    registered: PrefectAPI, local_root: Path
) -> None:
    from prefect import flow

    from torchx_prefect import AppResult, TorchXJob, TorchXScheduler

    sched_name, job_name = f"jobsched-{uuid.uuid4().hex[:6]}", f"job-{uuid.uuid4().hex[:6]}"
    values = save_scheduler_block(sched_name, "local_cwd")
    TorchXJob(
        scheduler=TorchXScheduler.load(sched_name),
        app=env_printer("jobby").to_dict(),
        poll_interval=0.2,
    ).save(job_name, overwrite=True)

    @flow
    async def f() -> Any:
        job = await TorchXJob.load(job_name)
        run = await job.trigger()
        await run.wait_for_completion()
        return await run.fetch_result()

    state = asyncio.run(f(return_state=True))
    assert state.is_completed(), state
    result = state.result()
    assert isinstance(result, AppResult) and result.state == AppState.SUCCEEDED
    with get_runner() as runner:
        lines = [ln.strip() for ln in runner.log_lines(result.app_handle, "worker", 0)]
    assert lines == [f"mark={values['mark']} secret={values['secret']}"]


def test_job_block_timeout_cancels_the_app(registered: PrefectAPI, local_root: Path) -> None:
    from prefect import flow

    from torchx_prefect import TorchXJob, TorchXScheduler

    sleeper = AppDef(
        name="jobsleep",
        roles=[
            Role(
                name="worker",
                image=str(REPO),
                entrypoint=sys.executable,
                args=["-u", "-c", "import time; print('sleeping', flush=True); time.sleep(600)"],
            )
        ],
    )
    job = TorchXJob(
        scheduler=TorchXScheduler(scheduler="local_cwd"),
        app=sleeper.to_dict(),
        poll_interval=0.2,
        timeout_seconds=15,
    )
    handles: list[str] = []

    @flow
    async def f() -> Any:
        run = await job.trigger()
        handles.append(run.app_handle)
        await run.wait_for_completion()

    state = asyncio.run(f(return_state=True))
    assert state.is_failed(), state
    (handle,) = handles
    with pytest.raises(TimeoutError) as info:  # says what timed out: the app and the limit
        state.result()
    assert handle in str(info.value) and "timeout_seconds=15" in str(info.value)
    assert wait_terminal(handle) == AppState.CANCELLED
    logs = flow_run_logs(state.state_details.flow_run_id, "because the job timed out")
    assert any(f"Cancelling TorchX app {handle} because the job timed out" in m for m in logs)
