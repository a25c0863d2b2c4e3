"""Unit tests of the local scheduler: dry run, options, validation, status files, list, GC, logs.

No process is started here: status files and logs are written by the tests themselves (the
supervisor's lock is free, so they look like apps whose supervisor has finished).
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.schedulers.api import AppValidationError, InvalidLogQueryError, Stream
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import (
    MARKER_FILE,
    STATUS_FILE,
    log_path,
    write_json_atomic,
)
from torchx_core.schedulers.local.scheduler import (
    LocalOpts,
    LocalRequest,
    LocalScheduler,
    create_dir_scheduler,
    create_scheduler,
    make_unique,
)
from torchx_core.specs import AppState, UnknownAppException


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "root")
    monkeypatch.setenv(_state.ROOT_ENV, path)
    return path


@pytest.fixture
def sched(root: str) -> LocalScheduler:
    return create_scheduler("sess")


def fake_app(
    root: str, app_id: str, state: str = "SUCCEEDED", states: str = "SS", **extra: object
) -> str:
    """Writes the status file of a finished app (no supervisor) and returns its directory."""
    app_dir = os.path.join(root, app_id)
    os.makedirs(os.path.join(app_dir, "r"), exist_ok=True)
    status = {
        "v": 1, "app_id": app_id, "name": app_id.rsplit("-", 1)[0], "state": state,
        "num_restarts": 0, "msg": "", "structured_error_msg": "<NONE>", "sup_pid": 0,
        "created": time.time(), "updated": time.time(),
        "ended": time.time() if state in ("SUCCEEDED", "FAILED", "CANCELLED") else None,
        "failed": None, "roles": [{"name": "r", "states": states, "pids": [0] * len(states)}],
    }  # fmt: skip
    status.update(extra)
    write_json_atomic(os.path.join(app_dir, STATUS_FILE), status)
    with open(os.path.join(app_dir, MARKER_FILE), "w") as f:
        f.write(app_id)  # as the scheduler does first when it creates an app
    return app_dir


# -- ids, options, factories -----------------------------------------------------------------


def test_make_unique_is_safe_and_unique() -> None:
    ids = {make_unique("my app/x") for _ in range(2000)}
    assert len(ids) == 2000
    for app_id in ids:
        name, suffix = app_id.rsplit("-", 1)
        assert name == "my-app-x" and len(suffix) == 12 and suffix.isalnum()


def test_run_opts_are_torchx_compatible() -> None:
    opts = create_scheduler("s").run_opts()
    names = {name for name, _ in opts}
    assert {"log_dir", "prepend_cwd", "auto_set_cuda_visible_devices", "grace_period"} <= names
    assert opts.get("prepend_cwd").default is False  # type: ignore[union-attr]
    assert LocalOpts.from_cfg({"grace_period": "1.5"}).grace_period == 1.5


def test_factories_accept_torchx_kwargs() -> None:
    assert create_scheduler("s", cache_size=100).backend == "local_cwd"
    assert create_dir_scheduler("s", cache_size=100, extra_paths=["/x"]).backend == "local"


def test_root_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(_state.ROOT_ENV, raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert _state.default_root() == os.path.join(str(tmp_path), f"torchx-local-{os.getuid()}")
    monkeypatch.setenv("XDG_STATE_HOME", "/xdg")
    assert _state.default_root() == "/xdg/torchx/local"
    monkeypatch.setenv(_state.ROOT_ENV, "~/r")
    assert _state.default_root() == os.path.expanduser("~/r")


# -- dry run ---------------------------------------------------------------------------------


def _dryrun(sched: LocalScheduler, role: specs.Role, cfg: dict | None = None) -> LocalRequest:
    return sched.submit_dryrun(specs.AppDef("app", roles=[role]), cfg or {}).request


def test_dryrun_substitutes_macros_per_replica(sched: LocalScheduler, root: str) -> None:
    role = specs.Role(
        "trainer", image="img", entrypoint="python", num_replicas=2,
        args=["--id", specs.macros.app_id, "--rep", specs.macros.replica_id,
              "--root", specs.macros.img_root, f"$${{{specs.macros.rank0_env}}}:29500"],
        env={"A": specs.macros.app_id, "R": f"r{specs.macros.replica_id}"},
    )  # fmt: skip
    req = _dryrun(sched, role)
    app_id = req.app_id
    assert app_id.startswith("app-") and req.app_dir == os.path.join(root, app_id)
    (r,) = req.roles
    assert r.cwd == os.getcwd()
    assert r.argv[:3] == ["python", "--id", app_id]
    assert r.argv[-1] == "${TORCHX_RANK0_HOST}:29500"
    assert [rep.argv[4] for rep in r.replicas] == ["0", "1"]  # type: ignore[index]
    assert r.argv[6] == os.getcwd()
    assert r.env["A"] == app_id and "R" not in r.env
    assert [rep.env["R"] for rep in r.replicas] == ["r0", "r1"]
    assert [rep.env["TORCHX_REPLICA_IDX"] for rep in r.replicas] == ["0", "1"]
    assert r.replicas[1].env["TORCHELASTIC_ERROR_FILE"] == os.path.join(
        req.app_dir, "trainer", "1.error.json"
    )
    assert r.env["TORCHX_RANK0_HOST"] == "localhost" and r.env["MASTER_ADDR"] == "localhost"
    assert r.env["TORCHX_JOB_ID"] == f"local_cwd://sess/{app_id}"
    assert r.env["TORCHX_ROLE_NAME"] == "trainer" and r.env["PYTHONUNBUFFERED"] == "x"
    assert "RANK" not in r.env and "WORLD_SIZE" not in r.env


def test_dryrun_argv_is_shared_when_it_does_not_vary(sched: LocalScheduler) -> None:
    req = _dryrun(
        sched, specs.Role("r", image="", entrypoint="/bin/true", args=["x"], num_replicas=3)
    )
    assert [rep.argv for rep in req.roles[0].replicas] == [None, None, None]
    plan = req.materialize()
    assert plan["roles"][0]["replica_argv"] == {} and plan["roles"][0]["num_replicas"] == 3


def test_dryrun_is_printable_and_pure(sched: LocalScheduler, root: str) -> None:
    info = sched.submit_dryrun(
        specs.AppDef("app", roles=[specs.Role("r", image="", entrypoint="echo")]), {}
    )
    text = str(info)
    assert info.request.app_id in text and "cmd: echo" in text
    assert not os.path.exists(root)  # nothing written by a dry run


def test_path_and_prepend_cwd(sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    role = specs.Role("r", image="", entrypoint="x", env={"PATH": "/opt/bin"})
    cwd = os.getcwd()
    # the working directory comes last unless prepend_cwd puts it first (TorchX semantics)
    assert _dryrun(sched, role).roles[0].env["PATH"] == f"/opt/bin:/usr/bin:{cwd}"
    assert (
        _dryrun(sched, role, {"prepend_cwd": True}).roles[0].env["PATH"]
        == f"{cwd}:/opt/bin:/usr/bin"
    )


def test_cuda_visible_devices_round_robin(root: str) -> None:
    sched = LocalScheduler("s", gpu_count=4)
    role = specs.Role(
        "r",
        image="",
        entrypoint="x",
        num_replicas=3,
        resource=specs.Resource(cpu=1, gpu=2, memMB=1),
    )
    req = _dryrun(sched, role, {"auto_set_cuda_visible_devices": True})
    assert [rep.env["CUDA_VISIBLE_DEVICES"] for rep in req.roles[0].replicas] == [
        "0,1",
        "2,3",
        "0,1",
    ]
    req = _dryrun(sched, role)
    assert "CUDA_VISIBLE_DEVICES" not in req.roles[0].replicas[0].env


def test_validation_lists_every_problem(sched: LocalScheduler) -> None:
    app = specs.AppDef(
        "bad",
        roles=[specs.Role("a/b", image="", entrypoint="x"), specs.Role("c", image="")],
    )
    with pytest.raises(AppValidationError) as e:
        sched.submit_dryrun(app, {})
    assert "'a/b' is not usable as a directory name" in str(e.value)
    assert "role `c` has no entrypoint" in str(e.value)


def test_local_dir_scheduler_uses_image_dir(root: str, tmp_path: Path) -> None:
    sched = create_dir_scheduler("s")
    req = _dryrun(
        sched, specs.Role("r", image=str(tmp_path), entrypoint="x", args=[specs.macros.img_root])
    )
    assert req.roles[0].cwd == str(tmp_path) and req.roles[0].argv[1] == str(tmp_path)
    with pytest.raises(AppValidationError, match="not an existing directory"):
        _dryrun(sched, specs.Role("r", image="busybox:latest", entrypoint="x"))


def test_workspace_is_staged_then_moved_into_the_app_dir(
    sched: LocalScheduler, root: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("x")
    role = specs.Role("r", image="", entrypoint="x", workspace=specs.Workspace({str(ws): ""}))
    req = _dryrun(sched, role)
    ((src, dst),) = req.staged.items()
    assert (
        src.startswith(os.path.join(root, _state.STAGING))
        and (Path(src) / "f.txt").read_text() == "x"
    )
    assert dst == os.path.join(req.app_dir, "workspace") == req.roles[0].cwd


# -- status, describe, list ------------------------------------------------------------------


def test_describe_maps_the_status_file(sched: LocalScheduler, root: str) -> None:
    err = json.dumps({"message": "boom", "exit_code": 3})
    fake_app(
        root,
        "app-x1",
        state="FAILED",
        states="FSC",
        failed=[0, 0],
        structured_error_msg=err,
        msg="m",
    )
    desc = sched.describe("app-x1")
    assert desc is not None
    assert desc.state == AppState.FAILED and desc.msg == "m" and desc.structured_error_msg == err
    replicas = desc.roles_statuses[0].replicas
    assert [r.state for r in replicas] == [AppState.FAILED, AppState.SUCCEEDED, AppState.CANCELLED]
    assert replicas[0].structured_error_msg == err and replicas[1].structured_error_msg == "<NONE>"
    assert desc.ui_url == f"file://{os.path.realpath(os.path.join(root, 'app-x1'))}"


def test_describe_unknown_or_malformed_id_is_none(sched: LocalScheduler, root: str) -> None:
    assert sched.describe("nope-123") is None
    assert sched.describe("../etc") is None
    assert sched.describe("") is None
    assert not sched.exists("nope-123")


def test_status_of_app_whose_supervisor_died_becomes_failed(
    sched: LocalScheduler, root: str
) -> None:
    app_dir = fake_app(root, "app-x2", state="RUNNING", states="RS", sup_pid=123)
    desc = sched.describe("app-x2")
    assert desc is not None and desc.state == AppState.FAILED
    assert "died" in desc.msg
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        AppState.UNKNOWN,
        AppState.SUCCEEDED,
    ]
    # the correction is persisted
    assert _state.read_json(os.path.join(app_dir, STATUS_FILE))["state"] == "FAILED"  # type: ignore[index]


def test_list_is_one_pass_over_the_root(sched: LocalScheduler, root: str) -> None:
    fake_app(root, "b-2", state="CANCELLED", created=2.0)
    fake_app(root, "a-1", state="SUCCEEDED", created=1.0)
    os.makedirs(os.path.join(root, _state.STAGING))
    assert [a.app_id for a in sched.list()] == ["a-1", "b-2"]  # oldest first
    listed = {a.app_id: a for a in sched.list()}
    assert {k: v.state for k, v in listed.items()} == {
        "a-1": AppState.SUCCEEDED,
        "b-2": AppState.CANCELLED,
    }
    assert listed["a-1"].app_handle == "local_cwd://sess/a-1" and listed["a-1"].name == "a"
    assert create_scheduler("s", root=os.path.join(root, "missing")).list() == []


def test_cancel_and_delete_of_finished_app(sched: LocalScheduler, root: str) -> None:
    app_dir = fake_app(root, "app-x3")
    sched.cancel("app-x3")
    assert sched.describe("app-x3").state == AppState.SUCCEEDED  # type: ignore[union-attr]
    sched.delete("app-x3")
    assert not os.path.exists(app_dir) and sched.describe("app-x3") is None
    sched.cancel("app-x3")  # unknown: a no-op


def test_cancel_of_app_whose_supervisor_died_reports_the_death(
    sched: LocalScheduler, root: str
) -> None:
    # a status that claims RUNNING; its supervisor is gone: cancel notices, records FAILED
    fake_app(root, "app-x4", state="RUNNING", states="R", ended=None)
    sched.cancel("app-x4")
    desc = sched.describe("app-x4")
    assert desc is not None and desc.state == AppState.FAILED and "died" in desc.msg


# -- garbage collection ----------------------------------------------------------------------


def test_gc_removes_only_old_finished_apps(root: str) -> None:
    os.makedirs(root)
    old = fake_app(root, "old-1", ended=time.time() - 100)
    fresh = fake_app(root, "new-1")
    running = fake_app(root, "run-1", state="RUNNING", states="R", ended=None)
    staging = os.path.join(root, _state.STAGING, "ws-1")
    os.makedirs(staging)
    os.utime(staging, (time.time() - 100, time.time() - 100))
    removed = _state.collect_garbage(root, ttl=50)
    assert removed == ["old-1"]
    assert not os.path.exists(old) and os.path.exists(fresh) and os.path.exists(running)
    assert not os.path.exists(staging)


def test_maybe_gc_runs_at_most_once_per_interval(root: str) -> None:
    os.makedirs(root)
    fake_app(root, "old-1", ended=time.time() - 100)
    now = time.time()
    assert _state.maybe_gc(root, ttl=50, interval=600, now=now) == ["old-1"]
    fake_app(root, "old-2", ended=time.time() - 100)
    assert _state.maybe_gc(root, ttl=50, interval=600, now=now + 10) == []
    assert _state.maybe_gc(root, ttl=50, interval=600, now=now + 601) == ["old-2"]


def test_ttl_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_state.TTL_ENV, "42")
    assert _state.ttl_seconds() == 42.0
    assert _state.ttl_seconds(7) == 7.0
    monkeypatch.setenv(_state.TTL_ENV, "junk")
    assert _state.ttl_seconds() == _state.DEFAULT_TTL


# -- logs ------------------------------------------------------------------------------------


def _write_logs(app_dir: str) -> None:
    for stream, text in (("stdout", "a\nc\n"), ("stderr", "b\n"), ("combined", "a\nb\nc")):
        Path(log_path(app_dir, "r", 0, stream)).write_text(text)


def test_log_iter_streams_and_regex(sched: LocalScheduler, root: str) -> None:
    _write_logs(fake_app(root, "app-l1"))
    assert list(sched.log_iter("app-l1", "r", 0)) == ["a\n", "b\n", "c"]
    assert list(sched.log_iter("app-l1", "r", 0, streams=Stream.STDOUT)) == ["a\n", "c\n"]
    assert list(sched.log_iter("app-l1", "r", 0, streams=Stream.STDERR)) == ["b\n"]
    assert list(sched.log_iter("app-l1", "r", 0, regex="[ab]")) == ["a\n", "b\n"]
    assert list(sched.log_iter("app-l1", "r", 1)) == []  # replica 1 wrote nothing
    assert list(sched.log_iter("app-l1", "r", 0, should_tail=True)) == ["a\n", "b\n", "c"]


def test_log_iter_rejects_bad_queries(sched: LocalScheduler, root: str) -> None:
    fake_app(root, "app-l2")
    with pytest.raises(UnknownAppException):
        sched.log_iter("missing-1", "r", 0)
    with pytest.raises(InvalidLogQueryError, match="no role 'x'; its roles are: r"):
        sched.log_iter("app-l2", "x", 0)
    with pytest.raises(InvalidLogQueryError, match=r"replicas 0\.\.1; got k=5"):
        sched.log_iter("app-l2", "r", 5)
    with pytest.raises(InvalidLogQueryError, match="invalid log regex"):
        sched.log_iter("app-l2", "r", 0, regex="(")
    with pytest.raises(InvalidLogQueryError, match="valid streams: stdout, stderr, combined"):
        sched.log_iter("app-l2", "r", 0, streams="both")  # type: ignore[arg-type]


def test_fast_runopts_match_the_structured_opts() -> None:
    fast = create_scheduler("s")._run_opts()
    slow = LocalOpts.as_runopts()
    assert [(k, v.opt_type, v.default, v.help) for k, v in fast] == [
        (k, v.opt_type, v.default, v.help) for k, v in slow
    ]


def test_unusable_root_is_a_typed_error(tmp_path: Path) -> None:
    from torchx_core.schedulers.api import SchedulerError

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    sched = LocalScheduler("s", root=str(not_a_dir / "root"))
    app = specs.AppDef("a", roles=[specs.Role("r", image="", entrypoint="true")])
    with pytest.raises(SchedulerError, match="state root"):
        sched.schedule(sched.submit_dryrun(app, {}))


@pytest.mark.parametrize(
    ("err", "says"),
    [
        (errno.EACCES, "is not writable by this user"),
        (errno.EROFS, "is on a read-only filesystem"),
        (errno.ENOSPC, "is full"),
        (errno.ENAMETOOLONG, "too long"),
    ],
)
def test_os_errors_of_the_root_become_typed_errors(tmp_path: Path, err: int, says: str) -> None:
    from torchx_core.schedulers.local._create import LocalDiskError, disk_error

    e = disk_error(
        OSError(err, os.strerror(err), str(tmp_path / "x")), str(tmp_path), "cannot create app a-1"
    )
    assert isinstance(e, LocalDiskError) and e.errno == err
    assert (
        str(e).startswith("cannot create app a-1:") and says in str(e) and str(tmp_path) in str(e)
    )
    if err == errno.ENOSPC:
        assert "bytes free" in str(e)


@pytest.mark.parametrize("bad", [0, -1, "3", True])
def test_bad_cache_size_is_refused_as_torchx(bad: object) -> None:
    """TorchX's local scheduler factory raises ValueError for cache_size < 1; ours keeps no cache
    (the kwarg is otherwise ignored) but refuses a bad value the same way."""
    from torchx_core.schedulers.api import SchedulerArgumentError
    from torchx_core.schedulers.local.scheduler import create_scheduler

    with pytest.raises(SchedulerArgumentError, match="cache_size") as e:
        create_scheduler("s", cache_size=bad)
    assert isinstance(e.value, ValueError)
    create_scheduler("s", cache_size=5).close()
