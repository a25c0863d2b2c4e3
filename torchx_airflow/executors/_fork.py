"""The executor's warm fork server (:mod:`torchx_airflow._fork_server`): started on the first
app on a local scheduler, stopped with the executor.

Its lifeline is its standard input, a pipe from this process: when the scheduler stops or is
killed, the server exits (the tasks it forked run on). Its socket is in a private directory
(0700, ``tempfile.mkdtemp``); an app reaches it through ``task_entry.SERVER_ENV``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time

from torchx_airflow._fork_server import SOCKET_NAME

__all__ = ["LOCAL_SCHEDULERS", "ForkServer"]

logger: logging.Logger = logging.getLogger(__name__)

#: the schedulers whose apps run on this host (where the server's socket is)
LOCAL_SCHEDULERS = frozenset({"local", "local_cwd"})


class ForkServer:
    """One warm fork server process and its private directory.

    Args:
        python: the interpreter the apps run with (the server must be the same)
    """

    def __init__(self, python: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="torchx-airflow-fork-")
        self.path = os.path.join(self.directory, SOCKET_NAME)
        self._proc = subprocess.Popen(
            [python, "-m", "torchx_airflow._fork_server", self.directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the scheduler's terminal is not its own
        )
        self.started = time.monotonic()
        logger.info("warm fork server started (pid %d, %s)", self._proc.pid, self.path)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        """Whether the server process still runs (an app that finds it dead starts cold)."""
        return self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """How the server ended (a negative signal number when killed); None while it runs."""
        return self._proc.poll()

    def stop(self, timeout: float = 10.0) -> None:
        """Closes its lifeline and waits for it (killed after ``timeout``); removes its
        directory. The tasks it forked run on."""
        with contextlib.suppress(OSError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
