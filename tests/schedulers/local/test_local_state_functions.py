"""Unit tests of the local state's small decisions, one function at a time (``make test-fast``).

Markers and ownership, the sweep target of a copy, the lock file's pid and final status, the
dead- and stopped-supervisor corrections of a status read, and what garbage collection may
remove. App directories are made by hand; a supervisor is "alive" while this test holds an
exclusive ``flock`` on its lock file, and "stopped" when it is a real ``sleep`` under SIGSTOP.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import (
    LOCK_FILE,
    MARKER_FILE,
    STATUS_FILE,
    StatusDoc,
    new_instance,
)

APP = "fn-bcdfghjklmnp"
DAY = 24 * 3600.0


def _status(**fields: Any) -> dict[str, Any]:
    status: dict[str, Any] = {
        "v": 1,
        "app_id": APP,
        "name": "fn",
        "state": "RUNNING",
        "num_restarts": 0,
        "msg": "",
        "structured_error_msg": "<NONE>",
        "sup_pid": 0,
        "created": 1.0,
        "updated": 1.0,
        "ended": None,
        "failed": None,
        "roles": [{"name": "r", "states": "PRS", "pids": [0, 4242, 0]}],
    }
    status.update(fields)
    return status


def _app(
    root: Path,
    app_id: str = APP,
    marker: str | None = "auto",
    status: dict[str, Any] | None = None,
    lock: str = "",
) -> Path:
    """An app directory: marker (``"auto"``: this app, its real instance), lock, status."""
    d = root / app_id
    d.mkdir(parents=True)
    if marker == "auto":
        marker = f"{app_id}\n{new_instance(str(d))}\n"
    if marker is not None:
        (d / MARKER_FILE).write_text(marker)
    (d / LOCK_FILE).write_text(lock)
    if status is not None:
        (d / STATUS_FILE).write_text(json.dumps(status))
    return d


@pytest.fixture
def hold_lock() -> Iterator[Any]:
    """Makes an app's supervisor count as alive: an exclusive flock on its lock file."""
    fds: list[int] = []

    def hold(app_dir: Path) -> None:
        fd = os.open(app_dir / LOCK_FILE, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        fds.append(fd)

    yield hold
    for fd in fds:
        os.close(fd)


@pytest.fixture
def stopped_pid() -> Iterator[int]:
    """The pid of a live process under SIGSTOP (a stopped supervisor)."""
    p = subprocess.Popen(["sleep", "600"], start_new_session=True)
    os.kill(p.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while _state.process_state(p.pid) not in ("T", "t") and time.monotonic() < deadline:
        time.sleep(0.005)
    yield p.pid
    p.kill()
    p.wait()


def _on_disk(app_dir: Path) -> dict[str, Any]:
    return json.loads((app_dir / STATUS_FILE).read_text())


# -- markers and ownership ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app-1\ninst-1\n", ("app-1", "inst-1")),
        ("app-1\ninst-1", ("app-1", "inst-1")),
        (" app-1 \n inst-1 \nmore\n", ("app-1", "inst-1")),
        ("app-1\n", ("app-1", None)),
        ("app-1\n  \n", ("app-1", None)),
        ("app-1", ("app-1", None)),
        ("", ("", None)),
    ],
)
def test_read_marker_gives_the_app_id_and_the_instance(
    tmp_path: Path, text: str, expected: tuple[str, str | None]
) -> None:
    (tmp_path / MARKER_FILE).write_text(text)
    assert _state.read_marker(str(tmp_path)) == expected


def test_read_marker_reads_512_bytes_and_replaces_bad_utf8(tmp_path: Path) -> None:
    (tmp_path / MARKER_FILE).write_bytes(b"a" * 600)
    assert _state.read_marker(str(tmp_path)) == ("a" * 512, None)
    (tmp_path / MARKER_FILE).write_bytes(b"ap\xffp\nin\xfe\n")
    assert _state.read_marker(str(tmp_path)) == ("ap\ufffdp", "in\ufffd")


def test_read_marker_without_a_readable_marker_is_none(tmp_path: Path) -> None:
    assert _state.read_marker(str(tmp_path)) is None
    assert _state.read_marker(str(tmp_path / "missing")) is None
    (tmp_path / MARKER_FILE).mkdir()  # unreadable as a file
    assert _state.read_marker(str(tmp_path)) is None


