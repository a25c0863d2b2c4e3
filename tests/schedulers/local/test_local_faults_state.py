"""Fault injection, groups "corrupt state" and "half-created apps".

A garbled status file gives a typed error for that app only, and ``list`` still lists the
others; a launcher killed at any moment while creating an app leaves either a complete app or a
hidden directory that garbage collection removes, never an app ``status`` and ``list`` miss.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from local_helpers import wait_until

from torchx_core.runner import get_runner
from torchx_core.schedulers.api import AppValidationError
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local._layout import STATUS_FILE
from torchx_core.schedulers.local.scheduler import CorruptAppStateError, LocalScheduler
from torchx_core.specs import AppDef, AppState, Role
from torchx_core.specs.errors import TorchXError

TERMINAL_STATES = (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(300)]

GARBLED = {
    "roles is a string": '"roles":"xyz"',
    "role without states": '"roles":[{"name":"r","pids":[0]}]',
    "states is a number": '"roles":[{"name":"r","states":5,"pids":[0]}]',
    "num_restarts is text": '"num_restarts":"x"',
    "created is text": '"created":"yesterday"',
    "state unknown": '"state":"SLEEPING"',
    "pids not a list": '"roles":[{"name":"r","states":"S","pids":"x"}]',
}


def _done(sched: LocalScheduler, name: str) -> str:
    app_id = sched.submit(AppDef(name, roles=[Role("r", image="", entrypoint="true")]), {})
    assert sched.wait(app_id, 60).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    return app_id


def _garble(path: Path, case: str) -> None:
    text = path.read_text()
    if case in GARBLED:  # that field garbled, the rest of the status as written
        data = json.loads(text)
        data.update(json.loads("{" + GARBLED[case] + "}"))
        path.write_text(json.dumps(data))
    elif case == "100000 nested [":
        path.write_text("[" * 100_000)
    elif case == "truncated":
        path.write_text(text[: len(text) // 2])
    elif case == "empty":
        path.write_text("")
    elif case == "binary":
        path.write_bytes(os.urandom(512))
    elif case == "missing":
        path.unlink()
    else:
        raise AssertionError(case)


CASES = [*GARBLED, "100000 nested [", "truncated", "empty", "binary", "missing"]


@pytest.mark.parametrize("case", CASES)
def test_corrupt_status_is_a_typed_error_for_that_app_only(
    sched: LocalScheduler, case: str
) -> None:
    healthy = _done(sched, "healthy")
    broken = _done(sched, "broken")
    _garble(Path(sched.root, broken, STATUS_FILE), case)

    with pytest.raises(CorruptAppStateError, match=broken) as err:
        sched.describe(broken)
    assert isinstance(err.value, TorchXError)
    with pytest.raises(CorruptAppStateError):
        list(sched.log_iter(broken, "r", 0))
    assert sched.describe(healthy).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    listed = {a.app_id: a.state for a in sched.list()}
    assert listed == {healthy: AppState.SUCCEEDED, broken: AppState.UNKNOWN}
    # cancel and delete still work on it
    sched.cancel(broken)
    sched.delete(broken)
    assert sched.describe(broken) is None and not os.path.lexists(os.path.join(sched.root, broken))


def test_corrupt_status_through_the_cli(sched: LocalScheduler, local_root: str) -> None:
    healthy = _done(sched, "healthy")
    broken = _done(sched, "broken")
    _garble(Path(sched.root, broken, STATUS_FILE), "roles is a string")
    env = {**os.environ, _state.ROOT_ENV: local_root}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "torchx_core.cli.main", *args],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    status = cli("status", f"local_cwd://test/{broken}")
    assert (
        status.returncode == 1 and "corrupt" in status.stderr and "Traceback" not in status.stderr
    )
    listed = cli("list", "-s", "local_cwd")
    assert listed.returncode == 0, listed.stderr
    assert healthy in listed.stdout and broken in listed.stdout
    deleted = cli("delete", f"local_cwd://test/{broken}")
    assert deleted.returncode == 0, deleted.stderr
    assert not os.path.lexists(os.path.join(local_root, broken))


LAUNCHER = textwrap.dedent(
    """
    import sys
    from torchx_core.schedulers.local.scheduler import create_scheduler
    from torchx_core.specs import AppDef, Role
    sched = create_scheduler("launcher", root=sys.argv[1])
    app = AppDef("half", roles=[Role("r", image="", entrypoint="true", num_replicas=8)])
    print("ready", flush=True)
    while True:
        sched.submit(app, {})
    """
)


def test_launcher_killed_while_creating_apps_leaves_no_half_app(
    local_root: str, tmp_path: Path
) -> None:
    """20 launchers SIGKILLed at random moments of a submit loop: every app directory in sight
    is complete (its status reads), and the hidden ones of interrupted creations are removed by
    the next garbage collection."""
    import random

    rng = random.Random(7)
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, local_root], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.2))  # fault injection at a random moment
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        proc.stdout.close()
    sched = LocalScheduler("check", root=local_root)
    visible = [name for name in os.listdir(local_root) if not name.startswith(".")]
    assert visible
    for app_id in visible:
        desc = sched.describe(app_id)  # never "unknown" or unreadable
        assert desc is not None, app_id
    assert wait_until(lambda: all(a.state in TERMINAL_STATES for a in sched.list()), timeout=120)
    for app in sched.list():  # a launcher killed before its supervisor ran: failed to start
        desc = sched.describe(app.app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED or "failed to start" in desc.msg, desc
    # one minute later (a creation killed before its marker is recognised by its age)
    _state.collect_garbage(local_root, ttl=3600, now=time.time() + 120)
    left = [n for n in os.listdir(local_root) if n.startswith((".new-", ".del-"))]
    assert not left, {n: os.listdir(os.path.join(local_root, n)) for n in left}


def test_long_names_are_typed_errors_or_shortened(sched: LocalScheduler) -> None:
    with pytest.raises(AppValidationError, match="300 characters"):
        sched.submit_dryrun(AppDef("a", roles=[Role("r" * 300, image="", entrypoint="true")]), {})
    app_id = sched.submit(AppDef("a" * 300, roles=[Role("r", image="", entrypoint="true")]), {})
    assert len(app_id) < 255
    assert sched.wait(app_id, 60).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    with get_runner() as runner:
        assert runner.status(f"local_cwd://test/{'x' * 300}") is None
        assert runner.status(f"local_cwd://test/{'x' * 5000}") is None
