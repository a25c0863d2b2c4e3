"""The warm fork server: forks Airflow tasks from an interpreter that has imported the Task SDK.

``python -m torchx_airflow._fork_server <directory>`` (started by ``TorchXExecutor`` for its apps
on the local schedulers; the directory is private, 0700) imports what
:mod:`torchx_airflow.task_entry` needs, then listens on ``<directory>/fork.sock`` (created whole:
bound under another name, then renamed). It runs until its standard input (a pipe from the
executor) closes or its parent is gone: a stopped or killed scheduler takes its server with
it, while the tasks it forked run on (their apps are adopted as any other).

For each app's client (:mod:`torchx_airflow._fork_client`) it receives the argv, environment,
working directory and stdio of ``task_entry``, and forks. The child starts its own session (so
a signal to the session reaches the Airflow supervisor and the task runner, which the Task SDK
puts in a process group of its own), takes the
client's stdio, directory and environment, answers ``ok <pid>`` and runs ``task_entry.main``
as the app would have; a thread relays the client's signals (``sig <n>``) to its session,
and kills the session when the connection closes before the task ended (the client was killed).
The exit code goes back as ``exit <code>``.

The server declines (``cold <reason>``, the client then starts a fresh interpreter) a client
whose interpreter (``sys.prefix``) or Airflow/Python environment differs from its own: what was
read at import time would be wrong for it. The Execution API URL and the token are per task and
read when the task runs.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import selectors
import socket
import struct
import sys
import threading
from typing import Any

#: the socket's file name in the server's directory
SOCKET_NAME = "fork.sock"
#: variables that may differ between the server and a task (read when the task runs)
_PER_TASK = frozenset({"AIRFLOW__CORE__EXECUTION_API_SERVER_URL"})
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 64 << 20


#: what the task runner imports after the fork to parse a DAG file and run its task (each
#: about 0.2 s of CPU per task otherwise, the most of a forked task's start): alternatives for
#: the Airflow releases that moved a module, the first found is imported
_TASK_RUNNER_MODULES = (
    ("airflow.dag_processing.dagbag", "airflow.models.dagbag"),
    ("airflow.dag_processing.bundles.local",),  # the dags-folder bundle
    ("airflow.sdk.definitions.connection",),
    ("airflow.version",),
    ("airflow.serialization.serialized_objects",),
    ("airflow.sdk.definitions.decorators",),
    ("airflow.providers.standard.operators.python",),  # the @task and PythonOperator
    ("airflow.providers.standard.decorators.python",),
)


def warm() -> None:
    """Imports what ``task_entry`` and the Task SDK's supervisor and task runner import."""
    from airflow.executors import workloads
    from airflow.executors.base_executor import BaseExecutor  # noqa: F401
    from airflow.sdk.crypto import get_fernet  # noqa: F401
    from airflow.sdk.execution_time import supervisor, task_runner  # noqa: F401
    from airflow.sdk.execution_time.coordinator import get_coordinator_manager  # noqa: F401
    from airflow.sdk.execution_time.execute_workload import execute_workload  # noqa: F401
    from airflow.sdk.log import configure_logging  # noqa: F401
    from pydantic import TypeAdapter

    TypeAdapter(workloads.All)
    with contextlib.suppress(ImportError):  # set up here: a child clears its environment,
        # after which setproctitle could not find its room (the Task SDK's titles were lost)
        from setproctitle import getproctitle, setproctitle

        setproctitle(getproctitle())
    for alternatives in _TASK_RUNNER_MODULES:
        for name in alternatives:  # the first that this Airflow has
            try:
                importlib.import_module(name)
                break
            except ImportError:
                continue
    with contextlib.suppress(ImportError):  # the names most DAG files import (lazy attributes)
        from airflow.sdk import DAG, task  # noqa: F401
    with contextlib.suppress(Exception):  # an optimisation only: a child would build its own
        # the Execution API client's SSL context (the CA store, ~50 ms of CPU), which the Task
        # SDK caches per process: built here once instead of in every forked supervisor
        from airflow.sdk.api.client import Client

        Client(base_url="http://127.0.0.1", token="").close()


def prepare() -> None:
    """:func:`warm`, then moves the warm heap to the permanent generation (``gc.freeze``, as
    LocalExecutor does before forking its workers): a forked task's collections neither walk
    it (CPU) nor touch its pages (private copies of shared memory)."""
    warm()
    gc.collect()
    gc.freeze()


def declined(env: dict[str, str], prefix: str) -> str:
    """Why a client with ``env`` and interpreter ``prefix`` cannot be forked from this server
    (names only, never values); "" when it can."""
    if os.path.realpath(prefix) != os.path.realpath(sys.prefix):
        return f"another interpreter ({prefix})"
    keys = {k for k in {*env, *os.environ} if _imported_with(k)} - _PER_TASK
    differ = sorted(k for k in keys if env.get(k) != os.environ.get(k))
    return f"environment differs: {', '.join(differ)}" if differ else ""


