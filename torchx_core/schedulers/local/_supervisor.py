"""The per-app supervisor: starts the replicas, relays their output, reaps them, retries, cancels.

One supervisor runs per app, detached from the process that submitted it (its own session), so
the app outlives the launcher. It is single-threaded and event driven: it blocks in ``epoll``
on a signal wakeup pipe (``SIGCHLD``, ``SIGTERM``) and on the replicas' stdout/stderr pipes;
``SIGCHLD`` wakes it up and it drains every exited child with ``waitid(WNOHANG)``, then writes
the status file once per batch. There is no polling loop per replica.

Each replica is started with ``posix_spawn`` in its own process group (``setpgroup=0``), its
stdout and stderr going to pipes that the supervisor copies into ``<role>/<k>.stdout.log``,
``<k>.stderr.log`` and, line by line, into the combined ``<k>.combined.log``. When a replica's
leader process exits, whatever is left of its process group is killed, so no grandchild
survives its replica.

A full disk does not spread: a replica whose log cannot be written gets a truncation marker and
keeps running (its output is drained and dropped), status writes are retried, and the final one
first frees the space the launcher reserved for it (``status.reserve``). The supervisor records
its pid in the lock file and shows as ``torchx-supervisor <app_id>`` in ``ps``.

Retries follow the role's ``retry_policy`` (``REPLICA``: restart just the failed replica with the
same replica id; ``ROLE``: restart all replicas of the role; ``APPLICATION``: restart every role)
up to ``max_retries``. Cancel (``SIGTERM``/``SIGINT`` to the supervisor) sends ``SIGTERM`` to every
replica process group, ``SIGKILL`` after the grace period, and ends in ``CANCELLED``.

This module imports only the standard library and no other module of the project, so that a
fresh interpreter can load it by path (``python -S``) in a few milliseconds. It also holds the
on-disk layout constants shared with :mod:`._state`.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

#: set in every replica's environment to its app id: how the processes of an app are found
_APP_ID_ENV = "TORCHX_APP_ID"
#: set in every replica's environment to the app's instance (see :func:`new_instance`): a sweep
#: kills only the processes that carry both the app id and the instance of the app directory
_INSTANCE_ENV = "TORCHX_APP_INSTANCE"

# -- on-disk layout (shared with _state) -----------------------------------------------------

STATUS_FILE = "status.json"
APP_FILE = "app.json"
PLAN_FILE = "plan.json"
LOCK_FILE = "supervisor.lock"
SUPERVISOR_LOG = "supervisor.log"
MARKER_FILE = ".torchx-app"  # written first at creation: app id, instance (proof of ownership)
RESERVE_FILE = "status.reserve"  # space set aside so the final status fits on a full disk
RESERVE_BYTES = 64 << 10
SUCCESS_FILE = "SUCCESS"  # TorchX's "logs are complete" file (``log_dir`` layout)
TORCHX_LAYOUT = "torchx"  # <role>/<k>/<stream>.log instead of <role>/<k>.<stream>.log
STREAMS = ("stdout", "stderr", "combined")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
# one character per replica in the status file
STATE_CHARS = {
    "P": "PENDING",
    "R": "RUNNING",
    "S": "SUCCEEDED",
    "F": "FAILED",
    "C": "CANCELLED",
    "U": "UNKNOWN",
}
STDERR_TAIL_LINES = 20
_READ_SIZE = 1 << 16
_DRAIN_SECONDS = 2.0
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
_FINAL_WRITE_SECONDS = 30.0  # how long the final status write is retried on a full disk
_OTHER_ERROR_SECONDS = 2.0  # ... and on another error (a root made read-only or unwritable)
_ERROR_FILE_MAX = 16 << 10  # bytes of a reply file kept in the structured error (fits the reserve)
TRACE = bool(
    os.environ.get("TORCHX_LOCAL_TRACE")
)  # how long to wait for log pipes after the last replica exited


def log_path(app_dir: str, role: str, k: int, stream: str, layout: str | None = None) -> str:
    """Path of replica ``k`` of ``role``'s log for ``stream`` (stdout, stderr or combined).

    ``layout="torchx"`` (apps run with ``log_dir``) gives TorchX's ``<role>/<k>/<stream>.log``.
    """
    if layout == TORCHX_LAYOUT:
        return os.path.join(app_dir, role, str(k), f"{stream}.log")
    return os.path.join(app_dir, role, f"{k}.{stream}.log")


def error_file_path(app_dir: str, role: str, k: int, layout: str | None = None) -> str:
    """Path of the reply (error) file a replica may write (``TORCHELASTIC_ERROR_FILE``)."""
    if layout == TORCHX_LAYOUT:
        return os.path.join(app_dir, role, str(k), "error.json")
    return os.path.join(app_dir, role, f"{k}.error.json")


def write_json_atomic(path: str, obj: Any) -> None:
    """Writes ``obj`` as JSON to ``path`` atomically (temporary file + rename).

    On failure (a full disk) nothing is left behind: the temporary file is removed and ``path``
    keeps its previous content.
    """
    data = json.dumps(obj, separators=(",", ":")).encode()
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def dir_identity(path: str) -> str:
    """``<st_dev>-<st_ino>`` of the directory ``path`` (symlinks followed): a copy differs."""
    st = os.stat(path)
    return f"{st.st_dev:x}-{st.st_ino:x}"


def new_instance(app_dir: str) -> str:
    """The instance of a new app directory: its identity plus a random nonce.

    Kept in the marker and in every replica's environment. A copy of the directory (``cp -a``,
    a restored backup, an rsync of the root) carries the same marker but has another identity,
    so a sweep started from the copy knows that the processes are not its own.
    """
    return f"{dir_identity(app_dir)}-{os.urandom(6).hex()}"


def instance_is_here(instance: str, app_dir: str) -> bool:
    """Whether ``instance`` (read from the marker in ``app_dir``) was made for ``app_dir``."""
    try:
        return instance.rsplit("-", 1)[0] == dir_identity(app_dir)
    except OSError:
        return False


def inherited_env(environ: Any, drop: Iterable[str]) -> dict[str, str]:
    """What replicas inherit: ``environ`` (the supervisor's own, i.e. the launcher's) less
    ``drop``, names or prefixes ending in ``*``."""
    names = {d for d in drop if not d.endswith("*")}
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    if not names and not prefixes:
        return dict(environ)
    return {k: v for k, v in environ.items() if k not in names and not k.startswith(prefixes)}


def signal_name(signum: int) -> str:
    """``9`` -> ``"SIGKILL"`` (``"signal 42"`` for numbers without a name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# -- the supervisor ------------------------------------------------------------------------


class _Role:
    __slots__ = (
        "argv",
        "cwd",
        "entrypoint",
        "env",
        "exe",
        "idx",
        "max_retries",
        "name",
        "policy",
        "replica_argv",
        "replica_env",
        "restarts",
        "slots",
    )  # fmt: skip

    def __init__(
        self, idx: int, spec: dict[str, Any], base_env: dict[str, str], instance: str = ""
    ) -> None:
        self.idx = idx
        self.name: str = spec["name"]
        self.cwd: str = spec["cwd"]
        self.entrypoint: str = spec["entrypoint"]
        self.argv: list[str] = spec["argv"]
        self.replica_argv: dict[str, list[str]] = spec.get("replica_argv") or {}
        env = dict(base_env)
        env.update(spec["env"])
        before, after = spec.get("path") or ("", "")
        path = os.pathsep.join(p for p in (before, base_env.get("PATH"), after) if p)
        if path or "PATH" in base_env:
            env["PATH"] = path
        if instance:
            env[_INSTANCE_ENV] = instance
        self.env = env
        self.replica_env: list[dict[str, str]] = spec["replica_env"]
        self.max_retries: int = spec["max_retries"]
        self.policy: str = spec["retry_policy"]
        self.restarts = 0
        self.exe: str | None = None
        self.slots = [_Slot(self, k) for k in range(spec["num_replicas"])]

    def resolve_exe(self) -> str:
        """Finds the entrypoint like ``execvpe`` would, with the replica's PATH and cwd."""
        ep = self.entrypoint
        if "/" in ep:
            path = os.path.join(self.cwd, ep)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path
            raise FileNotFoundError(
                f"entrypoint `{ep}` not found or not executable (cwd {self.cwd})"
            )
        for d in self.env.get("PATH", os.defpath).split(os.pathsep):
            path = os.path.join(self.cwd, d or ".", ep)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path
        raise FileNotFoundError(
            f"entrypoint `{ep}` not found on PATH={self.env.get('PATH', '')!r} (cwd {self.cwd})"
        )


class _Slot:
    """One replica position (role, k); survives restarts of the process behind it."""

    __slots__ = (
        "exitcode", "files", "k", "last_pid", "nfds", "partial", "pid", "restarts", "role", "state",
        "stopping", "truncated",
    )  # fmt: skip

    def __init__(self, role: _Role, k: int) -> None:
        self.role = role
        self.k = k
        self.pid = 0
        self.last_pid = 0
        self.exitcode: int | None = None
        self.state = "P"
        self.restarts = 0
        self.stopping = False
        self.files: list[int] = [-1, -1, -1]  # stdout, stderr, combined (opened lazily)
        self.partial = [b"", b""]  # incomplete last line per stream, for the combined log
        self.nfds = 0  # open output pipes
        self.truncated = False  # a log write failed (full disk): output is drained, not kept


class Supervisor:
    """Runs one app described by ``plan`` (see ``LocalScheduler.schedule``) in ``app_dir``."""

    def __init__(self, plan: dict[str, Any], app_dir: str, lock_fd: int = -1) -> None:
        import select

        self.lock_fd = lock_fd
        self.plan = plan
        self.app_dir = app_dir
        self.grace: float = float(plan.get("grace", 5.0))
        self.layout: str | None = plan.get("layout")
        base_env = inherited_env(os.environ, plan.get("env_drop") or ())
        instance = plan.get("instance") or ""
        self.roles = [_Role(i, r, base_env, instance) for i, r in enumerate(plan["roles"])]
        self.procs: dict[int, _Slot] = {}
        self.pipes: dict[int, tuple[_Slot, int]] = {}
        self.ep = select.epoll()
        self._epollin = select.EPOLLIN
        self.state = "PENDING"
        self.num_restarts = 0
        self.app_restarts = 0
        self.msg = ""
        self.failure: tuple[_Slot, int | None, int | None] | None = None
        self.cancelling = False
        self.kill_deadline: float | None = None
        self.barriers: list[list[_Slot]] = []
        self.created = time.time()
        self.dirty = True
        self.cwd = ""
        self.wake_r = -1
        self.retry_at: float | None = None  # when to retry a status write that hit a full disk

    # -- status file -------------------------------------------------------------------------

    def write_status(self, ended: float | None = None) -> bool:
        """Writes the status file; False if it cannot (full disk, read-only or unwritable
        directory: retried later, see below).

        A write that hits a full disk is retried: the next ones on the next loop turn (at most
        every second); the final one (``ended``) first frees the space the launcher reserved for
        it, then retries for up to 30 s, and as a last resort drops the structured error.
        """
        status = self._status(ended)
        path = os.path.join(self.app_dir, STATUS_FILE)
        deadline = time.monotonic() + (_FINAL_WRITE_SECONDS if ended else 0.0)
        delay = 0.05
        while True:
            try:
                write_json_atomic(path, status)
                self.dirty = False
                self.retry_at = None
                return True
            except OSError as e:
                if e.errno not in _FULL_DISK:  # read-only or unwritable: retrying helps little
                    deadline = (
                        min(deadline, time.monotonic() + _OTHER_ERROR_SECONDS)
                        if ended
                        else deadline
                    )
                err = e
            if ended and release_reserve(self.app_dir):
                continue
            if time.monotonic() >= deadline:
                if ended and status["structured_error_msg"] != "<NONE>":
                    status["structured_error_msg"] = "<NONE>"
                    continue
                break
            time.sleep(delay)
            delay = min(2 * delay, 1.0)
        _note(f"could not write the status file: {err}")
        self.dirty = True
        self.retry_at = time.monotonic() + 1.0
        return False

    def _status(self, ended: float | None) -> dict[str, Any]:
        plan = self.plan
        status: dict[str, Any] = {
            "v": 1,
            "app_id": plan["app_id"],
            "name": plan["name"],
            "state": self.state,
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self._structured_error()
            if ended and self.failure
            else "<NONE>",
            "sup_pid": os.getpid(),
            "created": self.created,
            "updated": time.time(),
            "ended": ended,
            "failed": [self.failure[0].role.idx, self.failure[0].k] if self.failure else None,
            "roles": [
                {
                    "name": r.name,
                    "states": "".join(s.state for s in r.slots),
                    "pids": [s.pid for s in r.slots],
                }
                for r in self.roles
            ],
        }
        if self.layout:
            status["layout"] = self.layout
        return status

    def _structured_error(self) -> str:
        assert self.failure is not None
        slot, code, sig = self.failure
        role = slot.role
        err: dict[str, Any] = {
            "message": self.msg,
            "role": role.name,
            "replica_id": slot.k,
            "exit_code": code,
            "signal": signal_name(sig) if sig else None,
            "stderr_tail": _tail(log_path(self.app_dir, role.name, slot.k, "stderr", self.layout)),
            "error_file": None,
        }
        err_file = slot.role.replica_env[slot.k].get("TORCHELASTIC_ERROR_FILE") or ""
        try:
            with open(err_file, encoding="utf-8", errors="replace") as f:
                text = f.read(_ERROR_FILE_MAX)
            try:
                err["error_file"] = json.loads(text)
            except ValueError:
                err["error_file"] = text
        except OSError:
            pass
        return json.dumps(err)

    # -- spawning -----------------------------------------------------------------------------

    def spawn(self, slot: _Slot) -> None:
        role = slot.role
        if self.cwd != role.cwd:
            os.chdir(role.cwd)
            self.cwd = role.cwd
        if role.exe is None:
            role.exe = role.resolve_exe()
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        env = role.env
        extra = role.replica_env[slot.k]
        if extra:
            env = dict(env)
            env.update(extra)
        argv = role.replica_argv.get(str(slot.k), role.argv)
        spawned = False
        try:
            pid = os.posix_spawn(
                role.exe,
                argv,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, w_out, 1),
                    (os.POSIX_SPAWN_DUP2, w_err, 2),
                ],
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGHUP),  # ignored here
            )
            spawned = True
        finally:
            os.close(w_out)
            os.close(w_err)
            if not spawned:
                os.close(r_out)
                os.close(r_err)
        for fd, stream in ((r_out, 0), (r_err, 1)):
            os.set_blocking(fd, False)
            self.pipes[fd] = (slot, stream)
            self.ep.register(fd, self._epollin)
        slot.nfds = 2
        slot.pid = slot.last_pid = pid
        slot.state = "R"
        self.procs[pid] = slot
        self.dirty = True

    def spawn_all(self, slots: list[_Slot]) -> None:
        """Starts ``slots``; handles events every few spawns.

        Each spawn copies the supervisor's fd table into the child, so handling the exits (and
        closing the pipes) of replicas that already ended keeps spawning a large app linear.
        """
        for i, slot in enumerate(slots):
            if self.failure or self.cancelling:
                if slot.state == "P":
                    slot.state = "C"  # the app is going down: never started
                continue
            try:
                self.spawn(slot)
            except OSError as e:
                slot.state = "F"
                if self.failure is None:
                    self.msg = f"replica {slot.role.name}/{slot.k} could not start: {e}"
                    self.failure = (slot, 127, None)
                    self.barriers.clear()
                    self.stop(self.alive_slots())
                continue
            if i & 7 == 7:
                self.pump(0.0)

    # -- stopping -----------------------------------------------------------------------------

    def alive_slots(self) -> list[_Slot]:
        return list(self.procs.values())

    def stop(self, slots: list[_Slot]) -> None:
        """SIGTERM each slot's process group; SIGKILL follows after the grace period."""
        for slot in slots:
            if slot.pid and not slot.stopping:
                slot.stopping = True
                _killpg(slot.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        if self.kill_deadline is None or deadline < self.kill_deadline:
            self.kill_deadline = deadline

    def kill_stragglers(self) -> None:
        self.kill_deadline = None
        for slot in self.procs.values():
            if slot.stopping:
                _killpg(slot.pid, signal.SIGKILL)

    def cancel(self) -> None:
        if self.cancelling:
            return
        self.cancelling = True
        self.barriers.clear()
        self.stop(self.alive_slots())
        for role in self.roles:
            for slot in role.slots:
                if slot.pid == 0 and slot.state in "PR":
                    slot.state = "C"
        self.dirty = True

    # -- reaping ------------------------------------------------------------------------------

    def reap(self) -> None:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, flags)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            # the leader is a zombie: its group id cannot be reused yet; kill what is left of it
            _killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            slot = self.procs.pop(pid, None)
            if slot is None:
                continue
            if info.si_code == os.CLD_EXITED:
                self.on_exit(slot, info.si_status, None)
            else:
                self.on_exit(slot, None, info.si_status)

    def on_exit(self, slot: _Slot, code: int | None, sig: int | None) -> None:
        slot.pid = 0
        slot.exitcode = code if sig is None else -sig
        self.dirty = True
        if slot.stopping:
            slot.stopping = False
            slot.state = "C" if (self.cancelling or self.failure) else "P"
            return
        if code == 0:
            slot.state = "S"
            return
        slot.state = "F"
        if self.cancelling or self.failure:
            return
        role = slot.role
        what = f"exited with code {code}" if sig is None else f"killed by {signal_name(sig)}"
        msg = f"replica {role.name}/{slot.k} {what}"
        if role.policy == "REPLICA" and slot.restarts < role.max_retries:
            slot.restarts += 1
            self.restart([slot], msg)
        elif role.policy == "ROLE" and role.restarts < role.max_retries:
            role.restarts += 1
            self.restart(role.slots, msg)
        elif role.policy not in ("REPLICA", "ROLE") and self.app_restarts < role.max_retries:
            self.app_restarts += 1
            self.restart([s for r in self.roles for s in r.slots], msg)
        else:
            if self.num_restarts:
                msg += f" (after {self.num_restarts} restart(s))"
            self.msg = msg
            self.failure = (slot, code, sig)
            self.barriers.clear()
            self.stop(self.alive_slots())

    def restart(self, slots: list[_Slot], reason: str) -> None:
        self.num_restarts += 1
        self.msg = f"restarting after: {reason}"
        _note(f"{reason}; restart {self.num_restarts}")
        for slot in slots:
            if not slot.pid:
                slot.state = "P"
        self.stop([s for s in slots if s.pid])
        self.barriers.append(slots)

    def run_barriers(self) -> None:
        if not self.barriers or self.cancelling or self.failure:
            return
        ready = [b for b in self.barriers if all(s.pid == 0 for s in b)]
        if not ready:
            return
        self.barriers = [b for b in self.barriers if b not in ready]
        for group in ready:
            self.spawn_all(group)

    # -- log relay ----------------------------------------------------------------------------

    def relay(self, fd: int) -> None:
        slot, stream = self.pipes[fd]
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return
        if not data:
            self.close_pipe(fd)
            return
        if slot.truncated:
            return  # drained so that the replica never blocks on a full pipe
        try:
            self._write_logs(slot, stream, data)
        except OSError as e:
            self._truncate_logs(slot, e)

    def _write_logs(self, slot: _Slot, stream: int, data: bytes) -> None:
        files = slot.files
        if files[stream] < 0:
            self._open_logs(slot)
        _write_all(files[stream], data)
        buf = slot.partial[stream] + data if slot.partial[stream] else data
        cut = buf.rfind(b"\n") + 1
        if cut:
            _write_all(files[2], buf[:cut] if cut < len(buf) else buf)
            slot.partial[stream] = buf[cut:]
        elif len(buf) > _READ_SIZE:
            _write_all(files[2], buf)
            slot.partial[stream] = b""
        else:
            slot.partial[stream] = buf

    def _truncate_logs(self, slot: _Slot, err: OSError) -> None:
        """A log write failed (full disk): end the replica's logs with a marker, keep it running.

        The marker replaces the logs' last partial page when there is no room left for it.
        """
        slot.truncated = True
        slot.partial = [b"", b""]
        what = f"{slot.role.name}/{slot.k}"
        _note(f"replica {what}: logs truncated ({err.strerror}); the replica keeps running")
        marker = (
            f"\n[torchx: log truncated here: {err.strerror}; the replica kept running]\n".encode()
        )
        for fd in slot.files:
            if fd < 0:
                continue
            try:
                os.write(fd, marker)
            except OSError:
                try:
                    size = os.fstat(fd).st_size
                    os.ftruncate(fd, max(0, (size - len(marker)) // 4096 * 4096))
                    os.write(fd, marker)
                except OSError:
                    pass

    def _open_logs(self, slot: _Slot) -> None:
        role = slot.role.name
        os.makedirs(
            os.path.dirname(log_path(self.app_dir, role, slot.k, "stdout", self.layout)),
            0o700,
            exist_ok=True,
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        for i, stream in enumerate(STREAMS):
            if slot.files[i] < 0:
                path = log_path(self.app_dir, role, slot.k, stream, self.layout)
                slot.files[i] = os.open(path, flags, 0o600)

    def close_pipe(self, fd: int) -> None:
        slot, stream = self.pipes.pop(fd)
        self.ep.unregister(fd)
        os.close(fd)
        rest = slot.partial[stream]
        if rest and not slot.truncated:
            try:
                _write_all(slot.files[2], rest)
            except OSError as e:
                self._truncate_logs(slot, e)
        slot.partial[stream] = b""
        slot.nfds -= 1

    def close_files(self) -> None:
        for fd in list(self.pipes):
            self.close_pipe(fd)
        for role in self.roles:
            for slot in role.slots:
                for fd in slot.files:
                    if fd >= 0:
                        os.close(fd)
                slot.files = [-1, -1, -1]

    # -- main loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Runs the app to its end. The caller holds the app's lock (see :func:`run_detached`)."""
        wake_r, wake_w = os.pipe()
        self.wake_r = wake_r
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _noop)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _record_pid(self.lock_fd)  # from now on a SIGTERM cancels the app
        self.ep.register(wake_r, self._epollin)
        self.write_status()  # now with our pid: cancel can signal us
        _raise_nofile_limit(2 * sum(len(r.slots) for r in self.roles) + 64)

        self.state = "RUNNING"
        t0 = time.perf_counter()
        self.spawn_all([s for r in self.roles for s in r.slots])
        t1 = time.perf_counter()
        self.write_status()
        set_process_title(f"torchx-supervisor {self.plan['app_id']}")
        drain_deadline: float | None = None
        while True:
            # check before blocking: every replica may already have ended while spawning
            if self.kill_deadline is not None and time.monotonic() >= self.kill_deadline:
                self.kill_stragglers()
            self.run_barriers()
            if not self.procs and not self.barriers:
                if drain_deadline is None:
                    drain_deadline = time.monotonic() + _DRAIN_SECONDS
                if not self.pipes or time.monotonic() >= drain_deadline:
                    break
            elif self.dirty and (self.retry_at is None or time.monotonic() >= self.retry_at):
                self.write_status()
            deadlines = [
                d for d in (self.kill_deadline, drain_deadline, self.retry_at) if d is not None
            ]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else -1.0
            self.pump(timeout)
        t2 = time.perf_counter()
        # processes that left their replica's group (setsid, daemons) end with the app too
        kill_app_processes(self.plan["app_id"], self.plan.get("instance"))
        self.close_files()
        if TRACE:
            import resource

            ru = resource.getrusage(resource.RUSAGE_SELF)
            rc = resource.getrusage(resource.RUSAGE_CHILDREN)
            _note(
                f"spawned {sum(len(r.slots) for r in self.roles)} in {t1 - t0:.4f}s, all done"
                f" {t2 - t0:.4f}s; cpu self {ru.ru_utime:.3f}u {ru.ru_stime:.3f}s,"
                f" children {rc.ru_utime:.3f}u {rc.ru_stime:.3f}s"
            )
        if self.cancelling:
            self.state = "CANCELLED"
            if not self.failure:
                self.msg = "cancelled"
        elif self.failure:
            self.state = "FAILED"
        else:
            self.state = "SUCCEEDED"
            self.msg = ""
        ended = time.time()
        if not self.write_status(ended=ended):
            # the app directory cannot take a new file (made read-only or unwritable under the
            # app): the outcome goes into the lock file, open since the start, for the readers
            _record_final(self.lock_fd, self._status(ended))
        if self.layout == TORCHX_LAYOUT:
            self.write_success_file(ended)
        release_reserve(self.app_dir)
        return 0

    def write_success_file(self, ended: float) -> None:
        """TorchX's ``SUCCESS`` file: the logs are complete (written whatever the final state)."""
        roles = {
            r.name: [
                {
                    "replica_id": s.k,
                    "pid": s.last_pid,
                    "exitcode": s.exitcode,
                    "stdout": log_path(self.app_dir, r.name, s.k, "stdout", self.layout),
                    "stderr": log_path(self.app_dir, r.name, s.k, "stderr", self.layout),
                    "error_file": error_file_path(self.app_dir, r.name, s.k, self.layout),
                }
                for s in r.slots
            ]
            for r in self.roles
        }
        info = {
            "app_id": self.plan["app_id"],
            "log_dir": self.app_dir,
            "final_state": self.state,
            "last_updated": ended,
            "roles": roles,
        }
        try:
            write_json_atomic(os.path.join(self.app_dir, SUCCESS_FILE), info)
        except OSError as e:
            _note(f"could not write {SUCCESS_FILE}: {e}")

    def pump(self, timeout: float) -> None:
        """Waits up to ``timeout`` seconds (-1: forever) for events, then handles them all."""
        try:
            events = self.ep.poll(timeout)
        except InterruptedError:
            events = []
        chld = False
        for fd, _ in events:
            if fd == self.wake_r:
                chld |= self._read_signals(fd)
            else:
                self.relay(fd)
        if chld or not events:
            self.reap()

    def _read_signals(self, fd: int) -> bool:
        chld = False
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return False
        for signum in data:
            if signum == signal.SIGCHLD:
                chld = True
            elif signum in (signal.SIGTERM, signal.SIGINT):
                self.cancel()
        return chld


# -- helpers ----------------------------------------------------------------------------------


def _noop(signum: int, frame: object) -> None:
    """Python-level handler; the real work happens when the wakeup fd is read."""


def _read_proc_file(path: str) -> bytes | None:
    """The bytes of a ``/proc`` file (raw ``os.read``: no file objects), None if unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def kill_app_processes(app_id: str, instance: str | None) -> int:
    """SIGKILLs every other process whose environment carries the app's id and instance.

    Every replica gets ``TORCHX_APP_ID=<app_id>`` and ``TORCHX_APP_INSTANCE=<instance>`` and
    leads its own process group, so this finds the replicas of an app whatever its supervisor
    managed to record (it may have died while spawning them), their children, and descendants
    that left the group (``setsid``, daemons). A process found that leads its group has its
    whole group killed. ``instance`` None: an app made before instances existed, matched by id
    alone. Returns how many processes were found.
    """
    return kill_apps_processes([(app_id, instance)])


def kill_apps_processes(apps: Iterable[tuple[str, str | None]]) -> int:
    """:func:`kill_app_processes` for several ``(app_id, instance)`` in one scan of ``/proc``."""
    wanted: dict[bytes, bytes | None] = {
        f"{_APP_ID_ENV}={a}".encode(): None if i is None else f"{_INSTANCE_ENV}={i}".encode()
        for a, i in apps
    }
    if not wanted:
        return 0
    prefix = next(iter(wanted)) if len(wanted) == 1 else f"{_APP_ID_ENV}=".encode()
    me = os.getpid()
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        env = _read_proc_file(f"/proc/{name}/environ")
        # the substring test rejects almost every process without splitting its environment
        # (5x faster on a full machine: this scan runs before an app's final status)
        if env is None or prefix not in env:
            continue
        items = set(env.split(b"\0"))
        if any(m in items and (i is None or i in items) for m, i in wanted.items()):
            pid = int(name)
            found += 1
            killpg_or_kill(pid)
    return found


def killpg_or_kill(pid: int) -> None:
    """SIGKILLs ``pid`` and, if it leads one (a supervisor does), its process group."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def release_reserve(app_dir: str) -> bool:
    """Removes the app's reserved space (see ``RESERVE_FILE``); True if there was one."""
    try:
        os.unlink(os.path.join(app_dir, RESERVE_FILE))
        return True
    except OSError:
        return False


def set_process_title(title: str) -> None:
    """Shows ``title`` in ``ps``/``top`` (as ``setproctitle`` does, without a dependency).

    Sets the thread name (``comm``, 15 bytes) and rewrites the process's original argv area
    (``/proc/self/cmdline``) in place through ``/proc/self/mem``; a title longer than that area
    is cut. Best effort: failures are ignored.
    """
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(title[:15])
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        data = title.encode()[: end - start - 1]
        fd = os.open("/proc/self/mem", os.O_WRONLY)
        try:
            os.pwrite(fd, data + b"\0" * (end - start - len(data)), start)
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _note(text: str) -> None:
    try:
        os.write(2, f"{time.strftime('%H:%M:%S')} supervisor: {text}\n".encode())
    except OSError:
        pass


def _tail(path: str, n: int = STDERR_TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-n:]


def _raise_nofile_limit(needed: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def _reset_process_state() -> None:
    """Makes a forked (or spawned) process a clean daemon: default signals, stdio to the log."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.alarm(0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGQUIT):  # fmt: skip
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass


def _redirect_stdio(app_dir: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(
        os.path.join(app_dir, SUPERVISOR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def _fail_startup(app_dir: str, plan: dict[str, Any] | None, err: BaseException) -> None:
    """Records a supervisor crash in the status file (so the app is not stuck RUNNING)."""
    import traceback

    text = "".join(traceback.format_exception(err))
    _note(f"crashed:\n{text}")
    try:
        status = {
            "v": 1,
            "app_id": (plan or {}).get("app_id", os.path.basename(app_dir)),
            "name": (plan or {}).get("name", ""),
            "state": "FAILED",
            "num_restarts": 0,
            "msg": f"local supervisor crashed: {err!r} (see {SUPERVISOR_LOG})",
            "structured_error_msg": "<NONE>",
            "sup_pid": os.getpid(),
            "created": time.time(),
            "updated": time.time(),
            "ended": time.time(),
            "failed": None,
            "roles": [],
        }
        path = os.path.join(app_dir, STATUS_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
            status["roles"] = old.get("roles", [])
            status["created"] = old.get("created", status["created"])
            if old.get("layout"):
                status["layout"] = old["layout"]
        except (OSError, ValueError):
            pass
        write_json_atomic(path, status)
    except OSError:
        pass


def _record_pid(lock_fd: int) -> None:
    """Writes our pid into the lock file: cancel finds us even if the status file is unreadable."""
    try:
        if lock_fd >= 0:
            os.pwrite(lock_fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass


def _record_final(lock_fd: int, status: dict[str, Any]) -> None:
    """Writes the final ``status`` after the pid line of the lock file (see :func:`_record_pid`)."""
    try:
        if lock_fd >= 0:
            data = f"{os.getpid()}\n{json.dumps(status, separators=(',', ':'))}\n".encode()
            os.pwrite(lock_fd, data, 0)
            _note("the status file could not be written: the final status is in the lock file")
    except OSError as e:
        _note(f"could not record the final status anywhere: {e}")


def pending_status(plan: dict[str, Any]) -> dict[str, Any]:
    """The status the launcher writes before the supervisor runs (``PENDING``, no pid yet)."""
    now = time.time()
    status = {
        "v": 1,
        "app_id": plan["app_id"],
        "name": plan["name"],
        "state": "PENDING",
        "num_restarts": 0,
        "msg": "",
        "structured_error_msg": "<NONE>",
        "sup_pid": 0,
        "created": now,
        "updated": now,
        "ended": None,
        "failed": None,
        "roles": [
            {"name": r["name"], "states": "P" * r["num_replicas"], "pids": [0] * r["num_replicas"]}
            for r in plan["roles"]
        ],
    }
    if plan.get("layout"):
        status["layout"] = plan["layout"]
    return status


def run_detached(plan: dict[str, Any] | None, app_dir: str, lock_fd: int) -> int:
    """Entry point once detached: cleans up the process, runs the app, returns an exit code.

    ``lock_fd`` is the app's lock file, locked (``flock``) by the launcher before the status
    file existed and inherited by this process; as long as it is open here, the supervisor
    counts as alive (see ``_state.supervisor_alive``).
    """
    import gc

    gc.disable()  # short-lived and allocation-light; also keeps a forked host's finalizers away
    try:
        os.closerange(3, lock_fd)
        os.closerange(lock_fd + 1, 1 << 20)
        os.set_inheritable(lock_fd, False)  # replicas must not hold the lock
        _redirect_stdio(app_dir)
        _reset_process_state()
        if plan is None:
            with open(os.path.join(app_dir, PLAN_FILE), encoding="utf-8") as f:
                plan = json.load(f)
        sup = Supervisor(plan, app_dir, lock_fd)
    except BaseException as e:  # noqa: BLE001 - anything here must end up in the status file
        _fail_startup(app_dir, plan, e)
        return 1
    try:
        return sup.run()
    except BaseException as e:  # noqa: BLE001
        for slot in list(sup.procs.values()):
            _killpg(slot.pid, signal.SIGKILL)
        _fail_startup(app_dir, plan, e)
        return 1


def main_spawned(argv: list[str] | None = None) -> None:
    """Entry point of ``python -S <this file> APP_DIR LOCK_FD`` (a fresh interpreter).

    The launcher started us with ``setsid``; fork once more so that our parent exits at once
    (the launcher reaps it) and the supervisor is re-parented (fully detached).
    """
    args = sys.argv[1:] if argv is None else argv
    app_dir, lock_fd = args[0], int(args[1])
    if os.fork() != 0:
        os._exit(0)
    os._exit(run_detached(None, app_dir, lock_fd))


if __name__ == "__main__":
    main_spawned()
