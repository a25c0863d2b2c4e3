"""Helpers for the KFP adapter's real-run tests (processes, waiting)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from torchx_core import specs

MOTO_URL = f"http://127.0.0.1:{os.environ.get('MOTO_PORT', '5055')}"
AWS_TEST_ENV = {
    "AWS_ENDPOINT_URL": MOTO_URL,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}
"""What a launcher step needs to reach the moto server (boto3 reads AWS_ENDPOINT_URL)."""


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls ``predicate()`` until true; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def read_pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in directory.glob("*.pid") if p.read_text().strip()]


def _holds_file_under(pid: str, root: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(root + os.sep):
                return True
        except OSError:
            continue
    return False


def _has_env(pid: str, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:
        return False


def processes_of(root: Path, env_entry: str) -> list[int]:
    """Live processes (other than this one) tied to a local-scheduler root.

    A process counts if it holds a file under ``root`` open (a replica writing its log, a
    supervisor holding its lock, however it was started) or carries ``env_entry`` in its
    environment (a replica, a kfp.local step process, anything started by them).
    """
    prefix, entry, me = str(root), env_entry.encode(), os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        if (_holds_file_under(name, prefix) or _has_env(name, entry)) and pid_alive(int(name)):
            found.append(int(name))
    return found


def processes_in_session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (a launched pipeline and its kfp.local steps)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields after the command: state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def step_wrappers(sid: int) -> list[int]:
    """The processes kfp.local started for its steps in session ``sid`` (children of the
    session leader, the pipeline): KFP's ``sh -ec`` wrapper, or the step itself once the
    wrapper ``exec``-ed it."""
    found = []
    for pid in processes_in_session(sid):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ppid == sid and (b"-ec" in cmdline or b"kfp.dsl.executor_main" in cmdline):
            found.append(pid)
    return found


def step_processes(sid: int) -> list[int]:
    """The kfp.local step processes (``kfp.dsl.executor_main``) of session ``sid``."""
    found = []
    for pid in processes_in_session(sid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kfp.dsl.executor_main" in cmdline:
            found.append(pid)
    return found


def python_app(name: str, out_dir: Path, code: str) -> specs.AppDef:
    """One replica running ``python -c code out_dir`` on the local scheduler."""
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                "worker",
                image=str(out_dir),
                entrypoint=sys.executable,
                args=["-c", code, str(out_dir)],
            )
        ],
    )


def batch_app(name: str, message: str) -> specs.AppDef:
    """One busybox container (moto's Batch runs it on the local dockerd) echoing ``message``."""
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                "worker",
                image="busybox:latest",
                entrypoint="sh",
                args=["-c", f"echo {message}"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