def test_is_owned_needs_a_marker_naming_the_app(tmp_path: Path) -> None:
    mine = _app(tmp_path)
    assert _state.is_owned(str(mine), APP) is True
    assert _state.is_owned(str(mine), APP + "x") is False
    bare = _app(tmp_path, "bare-bcdfghjk", marker=None)
    assert _state.is_owned(str(bare), "bare-bcdfghjk") is False


# -- what a sweep may kill -------------------------------------------------------------------


def test_sweep_target_of_an_app_made_here_is_its_id_and_instance(tmp_path: Path) -> None:
    d = _app(tmp_path)
    instance = (d / MARKER_FILE).read_text().split("\n")[1]
    assert _state.sweep_target(str(d), APP) == (APP, instance)


def test_sweep_target_without_a_marker_or_an_instance_is_the_id_alone(tmp_path: Path) -> None:
    old = _app(tmp_path, "old-bcdfghjk", marker=None)
    assert _state.sweep_target(str(old), "old-bcdfghjk") == ("old-bcdfghjk", None)
    no_instance = _app(tmp_path, marker=f"{APP}\n")
    assert _state.sweep_target(str(no_instance), APP) == (APP, None)


def test_sweep_target_of_a_copy_or_another_app_is_copy(tmp_path: Path) -> None:
    other = _app(tmp_path, marker="other-bcdfghjk\n")
    assert _state.sweep_target(str(other), APP) == _state.COPY
    elsewhere = _app(tmp_path / "b", marker=f"{APP}\n1-2-abcdef\n")  # made for another dir
    assert _state.sweep_target(str(elsewhere), APP) == _state.COPY


# -- the lock file: pid and final status -------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "pid"),
    [
        (b"1234\n", 1234),
        (b" 77 \n{}\n", 77),
        (b"1234", 1234),
        (b"", 0),
        (b"\n", 0),
        (b"not a pid\n", 0),
        (b"1" * 40 + b"\n", int("1" * 32)),  # 32 bytes read at most
    ],
)
def test_supervisor_pid_is_the_first_line_of_the_lock(
    tmp_path: Path, content: bytes, pid: int
) -> None:
    (tmp_path / LOCK_FILE).write_bytes(content)
    assert _state.supervisor_pid(str(tmp_path)) == pid


def test_supervisor_pid_without_a_lock_file_is_zero(tmp_path: Path) -> None:
    assert _state.supervisor_pid(str(tmp_path)) == 0


