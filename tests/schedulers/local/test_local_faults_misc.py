"""Fault injection, smaller faults of the local scheduler's state: each injected for real.

A symlinked ``.staging`` (and ``.names``) is never followed by GC; a deeply nested ``app.json``
is a typed error; a lone surrogate in an argument or environment value is refused at submit; a
root made read-only under a running app keeps the app's real outcome; ``cancel``/``status``
with a handle from another root name the root searched and exit non-zero.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_helpers import wait_until

from torchx_core.schedulers.api import AppValidationError
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import APP_FILE
from torchx_core.schedulers.local.scheduler import CorruptAppStateError, LocalScheduler
from torchx_core.specs import AppDef, AppState, Role
from torchx_core.specs.errors import TorchXError

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]

OLD = time.time() - 30 * 24 * 3600


@pytest.mark.parametrize("folder", [_state.STAGING, _state.NAMES])
def test_gc_does_not_follow_a_symlinked_staging_or_names_folder(
    local_root: str, tmp_path: Path, folder: str
) -> None:
    outside = tmp_path / "outside"
    (outside / "ws-precious").mkdir(parents=True)
    (outside / "ws-precious" / "data.txt").write_text("keep\n")
    (outside / "0123456789abcdef0123456789abcdef").write_text("keep\n")  # looks like a name lock
    for p in (outside / "ws-precious", outside / "0123456789abcdef0123456789abcdef"):
        os.utime(p, (OLD, OLD))
    Path(local_root).mkdir(parents=True, exist_ok=True)
    (Path(local_root) / folder).symlink_to(outside)
    _state.collect_garbage(local_root, ttl=60)
    assert (outside / "ws-precious" / "data.txt").read_text() == "keep\n"
    assert (outside / "0123456789abcdef0123456789abcdef").exists()


def test_a_deeply_nested_app_json_is_a_typed_error(sched: LocalScheduler, local_root: str) -> None:
    app_id = sched.submit(AppDef("deep", roles=[Role("r", image="", entrypoint="true")]), {})
    assert sched.wait(app_id, timeout=60).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    Path(local_root, app_id, APP_FILE).write_text("[" * 100_000 + "]" * 100_000)
    fresh = LocalScheduler("fresh", root=local_root)
    desc = fresh.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    with pytest.raises(CorruptAppStateError, match=r"nested too deeply.*torchx delete") as info:
        _ = desc.roles
    assert isinstance(info.value, TorchXError)
    assert list(fresh.log_iter(app_id, "r", 0)) == []


@pytest.mark.parametrize(
    "role",
    [
        Role("r", image="", entrypoint="echo", args=["ok", "bad \ud800 arg"]),
        Role("r", image="", entrypoint="echo", env={"V": "bad \udfff value"}),
        Role("r", image="", entrypoint="ech\udc80o"),
    ],
    ids=["arg", "env", "entrypoint"],
)
def test_a_lone_surrogate_is_refused_at_submit_like_nul(
    sched: LocalScheduler, local_root: str, role: Role
) -> None:
    with pytest.raises(AppValidationError, match="lone surrogate"):
        sched.submit(AppDef("surrogate", roles=[role]), {})
    assert list(_state.iter_app_dirs(local_root)) == []  # nothing started


@pytest.fixture
def readonly_later(local_root: str) -> object:
    """Makes the root read-only on demand (a read-only bind mount over it), undone at the end."""
    mounted: list[str] = []

    def make_readonly() -> None:
        subprocess.run(["mount", "--bind", local_root, local_root], check=True)
        mounted.append(local_root)
        subprocess.run(["mount", "-o", "remount,ro,bind", local_root], check=True)

    yield make_readonly
    for path in mounted:
        subprocess.run(["umount", path], check=True)


@pytest.mark.parametrize("code, state", [(0, AppState.SUCCEEDED), (3, AppState.FAILED)])
def test_a_root_made_read_only_under_a_running_app_keeps_its_outcome(
    sched: LocalScheduler, local_root: str, readonly_later: object, code: int, state: AppState
) -> None:
    go = Path(local_root).parent / f"go-{code}"
    role = Role(
        "r",
        image="",
        entrypoint="sh",
        args=["-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit {code}"],
    )
    app_id = sched.submit(AppDef("ro", roles=[role]), {})
    assert wait_until(lambda: sched.describe(app_id).state == AppState.RUNNING, timeout=60)  # type: ignore[union-attr]
    readonly_later()  # type: ignore[operator]
    with pytest.raises(OSError):
        Path(local_root, app_id, "probe").write_text("x")  # really read-only
    go.write_text("go")
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == state, final
    assert "supervisor.lock" in final.msg  # says where the outcome was kept
    if code:
        assert "exited with code 3" in final.msg


def test_cancel_and_status_with_a_handle_from_another_root_name_the_root_and_fail(
    sched: LocalScheduler, local_root: str, tmp_path: Path
) -> None:
    app_id = sched.submit(
        AppDef("elsewhere", roles=[Role("r", image="", entrypoint="sleep", args=["600"])]), {}
    )
    handle = f"local_cwd://test/{app_id}"
    env = dict(os.environ, TORCHX_LOCAL_ROOT=str(tmp_path / "another-root"), NO_COLOR="1")
    for cmd in ("cancel", "status"):
        proc = subprocess.run(
            [sys.executable, "-m", "torchx_core.cli.main", cmd, handle],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 1, (cmd, proc.stderr)
        assert "does not exist" in proc.stderr and str(tmp_path / "another-root") in proc.stderr, (
            proc.stderr
        )
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    sched.cancel(app_id)
