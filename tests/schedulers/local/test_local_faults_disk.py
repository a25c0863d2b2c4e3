"""Fault injection, group "full disk": one chatty app fills the root's filesystem.

The root is a 2 MiB tmpfs the test mounts (CI runs as root). The chatty app's logs end with a
truncation marker while it keeps running; every app ends in the state its replicas earned (the
neighbours, with no output, SUCCEED); a new submit is a typed error naming the root and the free
space; nothing half-written is left.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchx_core.schedulers.local._create import LocalDiskError
from torchx_core.schedulers.local._layout import MARKER_FILE, STATUS_FILE
from torchx_core.schedulers.local.scheduler import LocalScheduler, create_scheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(300)]


@pytest.fixture
def small_fs(tmp_path: Path, local_root: str) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for this test (unmounted after it)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mnt)], check=True
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _sh(name: str, script: str) -> AppDef:
    return AppDef(name, roles=[Role("r", image="", entrypoint="sh", args=["-c", script])])


def test_a_full_disk_does_not_spread(small_fs: Path, tmp_path: Path) -> None:
    root = str(small_fs / "root")
    sched: LocalScheduler = create_scheduler("disk", root=root)
    flag = tmp_path / "go"  # outside the small filesystem
    quiet = f"while [ ! -e {flag} ]; do sleep 0.05; done"
    neighbours = [sched.submit(_sh("quiet", quiet), {}) for _ in range(3)]
    # ~8 MB of output into a 2 MiB filesystem, then a clean exit
    chatty = sched.submit(_sh("chatty", "yes torchx | head -c 8000000; echo bye >&2"), {})

    desc = sched.wait(chatty, timeout=120)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc  # what its replica earned
    with pytest.raises(LocalDiskError, match=rf"{root}.* \d+ bytes free"):
        sched.submit(_sh("late", "true"), {})
    stdout = b"".join(
        Path(root, chatty, "r", "0.stdout.log").read_bytes().splitlines(keepends=True)[-2:]
    )
    assert b"[torchx: log truncated here: No space left on device" in stdout, stdout[-300:]

    flag.touch()
    for app_id in neighbours:
        desc = sched.wait(app_id, timeout=120)
        assert desc is not None and desc.state == AppState.SUCCEEDED, desc

    # nothing half-written: no temporary file, no hidden half-created app, every app complete
    leftovers = [str(p) for p in Path(root).rglob("*.tmp")]
    leftovers += [str(p) for p in Path(root).glob(".new-*")]
    assert not leftovers
    for app_id in [*neighbours, chatty]:
        assert Path(root, app_id, MARKER_FILE).exists() and Path(root, app_id, STATUS_FILE).exists()
    assert sorted(a.app_id for a in sched.list()) == sorted([*neighbours, chatty])
    # and the root works again once space is freed
    sched.delete(chatty)
    app_id = sched.submit(_sh("after", "echo ok"), {})
    desc = sched.wait(app_id, timeout=120)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "r", 0)) == ["ok\n"]


def _remount_read_only(mnt: Path, timeout: float = 120.0) -> None:
    """Remounts ``mnt`` read-only, retrying while the kernel says "mount point is busy": a
    process may still hold a file open for writing there (the supervisor of an app that just
    ended exits a moment after writing its final status; a loaded machine stretches that)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        proc = subprocess.run(
            ["mount", "-o", "remount,ro", str(mnt)], capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            return
        busy = "busy" in proc.stderr
        if not busy or time.monotonic() > deadline:
            raise AssertionError(f"cannot remount {mnt} read-only: {proc.stderr.strip()}")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def test_remount_read_only_waits_while_a_writer_holds_the_mount(small_fs: Path) -> None:
    """The fault behind the flaky run: a file open for writing makes the remount busy; the
    helper waits until the writer is gone instead of failing."""
    code = (
        f"import sys, time; f = open({str(small_fs / 'w')!r}, 'w'); sys.stdout.write('open\\n');"
        " sys.stdout.flush(); time.sleep(1); f.close()"
    )
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        _remount_read_only(small_fs)
        assert writer.wait(timeout=60) == 0  # the remount went through only after it closed
        with pytest.raises(OSError):
            (small_fs / "x").write_text("x")
    finally:
        writer.kill()
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)


def test_read_only_root_is_a_typed_error_and_delete_reports_failure(small_fs: Path) -> None:
    root = str(small_fs / "root")
    sched: LocalScheduler = create_scheduler("ro", root=root)
    app_id = sched.submit(_sh("done", "true"), {})
    assert sched.wait(app_id, timeout=120).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    _remount_read_only(small_fs)
    try:
        with pytest.raises(LocalDiskError, match=rf"{root} is on a read-only filesystem"):
            sched.submit(_sh("late", "true"), {})
        with pytest.raises(Exception, match=r"not .*deleted.*Read-only file system") as err:
            sched.delete(app_id)
        from torchx_core.specs.errors import TorchXError

        assert isinstance(err.value, TorchXError)
        assert os.path.isdir(os.path.join(root, app_id))
        # `torchx delete` says what could not be removed and exits non-zero
        out = subprocess.run(
            [sys.executable, "-m", "torchx_core.cli.main", "delete", f"local_cwd://ro/{app_id}"],
            env={**os.environ, "TORCHX_LOCAL_ROOT": root}, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert out.returncode != 0, out
        assert "not (fully) deleted" in out.stderr and "Read-only file system" in out.stderr, (
            out.stderr
        )
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