def test_final_from_lock_returns_only_a_valid_final_status(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_FILE
    final = _status(state="FAILED", ended=5.0, msg="boom")
    lock.write_bytes(b"123\n" + json.dumps(final).encode() + b"\n")
    assert _state.final_from_lock(str(tmp_path)) == StatusDoc.from_json(final)
    for rest in (
        b"",
        b" \n ",
        json.dumps(_status(state="RUNNING")).encode(),
        b"{not json",
        json.dumps(_status(state="SUCCEEDED", roles="x")).encode(),  # fails the check
        b"[" * 100000,
    ):
        lock.write_bytes(b"123\n" + rest)
        assert _state.final_from_lock(str(tmp_path)) is None, rest[:40]
    lock.write_bytes(b"123")
    assert _state.final_from_lock(str(tmp_path)) is None
    lock.unlink()
    assert _state.final_from_lock(str(tmp_path)) is None


# -- reading a status: live, stopped, dead supervisors -------------------------------------------


def test_read_status_of_a_finished_app_is_the_file_as_written(tmp_path: Path) -> None:
    done = _status(state="SUCCEEDED", ended=2.0, roles=[{"name": "r", "states": "S", "pids": [0]}])
    d = _app(tmp_path, status=done)
    # the app id defaults to the directory's name
    assert _state.read_status(str(d)) == StatusDoc.from_json(done)
    assert _state.read_status(str(tmp_path / "nothing")) is None


def test_read_status_of_a_live_supervisor_changes_nothing(tmp_path: Path, hold_lock: Any) -> None:
    running = _status(sup_pid=os.getpid())  # a running, not stopped, "supervisor"
    d = _app(tmp_path, status=running)
    hold_lock(d)
    assert _state.read_status(str(d), APP) == StatusDoc.from_json(running)
    assert _on_disk(d) == running


def test_read_status_of_a_dead_supervisor_records_failed(tmp_path: Path) -> None:
    d = _app(tmp_path, status=_status(sup_pid=999999))
    before = time.time()
    status = _state.read_status(str(d), APP)
    assert status is not None
    assert status.state == "FAILED"
    assert status.msg == (
        "the local supervisor (pid 999999) died before the app finished;"
        f" see {os.path.join(str(d), 'supervisor.log')}"
    )
    assert status.ended >= before
    assert [r.to_json() for r in status.roles] == [
        {"name": "r", "states": "UUS", "pids": [0, 0, 0]}
    ]
    assert _on_disk(d) == status.to_json()


def test_read_status_of_a_supervisor_dead_before_its_pid_says_it_did_not_start(
    tmp_path: Path,
) -> None:
    d = _app(tmp_path, status=_status(state="PENDING", sup_pid=0))
    status = _state.read_status(str(d), APP)
    assert status is not None and status.state == "FAILED"
    assert status.msg == (
        "the app failed to start: its supervisor died (or its launcher was killed) before"
        f" running it; see {os.path.join(str(d), 'supervisor.log')}"
    )


def test_read_status_of_a_dead_supervisor_collects_its_target_for_the_caller(
    tmp_path: Path,
) -> None:
    d = _app(tmp_path, status=_status(sup_pid=999999))
    instance = (d / MARKER_FILE).read_text().split("\n")[1]
    dead: list[tuple[str, str | None]] = []
    status = _state.read_status(str(d), APP, dead=dead)
    assert dead == [(APP, instance)]
    assert status is not None and status.state == "FAILED"


def test_read_status_of_a_copy_kills_nothing_and_says_so(tmp_path: Path) -> None:
    d = _app(tmp_path, marker=f"{APP}\n1-2-abcdef\n", status=_status(sup_pid=999999))
    dead: list[tuple[str, str | None]] = []
    status = _state.read_status(str(d), APP, dead=dead)
    assert dead == []
    assert status is not None and status.state == "FAILED"
    assert status.msg == (
        f"{d} is a copy of an app directory made elsewhere (another root, a restored"
        " backup); it has no supervisor here, and the original's processes are left alone"
    )
    assert _on_disk(d)["state"] == "FAILED"


def test_read_status_of_an_unwritable_app_dir_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _app(tmp_path, status=_status(sup_pid=31337))
    written = (d / STATUS_FILE).read_text()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, m: False if p == str(d) else real_access(p, m)
    )  # root may write anywhere: a read-only app directory is simulated
    (d / STATUS_FILE).chmod(0o400)
    dead: list[tuple[str, str | None]] = []
    status = _state.read_status(str(d), APP, dead=dead)
    assert status is not None and status.state == "UNKNOWN"
    assert status.msg == (
        "the app's outcome is unknown: its supervisor (pid 31337) ended without recording it,"
        f" and {d} is not writable (read-only filesystem or permissions); its replicas' logs"
        " may tell"
    )
    assert len(dead) == 1
    assert (d / STATUS_FILE).read_text() != written  # root still wrote it (best effort)


def test_read_status_prefers_the_final_status_kept_in_the_lock(tmp_path: Path) -> None:
    final = _status(state="SUCCEEDED", ended=3.0, msg="")
    d = _app(tmp_path, status=_status(sup_pid=999999), lock="999999\n" + json.dumps(final))
    dead: list[tuple[str, str | None]] = []
    status = _state.read_status(str(d), APP, dead=dead)
    assert status is not None and status.state == "SUCCEEDED" and dead == []
    assert status.msg == (
        f"succeeded (kept in {LOCK_FILE}: the supervisor could not write {STATUS_FILE} in {d})"
    )
    final["msg"] = "replica r/0 exited with code 1"
    final["state"] = "FAILED"
    (d / LOCK_FILE).write_text("999999\n" + json.dumps(final))
    status = _state.read_status(str(d), APP)
    assert status is not None and status.msg.startswith("replica r/0 exited with code 1 (kept")
    assert _on_disk(d)["state"] == "RUNNING"  # nothing rewritten


