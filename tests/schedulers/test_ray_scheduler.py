"""Unit tests of the ``ray`` scheduler against a stateful fake JobSubmissionClient."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from golden_files import check_golden
from support.ray_fixtures import FakeJobClient, FakeStatus

from torchx_core import __version__
from torchx_core.schedulers.api import InvalidLogQueryError, SchedulerError, Stream
from torchx_core.schedulers.ray.scheduler import (
    JOB_STATES,
    RayScheduler,
    create_scheduler,
)
from torchx_core.specs import (
    AppDef,
    AppState,
    InvalidRunConfigException,
    MissingDependencyError,
    Role,
    UnknownAppException,
    Workspace,
    macros,
    resource,
)


def _app(**trainer_kwargs: object) -> AppDef:
    trainer = Role(
        name="trainer",
        image="",
        entrypoint="python",
        args=["-m", "train", "--rank", macros.replica_id, "--app", macros.app_id],
        env={"MASTER_VAR": macros.rank0_env},
        num_replicas=2,
        resource=resource(cpu=2, gpu=1, memMB=1024),
        **trainer_kwargs,
    )  # type: ignore[arg-type]
    ps = Role(
        name="ps", image="", entrypoint="echo", args=["ps"], resource=resource(cpu=1, memMB=64)
    )
    return AppDef("Ray App", roles=[trainer, ps])


def _sched(client: FakeJobClient | None = None) -> RayScheduler:
    return RayScheduler("t", client=client or FakeJobClient(), poll_interval=0.01)


def test_dryrun_golden_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    info = _sched().submit_dryrun(_app(), {"placement_strategy": "SPREAD"})
    req = info.request
    sid = req.submission_id
    assert sid.startswith("Ray-App-") and req.app_id == f"127.0.0.1:8265-{sid}"
    # dryrun prints the native request: exactly the golden file (random submission id replaced)
    text = str(info).replace(sid, "SID").replace(f'"{__version__}"', '"VERSION"')
    check_golden("ray_dryrun.json", text, __file__)
    assert json.loads(str(info)) == req.to_dict()
    assert [(a.role, a.replica_id) for a in req.actors] == [
        ("trainer", 0),
        ("trainer", 1),
        ("ps", 0),
    ]


def test_dashboard_address_from_option_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "http://10.0.0.1:8265")
    assert _sched().submit_dryrun(_app(), {}).request.dashboard_address == "10.0.0.1:8265"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # a GCS address, not the Jobs API
    assert _sched().submit_dryrun(_app(), {}).request.dashboard_address == "127.0.0.1:8265"
    req = _sched().submit_dryrun(_app(), {"dashboard_address": "http://head:9000/"}).request
    assert req.dashboard_address == "head:9000" and req.app_id.startswith("head:9000-")


def test_bad_placement_strategy() -> None:
    with pytest.raises(SchedulerError, match=r"placement_strategy='ROUND'.*PACK, SPREAD"):
        _sched().submit_dryrun(_app(), {"placement_strategy": "ROUND"})


def test_schedule_uploads_driver_actors_workspace_and_requirements(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('x')\n")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("# comment\nnumpy==1.26\n\nrequests\n")
    client = FakeJobClient()
    sched = _sched(client)
    app = _app(workspace=Workspace({str(tmp_path): "src"}))
    app_id = sched.submit(app, {"requirements": str(reqs)})
    (job,) = client.jobs.values()
    assert app_id.endswith(job.submission_id)
    assert job.entrypoint == "python _ray_driver.py"
    assert job.runtime_env["pip"] == ["numpy==1.26", "requests"]
    assert set(job.files) == {
        "_ray_driver.py",
        "torchx_ray_actors.json",
        "src/train.py",
        "src/requirements.txt",
    }
    spec = json.loads(job.files["torchx_ray_actors.json"])
    assert [(a["role"], a["replica_id"]) for a in spec["actors"]] == [
        ("trainer", 0),
        ("trainer", 1),
        ("ps", 0),
    ]
    assert spec["placement_strategy"] == "PACK"
    assert not Path(job.runtime_env["working_dir"]).exists()  # temp dir removed after upload


def test_describe_states_list_logs_cancel_delete() -> None:
    client = FakeJobClient()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    sid = app_id.split("-", 1)[1]
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert [(r.role, len(r.replicas)) for r in desc.roles_statuses] == [("trainer", 2), ("ps", 1)]
    assert desc.ui_url == f"http://127.0.0.1:8265/#/jobs/{sid}"
    expected = {
        "PENDING": AppState.PENDING,
        "RUNNING": AppState.RUNNING,
        "SUCCEEDED": AppState.SUCCEEDED,
        "FAILED": AppState.FAILED,
        "STOPPED": AppState.CANCELLED,
    }
    assert set(JOB_STATES) == set(expected)
    for native, state in expected.items():
        client.jobs[sid].status = FakeStatus(native)
        assert sched.describe(app_id).state == state  # type: ignore[union-attr]
    client.jobs[sid].status = FakeStatus.RUNNING
    client.jobs["foreign"] = type(client.jobs[sid])("foreign", "x", {}, {}, {})
    assert [(a.app_id, a.state, a.name) for a in sched.list()] == [
        (app_id, AppState.RUNNING, "Ray App")
    ]
    client.jobs[sid].logs = (
        "INFO worker.py -- Connected\n"
        "\x1b[36m(CommandActor pid=1)\x1b[0m [trainer/0] step 1\n"
        "\x1b[36m(CommandActor pid=2)\x1b[0m [trainer/1] step 1 on 1\n"
        "(CommandActor pid=1) [trainer/0] step 2\n"
        "(CommandActor pid=3) [ps/0] ps\n"
        "(CommandActor pid=1) [trainer/0] partial"
    )
    assert list(sched.log_iter(app_id, "trainer", 0)) == ["step 1\n", "step 2\n"]
    assert list(sched.log_iter(app_id, "trainer", 1)) == ["step 1 on 1\n"]
    assert list(sched.log_iter(app_id, "trainer", 0, regex="2")) == ["step 2\n"]
    with pytest.raises(InvalidLogQueryError, match="COMBINED"):
        sched.log_iter(app_id, "trainer", 0, streams=Stream.STDOUT)
    sched.cancel(app_id)
    assert client.stopped == [sid]
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    # once finished, the partial last line is complete too
    assert list(sched.log_iter(app_id, "trainer", 0, should_tail=True)) == [
        "step 1\n",
        "step 2\n",
        "partial\n",
    ]
    sched.delete(app_id)
    assert client.deleted == [sid] and sched.describe(app_id) is None


def test_tail_polls_until_the_job_ends() -> None:
    class Finishing(FakeJobClient):
        polls = 0

        def get_job_logs(self, job_id: str) -> str:
            self.polls += 1
            job = self.jobs[job_id]
            job.logs += f"(CommandActor pid=1) [ps/0] line {self.polls}\n"
            if self.polls == 3:
                job.status = FakeStatus.SUCCEEDED
            return job.logs

    client = Finishing()
    sched = _sched(client)
    app_id = sched.submit(_app(), {})
    client.jobs[app_id.split("-", 1)[1]].status = FakeStatus.RUNNING
    # the job ends during the 3rd read; one more read after the end collects the rest
    assert list(sched.log_iter(app_id, "ps", 0, should_tail=True)) == [
        "line 1\n",
        "line 2\n",
        "line 3\n",
        "line 4\n",
    ]


def test_unknown_apps_and_submit_errors() -> None:
    client = FakeJobClient()
    sched = _sched(client)
    assert sched.describe("127.0.0.1:8265-nope") is None
    assert sched.describe("not-an-address") is None
    sched.cancel("127.0.0.1:8265-nope")
    with pytest.raises(UnknownAppException):
        sched.log_iter("127.0.0.1:8265-nope", "ps")
    client.fail_submit = "Connection refused"
    with pytest.raises(SchedulerError, match=r"rejected job .*Connection refused"):
        sched.submit(_app(), {})


def test_client_per_address_and_missing_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def factory(address: str) -> FakeJobClient:
        made.append(address)
        return FakeJobClient()

    sched = RayScheduler("t", client_factory=factory)
    sched.describe("a:1-x")
    sched.describe("a:1-y")
    sched.describe("b:2-x")
    assert made == ["a:1", "b:2"]
    assert isinstance(create_scheduler("s", client=FakeJobClient()), RayScheduler)
    monkeypatch.setitem(sys.modules, "ray", None)
    # not installed at all (an installed package that fails to import gets another message)
    monkeypatch.setattr("torchx_core.specs._dependencies.installed_version", lambda _dist: None)
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    sched = RayScheduler("t")
    sched.submit_dryrun(_app(), {})  # dryrun needs no ray
    with pytest.raises(MissingDependencyError, match=r"checkout>\[ray\]"):
        sched.describe("127.0.0.1:8265-x")


def test_bad_local_paths_and_unreachable_dashboard_are_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(
        InvalidRunConfigException, match="working_dir='/no/such/dir' is not a local"
    ):
        _sched().submit_dryrun(_app(), {"working_dir": "/no/such/dir"})
    with pytest.raises(InvalidRunConfigException, match=r"requirements='/no/reqs\.txt' is not a"):
        _sched().submit_dryrun(_app(), {"requirements": "/no/reqs.txt"})
    gone = tmp_path / "gone"
    gone.mkdir()
    info = _sched().submit_dryrun(_app(), {"working_dir": str(gone)})
    gone.rmdir()  # removed between dryrun and schedule
    with pytest.raises(SchedulerError, match=r"cannot copy the working directory .*gone"):
        _sched().schedule(info)

    def refused(address: str) -> FakeJobClient:
        raise ConnectionError(f"Failed to connect to Ray at address: http://{address}.")

    sched = RayScheduler("t", client_factory=refused)
    for call in (
        lambda: sched.describe("127.0.0.1:1-x"),
        lambda: sched.list(),
        lambda: sched.submit(_app(), {"dashboard_address": "127.0.0.1:1"}),
    ):
        with pytest.raises(
            SchedulerError,
            match=(
                r"cannot reach the Ray Jobs API at http://127\.0\.0\.1:(1|8265):"
                r" .*dashboard_address"
            ),
        ):
            call()


def test_image_directory_is_the_working_dir_like_torchx(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy\n")
    app = _app()
    app.roles[0].image = str(tmp_path)  # TorchX's ray scheduler uploads the image directory
    req = _sched().submit_dryrun(app, {}).request
    assert req.working_dir == str(tmp_path)
    assert req.requirements == str(tmp_path / "requirements.txt")
    app.roles[0].image = "ghcr.io/pytorch/torchx:latest"  # not a local directory: nothing
    req = _sched().submit_dryrun(app, {}).request
    assert req.working_dir is None and req.requirements is None
    client = FakeJobClient()
    create_scheduler("s", ray_client=client).submit(_app(), {})  # TorchX's name for client=
    assert len(client.jobs) == 1


def test_log_iter_names_the_valid_roles_and_replicas() -> None:
    sched = _sched()
    app_id = sched.submit(_app(), {})
    for role, k in (("trainer", 2), ("nope", 0), ("ps", -1)):
        with pytest.raises(InvalidLogQueryError) as e:
            sched.log_iter(app_id, role, k)
        assert f"no replica {k} of role {role!r}" in str(e.value)
        assert "trainer (replicas 0-1), ps (replicas 0-0)" in str(e.value)