#: the interpreter's variables read at its start (``sys.path``, site); PYTHONUNBUFFERED is
#: applied by the child (:func:`_stdio`)
_STARTUP = frozenset({"PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
                      "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "VIRTUAL_ENV"})  # fmt: skip


def _imported_with(key: str) -> bool:
    return key.startswith("AIRFLOW") or key in _STARTUP


def _stdio(unbuffered: bool) -> None:
    """Python's stdio over the client's fds 1 and 2 (unbuffered as ``-u`` when asked)."""
    import io

    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "w", closefd=False)
        binary: Any = raw if unbuffered else io.BufferedWriter(raw)  # -u: the raw file
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="backslashreplace",
                                line_buffering=name == "stderr" or unbuffered,
                                write_through=unbuffered)  # fmt: skip
        setattr(sys, name, text)


def serve(directory: str) -> None:
    """Warms up, listens in ``directory`` and forks tasks until standard input closes."""
    prepare()
    path = os.path.join(directory, SOCKET_NAME)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = os.path.join(directory, f".{SOCKET_NAME}.{os.getpid()}")
    listener.bind(tmp)
    os.chmod(tmp, 0o600)
    listener.listen(128)
    os.rename(tmp, path)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(0, selectors.EVENT_READ)
    parent = os.getppid()
    try:
        while os.getppid() == parent:  # a pipe end inherited by a fork of the executor's
            # process may outlive it: its death is what counts
            for key, _ in sel.select(timeout=1.0):
                if key.fd == 0:
                    if not os.read(0, 4096):
                        return  # the executor is gone
                else:
                    with contextlib.suppress(OSError):
                        _accept(listener)
            _reap()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _accept(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(10.0)
        request, fds = _receive(conn)
        env = request.get("env")
        env = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
        why = declined(env, str(request.get("python", "")))
        if why:
            conn.sendall(f"cold {why}\n".encode())
            return
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _child(conn, fds, request)  # never returns
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """The client's request and its three stdio fds."""
    fds: list[int] = []
    data, ancillary, _flags, _addr = conn.recvmsg(_HEADER.size, socket.CMSG_LEN(3 * 4))
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(raw) // 4}i", raw[: len(raw) // 4 * 4]))
    try:
        if len(data) != _HEADER.size or len(fds) != 3:
            raise OSError("a malformed request")
        (length,) = _HEADER.unpack(data)
        if length > _MAX_REQUEST:
            raise OSError("a request too large")
        payload = bytearray()
        while len(payload) < length:
            chunk = conn.recv(length - len(payload))
            if not chunk:
                raise OSError("a truncated request")
            payload += chunk
        request = json.loads(payload)
        if not isinstance(request, dict):
            raise OSError("a malformed request")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


def _child(conn: socket.socket, fds: list[int], request: dict[str, object]) -> None:
    """The forked task: takes the client's place, runs ``task_entry``, reports its exit code."""
    code = 1
    done = threading.Event()
    try:
        os.setsid()
        _title("airflow supervisor: (forked, starting)")  # not the server's title
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        fds.clear()
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})  # type: ignore[call-overload]
        from torchx_airflow import task_entry

        os.environ.pop(task_entry.SERVER_ENV, None)
        _stdio(bool(os.environ.get("PYTHONUNBUFFERED")))
        import random

        random.seed()  # not the server's sequence in every task
        conn.settimeout(None)
        conn.sendall(f"ok {os.getpid()}\n".encode())
        threading.Thread(target=_watch, args=(conn, done), daemon=True).start()
        print(
            f"torchx_airflow: forked from the warm server (pid {os.getppid()}) as pid"
            f" {os.getpid()}",
            file=sys.stderr,
        )
        code = task_entry.main([str(a) for a in request["argv"]])  # type: ignore[attr-defined]
    except BaseException as e:  # noqa: BLE001 - reported, then the child exits
        with contextlib.suppress(BaseException):
            print(f"torchx_airflow: the forked task failed: {e!r}", file=sys.stderr)
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
            done.set()
            conn.sendall(f"exit {code}\n".encode())
        os._exit(code)


def _title(title: str) -> None:
    with contextlib.suppress(ImportError):
        from setproctitle import setproctitle

        setproctitle(title)


def _watch(conn: socket.socket, done: threading.Event) -> None:
    """Relays the client's signals to this task's session; kills the session when the client is
    gone before the task ended."""
    with contextlib.suppress(OSError), conn.makefile("rb") as lines:
        for line in lines:
            word, _, value = line.decode().strip().partition(" ")
            if word == "sig" and value.isdigit():
                _signal_session(int(value))
    if not done.is_set():
        _signal_session(9)


def _signal_session(sig: int) -> None:
    """Sends ``sig`` to every process of this task's session, this one last: the Task SDK puts
    the task runner in a process group of its own (within the session)."""
    me, sid = os.getpid(), os.getsid(0)
    for pid in _session(sid):
        if pid != me:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
    os.kill(me, sig)


def _session(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m torchx_airflow._fork_server <private directory>")
    serve(sys.argv[1])