def test_read_status_of_a_stopped_supervisor_marks_it_stale(
    tmp_path: Path, hold_lock: Any, stopped_pid: int
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    roles = [
        {"name": "a", "states": "RRS", "pids": [gone.pid, os.getpid(), 0]},
        {"name": "b", "states": "P", "pids": [0]},
    ]
    d = _app(tmp_path, status=_status(sup_pid=stopped_pid, roles=roles))
    hold_lock(d)
    status = _state.read_status(str(d), APP)
    assert status is not None
    assert status.state == "RUNNING"  # a replica still runs, one is pending
    assert [r.states for r in status.roles] == ["URS", "P"]
    assert status.msg == (
        f"the local supervisor (pid {stopped_pid}) is stopped (SIGSTOP or a debugger), so this"
        " status is stale: 1 replica(s) it shows running have exited;"
        f" `kill -CONT {stopped_pid}` resumes it, `torchx cancel` stops the app"
    )
    assert _on_disk(d)["roles"] == roles  # nothing written


def test_a_stopped_supervisor_with_nothing_left_running_is_unknown(
    stopped_pid: int,
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    status = _status(
        sup_pid=stopped_pid, roles=[{"name": "a", "states": "RS", "pids": [gone.pid, 0]}]
    )
    out = _state._unless_stopped(StatusDoc.from_json(status))
    assert out.state == "UNKNOWN" and out.roles[0].states == "US"
    no_pids = _status(sup_pid=stopped_pid, roles=[{"name": "a", "states": "SF"}])
    out = _state._unless_stopped(StatusDoc.from_json(no_pids))
    assert out.state == "UNKNOWN"
    assert out.msg == (
        f"the local supervisor (pid {stopped_pid}) is stopped (SIGSTOP or a debugger), so this"
        f" status is stale; `kill -CONT {stopped_pid}` resumes it, `torchx cancel` stops the app"
    )


def test_a_running_or_unknown_supervisor_leaves_the_status_alone() -> None:
    for sup_pid in (os.getpid(), 0, None):
        status = _status(sup_pid=sup_pid)
        assert _state._unless_stopped(StatusDoc.from_json(status)) == StatusDoc.from_json(status)
    missing = _status()
    del missing["sup_pid"]
    assert _state._unless_stopped(StatusDoc.from_json(missing)) == StatusDoc.from_json(missing)


def test_a_stopped_supervisor_keeps_pending_replicas_and_live_ones(stopped_pid: int) -> None:
    status = _status(
        sup_pid=stopped_pid, roles=[{"name": "a", "states": "PR", "pids": [0, os.getpid()]}]
    )
    out = _state._unless_stopped(StatusDoc.from_json(status))
    assert out.state == "RUNNING" and out.roles[0].states == "PR"
    assert "stale;" in out.msg  # no replica exited: no count
    pending_only = _status(sup_pid=stopped_pid, roles=[{"name": "a", "states": "P", "pids": [0]}])
    assert _state._unless_stopped(StatusDoc.from_json(pending_only)).state == "RUNNING"


# -- garbage collection ------------------------------------------------------------------------


def _finished(ended: float | None) -> dict[str, Any]:
    return _status(state="SUCCEEDED", ended=ended, roles=[])


def _age(path: Path, seconds: float, now: float) -> None:
    os.utime(path, (now - seconds, now - seconds), follow_symlinks=False)


def test_collectable_needs_ownership_an_end_and_the_ttl(tmp_path: Path) -> None:
    now = 1_000_000.0
    cases = {
        "old-bcdfghjk": (_finished(now - 2 * DAY), True),
        "young-bcdfghjk": (_finished(now - 10.0), False),
        "edge-bcdfghjk": (_finished(now - DAY), False),  # exactly the ttl: kept
        "noend-bcdfghjk": (_finished(None), False),
        "zero-bcdfghjk": (_finished(0), False),
        "run-bcdfghjk": (_status(ended=now - 2 * DAY), False),
        "fail-bcdfghjk": (_status(state="FAILED", ended=now - 2 * DAY), True),
    }
    for app_id, (status, expected) in cases.items():
        d = _app(tmp_path, app_id, status=status)
        assert _state._collectable(app_id, str(d), DAY, now) is expected, app_id
    foreign = _app(tmp_path, "foreign-bcdfghjk", marker=None, status=_finished(now - 2 * DAY))
    assert _state._collectable("foreign-bcdfghjk", str(foreign), DAY, now) is False


def test_collectable_of_an_unreadable_status_goes_by_the_marker_age(
    tmp_path: Path, hold_lock: Any
) -> None:
    now = time.time()
    corrupt = _app(tmp_path, "bad-bcdfghjk")
    (corrupt / STATUS_FILE).write_text("{garbled")
    _age(corrupt / MARKER_FILE, 2 * DAY, now)
    assert _state._collectable("bad-bcdfghjk", str(corrupt), DAY, now) is True
    assert _state._collectable("bad-bcdfghjk", str(corrupt), 3 * DAY, now) is False
    _age(corrupt / MARKER_FILE, DAY, now)
    assert _state._collectable("bad-bcdfghjk", str(corrupt), DAY, now) is False  # exactly ttl
    missing = _app(tmp_path, "nostatus-bcdfghjk")
    _age(missing / MARKER_FILE, 2 * DAY, now)
    assert _state._collectable("nostatus-bcdfghjk", str(missing), DAY, now) is True
    hold_lock(missing)  # its supervisor lives: kept whatever the age
    assert _state._collectable("nostatus-bcdfghjk", str(missing), DAY, now) is False


def test_collectable_of_a_marker_that_vanishes_is_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _app(tmp_path)
    monkeypatch.setattr(_state, "is_owned", lambda app_dir, app_id: True)
    (d / MARKER_FILE).unlink()  # removed between the ownership check and the age
    assert _state._collectable(APP, str(d), 0.0, time.time() + DAY) is False


def test_collect_garbage_removes_old_finished_apps_only(tmp_path: Path) -> None:
    now = time.time()
    old = _app(tmp_path, "old-bcdfghjk", status=_finished(now - 2 * DAY))
    young = _app(tmp_path, "young-bcdfghjk", status=_finished(now - 10))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (tmp_path / ".hidden-bcdfghjk").mkdir()
    assert _state.collect_garbage(str(tmp_path), DAY, now) == ["old-bcdfghjk"]
    assert not old.exists() and young.exists() and foreign.exists()
    assert (tmp_path / ".hidden-bcdfghjk").exists()
    assert _state.collect_garbage(str(tmp_path), DAY, now + 2 * DAY) == ["young-bcdfghjk"]
    assert _state.collect_garbage(str(tmp_path / "missing"), DAY, now) == []


def test_collect_garbage_keeps_apps_whose_removal_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    _app(tmp_path, "old-bcdfghjk", status=_finished(now - 2 * DAY))
    monkeypatch.setattr(_state, "remove_app_dir", lambda *a, **k: ["it failed"])
    assert _state.collect_garbage(str(tmp_path), DAY, now) == []


def test_collect_garbage_keeps_the_log_dir_target_of_a_link(tmp_path: Path) -> None:
    now = time.time()
    root = tmp_path / "root"
    root.mkdir()
    target = _app(tmp_path / "logs", "old-bcdfghjk", status=_finished(now - 2 * DAY))
    (root / "old-bcdfghjk").symlink_to(target)
    assert _state.collect_garbage(str(root), DAY, now) == ["old-bcdfghjk"]
    assert not (root / "old-bcdfghjk").is_symlink() and target.exists()


def test_collect_garbage_removes_interrupted_creations_and_removals(
    tmp_path: Path, hold_lock: Any
) -> None:
    now = time.time()
    made = _app(tmp_path, f"{_state.CREATING}new1-bcdfghjk", marker="new1-bcdfghjk\n")
    alive = _app(tmp_path, f"{_state.CREATING}new2-bcdfghjk", marker="new2-bcdfghjk\n")
    hold_lock(alive)  # its creator still runs
    foreign_new = tmp_path / f"{_state.CREATING}new3-bcdfghjk"
    foreign_new.mkdir()
    (foreign_new / "data").write_text("x")
    _age(foreign_new, 120, now)
    begun = tmp_path / f"{_state.CREATING}new4-bcdfghjk"
    begun.mkdir()
    (begun / LOCK_FILE).write_text("")
    (begun / MARKER_FILE).write_text("")
    _age(begun, 120, now)
    just_now = tmp_path / f"{_state.CREATING}new5-bcdfghjk"
    just_now.mkdir()
    (just_now / LOCK_FILE).write_text("")
    _age(just_now, 30, now)
    deleting = _app(tmp_path, f"{_state.DELETING}del1-bcdfghjk.12.34", marker="del1-bcdfghjk\n")
    deleting_other = _app(
        tmp_path, f"{_state.DELETING}del2-bcdfghjk.12.34", marker="someone-else\n"
    )
    other_hidden = _app(tmp_path, ".other-bcdfghjk", marker="other-bcdfghjk\n")
    assert _state.collect_garbage(str(tmp_path), DAY, now) == []
    assert not made.exists() and not begun.exists() and not deleting.exists()
    assert alive.exists() and foreign_new.exists() and just_now.exists()
    assert deleting_other.exists() and other_hidden.exists()


def test_collect_garbage_removes_old_name_locks_and_staged_workspaces(tmp_path: Path) -> None:
    now = time.time()
    names = tmp_path / _state.NAMES
    names.mkdir()
    for name, age in (("old", 2 * DAY), ("young", 10.0), ("edge", DAY)):
        (names / name).write_text("")
        _age(names / name, age, now)
    (names / "link").symlink_to(tmp_path / "elsewhere")
    _age(names / "link", 2 * DAY, now)
    staging = tmp_path / _state.STAGING
    staging.mkdir()
    for name, age in (("ws-old", 2 * DAY), ("ws-young", 10.0), ("other-old", 2 * DAY)):
        (staging / name).mkdir()
        (staging / name / "f").write_text("")
        _age(staging / name, age, now)
    kept = tmp_path / "kept"
    kept.mkdir()
    (staging / "ws-link").symlink_to(kept)
    _age(staging / "ws-link", 2 * DAY, now)
    (staging / ".ws-hidden").mkdir()
    _age(staging / ".ws-hidden", 2 * DAY, now)
    assert _state.collect_garbage(str(tmp_path), DAY, now) == []
    assert sorted(os.listdir(names)) == ["edge", "link", "young"]
    assert sorted(os.listdir(staging)) == [".ws-hidden", "other-old", "ws-link", "ws-young"]
    assert kept.exists()


def test_collect_garbage_follows_no_symlinked_names_or_staging(tmp_path: Path) -> None:
    now = time.time()
    root = tmp_path / "root"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ws-old").mkdir()
    (elsewhere / "old").write_text("")
    for p in (elsewhere / "ws-old", elsewhere / "old"):
        _age(p, 2 * DAY, now)
    (root / _state.NAMES).symlink_to(elsewhere)
    (root / _state.STAGING).symlink_to(elsewhere)
    assert _state.collect_garbage(str(root), DAY, now) == []
    assert sorted(os.listdir(elsewhere)) == ["old", "ws-old"]


def test_collect_garbage_defaults_to_the_current_time(tmp_path: Path) -> None:
    _app(tmp_path, "old-bcdfghjk", status=_finished(time.time() - 2 * DAY))
    _app(tmp_path, "young-bcdfghjk", status=_finished(time.time() - 10))
    assert _state.collect_garbage(str(tmp_path), DAY) == ["old-bcdfghjk"]


# -- edges: another app id than the directory's, zombies, sizes, failed removals -----------------


def test_read_status_names_the_app_it_was_asked_for(tmp_path: Path) -> None:
    d = _app(tmp_path, "dir-bcdfghjk", marker=f"{APP}\n")  # a log_dir app: dir named otherwise
    with pytest.raises(_state.CorruptAppStateError, match=f"^app {APP}: its status file"):
        _state.read_status(str(d), APP)


def test_read_status_of_a_finished_app_ignores_a_stopped_lock_holder(
    tmp_path: Path, hold_lock: Any, stopped_pid: int
) -> None:
    done = _status(state="SUCCEEDED", ended=2.0, sup_pid=stopped_pid)
    done["roles"] = [{"name": "r", "states": "S", "pids": [0]}]
    d = _app(tmp_path, status=done)
    hold_lock(d)  # the supervisor wrote its final status and has not exited yet
    assert _state.read_status(str(d), APP) == StatusDoc.from_json(done)
    creating = _app(tmp_path, "new-bcdfghjk", marker=None)  # no status yet, lock held
    hold_lock(creating)
    assert _state.read_status(str(creating), "new-bcdfghjk") is None


def test_a_stopped_supervisor_counts_zombies_and_missing_pids_as_exited(stopped_pid: int) -> None:
    zombie = subprocess.Popen(["true"])  # not reaped until the end: a zombie
    try:
        deadline = time.monotonic() + 10
        while _state.process_state(zombie.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.005)
        status = _status(
            sup_pid=stopped_pid,
            roles=[
                {"name": "a", "states": "RR", "pids": [zombie.pid, os.getpid()]},
                {"name": "b", "states": "R"},  # no pids: nothing to look at, counted as exited
            ],
        )
        out = _state._unless_stopped(StatusDoc.from_json(status))
    finally:
        zombie.wait()
    assert [r.states for r in out.roles] == ["UR", "U"]
    assert ": 2 replica(s) it shows running have exited;" in out.msg
    assert out.state == "RUNNING"


def _lock_with_final(path: Path, size: int) -> dict[str, Any]:
    """A lock file of exactly ``size`` bytes: pid line, then a final status padded by its msg."""
    final = _status(state="FAILED", ended=5.0, msg="")
    head = b"123\n"
    base = len(head) + len(json.dumps(final).encode())
    final["msg"] = "x" * (size - base)
    path.write_bytes(head + json.dumps(final).encode())
    assert path.stat().st_size == size
    return final


def test_final_from_lock_reads_at_most_the_largest_status_plus_a_pid_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_state, "MAX_STATUS_BYTES", 4096)  # the limit, scaled down from 64 MiB
    lock = tmp_path / LOCK_FILE
    limit = 4096 + 64
    final = _lock_with_final(lock, limit)  # the largest that fits: read whole
    assert _state.final_from_lock(str(tmp_path)) == StatusDoc.from_json(final)
    _lock_with_final(lock, limit + 1)  # one byte more: cut, so not valid JSON
    assert _state.final_from_lock(str(tmp_path)) is None


def test_collect_garbage_reads_the_app_id_of_a_removal_with_dots(tmp_path: Path) -> None:
    app_id = "my.dotted.app-bcdfghjk"
    hidden = _app(tmp_path, f"{_state.DELETING}{app_id}.12.34", marker=f"{app_id}\n")
    assert _state.collect_garbage(str(tmp_path), DAY) == []
    assert not hidden.exists()


def test_collect_garbage_goes_on_past_leftovers_it_cannot_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = float(int(time.time()))
    stuck_new = _app(tmp_path, f"{_state.CREATING}new1-bcdfghjk", marker="new1-bcdfghjk\n")
    staging = tmp_path / _state.STAGING
    (staging / "ws-old" / "sub").mkdir(parents=True)
    _age(staging / "ws-old", 2 * DAY, now)
    (staging / "ws-edge").mkdir()
    _age(staging / "ws-edge", DAY, now)  # exactly the ttl: kept
    real_rmdir = os.rmdir

    def rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(os.fspath(path)) in (stuck_new.name, "ws-old"):
            raise PermissionError(1, "Operation not permitted", os.fspath(path))
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir)  # root removes anything: a stuck directory simulated
    assert _state.collect_garbage(str(tmp_path), DAY, now) == []
    assert stuck_new.exists() and (staging / "ws-old").exists()
    assert sorted(os.listdir(staging)) == ["ws-edge", "ws-old"]


def test_a_reader_that_cannot_record_the_correction_still_answers(tmp_path: Path) -> None:
    d = _app(tmp_path, status=_status(sup_pid=999999))
    (d / f"{STATUS_FILE}.{os.getpid()}.tmp").mkdir()  # the atomic write's temporary file fails
    status = _state.read_status(str(d), APP)
    assert status is not None and status.state == "FAILED"
    assert _on_disk(d)["state"] == "RUNNING"  # not recorded, and no error
