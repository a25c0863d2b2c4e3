"""The app side of the warm start (stdlib only): hands the task to a warm fork server.

``task_entry`` calls :func:`run_forked` first when the app's environment names a server
(``task_entry.SERVER_ENV``, set by ``TorchXExecutor`` for apps on the local schedulers). The client
connects to the server's unix socket (in a 0700 directory), sends its argv, environment and
working directory with its stdin/stdout/stderr (``SCM_RIGHTS``), and waits: the server forks the
task from an interpreter that has already imported Airflow's Task SDK
(:mod:`torchx_airflow._fork_server`). SIGTERM, SIGINT and SIGHUP received by the client are
relayed to the task's process group; the client exits with the task's exit code. If the client
dies (SIGKILL from a cancel), the task sees its connection close and kills its process group.

No server reachable (another host, a server not started or dead) or a server that declines (an
environment it was not warmed with): :func:`run_forked` returns None and ``task_entry`` runs the
task in this process, as without a server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys

#: the signals relayed to the forked task
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: the exit code when the forked task ended without reporting one (killed)
EXIT_LOST = 1
_HEADER = struct.Struct("!I")


def run_forked(argv: list[str], path: str) -> int | None:
    """Runs ``argv`` (task_entry's arguments) forked by the server at ``path``; returns the exit
    code, or None when the server is not reachable or declines (then nothing was started)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        payload = json.dumps(
            {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "python": sys.prefix}
        ).encode()
        fds = [0, 1, 2]
        sock.sendmsg(
            [_HEADER.pack(len(payload))],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))],
        )
        sock.sendall(payload)
        reader = sock.makefile("rb")
        first = reader.readline().decode().split(" ", 1)
    except OSError as e:
        sock.close()
        print(f"torchx_airflow: no warm server ({e}): a fresh interpreter", file=sys.stderr)
        return None
    if first[0] != "ok":
        sock.close()
        why = first[1].strip() if len(first) > 1 else "no answer"
        print(f"torchx_airflow: the warm server declined ({why}): a fresh interpreter",
              file=sys.stderr)  # fmt: skip
        return None
    return _wait(sock, reader)


def _wait(sock: socket.socket, reader: object) -> int:
    """Relays signals to the task until it reports its exit code (or its connection closes)."""

    def relay(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(f"sig {signum}\n".encode())

    for sig in RELAYED:
        signal.signal(sig, relay)
    while True:
        try:
            line = reader.readline()  # type: ignore[attr-defined]
        except OSError:
            line = b""
        if not line:
            print("torchx_airflow: the forked task ended without an exit code", file=sys.stderr)
            return EXIT_LOST
        word, _, value = line.decode().strip().partition(" ")
        if word == "exit":
            return int(value)
