"""The name locks of a local root (``local/_names.py``): exclusive, bounded, and telling.

The unit tests take locks in this process (a second ``open`` of the lock file is a second
``flock`` holder, as another process would be); the integration tests stop (SIGSTOP) or end a
real holder process.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchx_core.schedulers.api import SchedulerError
from torchx_core.schedulers.local import _names
from torchx_core.schedulers.local._names import NameLockError, lock_path, name_lock
from torchx_core.specs.errors import is_permanent_error

NAME = "train-0123456789"


def test_a_second_holder_waits_and_gives_up_naming_the_holder_and_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fails if the lock is made non-exclusive (a shared lock): the second one would get it."""
    root = str(tmp_path)
    caplog.set_level(logging.INFO, logger=_names.__name__)
    with name_lock(root, NAME) as held:
        assert held is True
        with pytest.raises(NameLockError) as err, name_lock(root, NAME, timeout=0):
            pytest.fail("a second holder got the lock")
    path = lock_path(root, NAME)
    assert (err.value.path, err.value.pid) == (path, os.getpid())
    assert f"held by pid {os.getpid()}" in str(err.value) and path in str(err.value)
    assert "retry" in str(err.value)
    assert f"held by pid {os.getpid()}" in caplog.text and path in caplog.text


def test_the_lock_is_free_again_after_its_holder_leaves_and_names_do_not_block_each_other(
    tmp_path: Path,
) -> None:
    root = str(tmp_path)
    with name_lock(root, NAME), name_lock(root, "other-0123456789", timeout=0):
        assert Path(lock_path(root, NAME)).read_text() == f"{os.getpid()}\n"
    with name_lock(root, NAME, timeout=0):
        pass
    assert Path(lock_path(root, NAME)).read_text() == ""  # nobody holds it


def test_the_error_is_a_scheduler_error_that_a_retry_may_fix_and_pickles() -> None:
    err = NameLockError("held", "/r/.names/x", 42)
    assert isinstance(err, SchedulerError) and not is_permanent_error(err)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.path, back.pid) == ("held", "/r/.names/x", 42)


def test_a_waiter_gets_the_lock_once_the_holder_releases_it(tmp_path: Path) -> None:
    root = str(tmp_path)
    holder = name_lock(root, NAME)
    holder.__enter__()
    released: list[bool] = []

    def sleep(_seconds: float) -> None:  # the holder leaves while the waiter waits
        if not released:
            released.append(True)
            holder.__exit__(None, None, None)

    with name_lock(root, NAME, timeout=60, sleep=sleep) as held:
        assert held is True and released == [True]


# -- real holders: stopped, gone ---------------------------------------------------------------

_HOLDER = """
import os, sys, time
from torchx_core.schedulers.local._names import name_lock
with name_lock(sys.argv[1], sys.argv[2]):
    if sys.argv[3] == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        os._exit(0)  # the lock stays held by the forked child
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holders() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test (the holder processes it starts)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _holder(root: str, how: str, pids: list[int]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, root, NAME, how],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pids.append(proc.pid)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.timeout(120)
def test_a_stopped_holder_is_named_with_what_to_do(
    tmp_path: Path, holders: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    root = str(tmp_path)
    proc, line = _holder(root, "hold", holders)
    assert line == "held"
    os.kill(proc.pid, signal.SIGSTOP)
    caplog.set_level(logging.INFO, logger=_names.__name__)
    with pytest.raises(NameLockError) as err, name_lock(root, NAME, timeout=100):
        pytest.fail("got the lock of a stopped holder")
    text = str(err.value)
    assert err.value.pid == proc.pid and err.value.path == lock_path(root, NAME)
    assert "stopped" in text and f"kill -CONT {proc.pid}" in text and lock_path(root, NAME) in text
    assert f"held by pid {proc.pid}" in caplog.text  # logged while waiting
    os.kill(proc.pid, signal.SIGCONT)  # resumed, it still holds the lock: a short wait gives up
    with pytest.raises(NameLockError, match="for more than"), name_lock(root, NAME, timeout=0):
        pass
    proc.kill()
    proc.wait()
    with name_lock(root, NAME, timeout=100) as held:  # ended: the lock went with it
        assert held is True


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.timeout(120)
def test_a_gone_holder_whose_fork_keeps_the_lock_is_named_with_the_fork(
    tmp_path: Path, holders: list[int]
) -> None:
    root = str(tmp_path)
    proc, line = _holder(root, "fork", holders)
    child = int(line)
    holders.append(child)
    proc.wait()
    with pytest.raises(NameLockError) as err, name_lock(root, NAME, timeout=100):
        pytest.fail("got the lock a forked child still holds")
    text = str(err.value)
    assert err.value.pid == proc.pid and "has exited" in text and f"kill {child}" in text
