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

This module imports only the standard library and its two stdlib-only siblings ``_layout`` (the
files and the status document) and ``_procs`` (the ``/proc`` sweep, ``killpg``, the process
title), so that a fresh interpreter can load it by path (``python -S``) in a few milliseconds;
run that way, it imports them as top-level modules (``sys.path[0]`` is this directory).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import time
from typing import Any

if __package__:
    from torchx_core.schedulers.local import _layout, _procs
    from torchx_core.schedulers.local._replicas import ReplicaRole, Slot, inherited_env
else:  # run by path (``python -S``, see _launch): the sibling modules are top-level
    import _layout  # type: ignore[no-redef]
    import _procs  # type: ignore[no-redef]
    from _replicas import ReplicaRole, Slot, inherited_env  # type: ignore[no-redef]

STDERR_TAIL_LINES = 20
_READ_SIZE = 1 << 16
_DRAIN_SECONDS = 2.0  # how long to wait for log pipes after the last replica exited
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
_FINAL_WRITE_SECONDS = 30.0  # how long the final status write is retried on a full disk
_OTHER_ERROR_SECONDS = 2.0  # ... and on another error (a root made read-only or unwritable)
_ERROR_FILE_MAX = 16 << 10  # bytes of a reply file kept in the structured error (fits the reserve)
TRACE = bool(os.environ.get("TORCHX_LOCAL_TRACE"))  # timings in supervisor.log


def signal_name(signum: int) -> str:
    """``9`` -> ``"SIGKILL"`` (``"signal 42"`` for numbers without a name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# -- the supervisor ------------------------------------------------------------------------


class Supervisor:
    """Runs one app described by ``plan`` (see ``LocalScheduler.schedule``) in ``app_dir``."""

    def __init__(
        self, plan: dict[str, Any], app_dir: str, lock_fd: int = -1, pinned: str = ""
    ) -> None:
        import select

        self.lock_fd = lock_fd
        self.plan = plan
        self._path = app_dir
        self._pinned = pinned or app_dir  # see _layout.pin_dir
        self.grace: float = float(plan.get("grace", 5.0))
        self.layout: str | None = plan.get("layout")
        base_env = inherited_env(os.environ, plan.get("env_drop") or ())
        instance = plan.get("instance") or ""
        self.roles = [ReplicaRole(i, r, base_env, instance) for i, r in enumerate(plan["roles"])]
        self.procs: dict[int, Slot] = {}
        self.pipes: dict[int, tuple[Slot, int]] = {}
        self.ep = select.epoll()
        self._epollin = select.EPOLLIN
        self.state = "PENDING"
        self.num_restarts = 0
        self.app_restarts = 0
        self.msg = ""
        self.failure: tuple[Slot, int | None, int | None] | None = None
        self.cancelling = False
        self.kill_deadline: float | None = None
        self.barriers: list[list[Slot]] = []
        self.created = time.time()
        self.dirty = True
        self.cwd = ""
        self.wake_r = -1
        self.retry_at: float | None = None  # when to retry a status write that hit a full disk

    @property
    def app_dir(self) -> str:
        """The app directory as reached now (its path, or a descriptor once it was renamed)."""
        return _layout.current_dir(self._path, self._pinned)

    # -- status file -------------------------------------------------------------------------

    def write_status(self, ended: float | None = None) -> bool:
        """Writes the status file; False if it cannot (full disk, read-only or unwritable
        directory: retried later, see below).

        A write that hits a full disk is retried: the next ones on the next loop turn (at most
        every second); the final one (``ended``) first frees the space the launcher reserved for
        it, then retries for up to 30 s, and as a last resort drops the structured error.
        """
        status = self._status(ended)
        path = os.path.join(self.app_dir, _layout.STATUS_FILE)
        deadline = time.monotonic() + (_FINAL_WRITE_SECONDS if ended else 0.0)
        delay = 0.05
        while True:
            try:
                _layout.write_json_atomic(path, status)
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
            if ended and _layout.release_reserve(self.app_dir):
                continue
            if time.monotonic() >= deadline:
                if ended and status["structured_error_msg"] != _layout.NO_ERROR:
                    status["structured_error_msg"] = _layout.NO_ERROR
                    continue
                break
            time.sleep(delay)
            delay = min(2 * delay, 1.0)
        note(f"could not write the status file: {err}")
        self.dirty = True
        self.retry_at = time.monotonic() + 1.0
        return False

    def _status(self, ended: float | None) -> dict[str, Any]:
        failure = self.failure
        return _layout.StatusDoc(
            self.plan["app_id"],
            self.plan["name"],
            self.state,
            [
                _layout.RoleStates(
                    r.name, "".join(s.state for s in r.slots), [s.pid for s in r.slots]
                )
                for r in self.roles
            ],
            created=self.created,
            updated=time.time(),
            ended=ended,
            num_restarts=self.num_restarts,
            msg=self.msg,
            structured_error_msg=(
                self._structured_error() if ended and failure else _layout.NO_ERROR
            ),
            sup_pid=os.getpid(),
            failed=(failure[0].role.idx, failure[0].k) if failure else None,
            layout=self.layout,
        ).to_json()

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
            "stderr_tail": _tail(
                _layout.log_path(self.app_dir, role.name, slot.k, "stderr", self.layout)
            ),
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

    def spawn(self, slot: Slot) -> None:
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

    def spawn_all(self, slots: list[Slot]) -> None:
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

    def alive_slots(self) -> list[Slot]:
        return list(self.procs.values())

    def stop(self, slots: list[Slot]) -> None:
        """SIGTERM each slot's process group; SIGKILL follows after the grace period."""
        for slot in slots:
            if slot.pid and not slot.stopping:
                slot.stopping = True
                _procs.killpg_quietly(slot.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        if self.kill_deadline is None or deadline < self.kill_deadline:
            self.kill_deadline = deadline

    def kill_stragglers(self) -> None:
        self.kill_deadline = None
        for slot in self.procs.values():
            if slot.stopping:
                _procs.killpg_quietly(slot.pid, signal.SIGKILL)

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
            _procs.killpg_quietly(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            slot = self.procs.pop(pid, None)
            if slot is None:
                continue
            if info.si_code == os.CLD_EXITED:
                self.on_exit(slot, info.si_status, None)
            else:
                self.on_exit(slot, None, info.si_status)

    def on_exit(self, slot: Slot, code: int | None, sig: int | None) -> None:
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

    def restart(self, slots: list[Slot], reason: str) -> None:
        self.num_restarts += 1
        self.msg = f"restarting after: {reason}"
        note(f"{reason}; restart {self.num_restarts}")
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

    def _write_logs(self, slot: Slot, stream: int, data: bytes) -> None:
        files = slot.files
        if files[stream] < 0:
            self._open_logs(slot)
        _layout.write_all(files[stream], data)
        buf = slot.partial[stream] + data if slot.partial[stream] else data
        cut = buf.rfind(b"\n") + 1
        if cut:
            _layout.write_all(files[2], buf[:cut] if cut < len(buf) else buf)
            slot.partial[stream] = buf[cut:]
        elif len(buf) > _READ_SIZE:
            _layout.write_all(files[2], buf)
            slot.partial[stream] = b""
        else:
            slot.partial[stream] = buf

    def _truncate_logs(self, slot: Slot, err: OSError) -> None:
        """A log write failed (full disk): end the replica's logs with a marker, keep it running.

        The marker replaces the logs' last partial page when there is no room left for it.
        """
        slot.truncated = True
        slot.partial = [b"", b""]
        what = f"{slot.role.name}/{slot.k}"
        note(f"replica {what}: logs truncated ({err.strerror}); the replica keeps running")
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

    def _open_logs(self, slot: Slot) -> None:
        role = slot.role.name
        os.makedirs(
            os.path.dirname(_layout.log_path(self.app_dir, role, slot.k, "stdout", self.layout)),
            0o700,
            exist_ok=True,
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        for i, stream in enumerate(_layout.STREAMS):
            if slot.files[i] < 0:
                path = _layout.log_path(self.app_dir, role, slot.k, stream, self.layout)
                slot.files[i] = os.open(path, flags, 0o600)

    def close_pipe(self, fd: int) -> None:
        slot, stream = self.pipes.pop(fd)
        self.ep.unregister(fd)
        os.close(fd)
        rest = slot.partial[stream]
        if rest and not slot.truncated:
            try:
                _layout.write_all(slot.files[2], rest)
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
        _procs.set_process_title(f"torchx-supervisor {self.plan['app_id']}")
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
        _procs.kill_app_processes(self.plan["app_id"], self.plan.get("instance"))
        self.close_files()
        if TRACE:
            import resource

            ru = resource.getrusage(resource.RUSAGE_SELF)
            rc = resource.getrusage(resource.RUSAGE_CHILDREN)
            note(
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
        self.record_end(time.time())
        _layout.release_reserve(self.app_dir)
        return 0

    def record_end(self, ended: float) -> None:
        """Writes what the readers of the ended app find: TorchX's ``SUCCESS`` file (apps run
        with ``log_dir``) first, then the final status, so that whoever sees the app ended (a
        ``describe`` or a wait) also finds its ``SUCCESS`` file."""
        if self.layout == _layout.TORCHX_LAYOUT:
            self.write_success_file(ended)
        if not self.write_status(ended=ended):
            # the app directory cannot take a new file (made read-only or unwritable under the
            # app): the outcome goes into the lock file, open since the start, for the readers
            _record_final(self.lock_fd, self._status(ended))

    def write_success_file(self, ended: float) -> None:
        """TorchX's ``SUCCESS`` file: the logs are complete (written whatever the final state)."""
        where = _layout.real_dir(self.app_dir)  # the paths users read, not this process's
        roles = {
            r.name: [
                {
                    "replica_id": s.k,
                    "pid": s.last_pid,
                    "exitcode": s.exitcode,
                    "stdout": _layout.log_path(where, r.name, s.k, "stdout", self.layout),
                    "stderr": _layout.log_path(where, r.name, s.k, "stderr", self.layout),
                    "error_file": _layout.error_file_path(where, r.name, s.k, self.layout),
                }
                for s in r.slots
            ]
            for r in self.roles
        }
        info = {
            "app_id": self.plan["app_id"],
            "log_dir": where,
            "final_state": self.state,
            "last_updated": ended,
            "roles": roles,
        }
        try:
            _layout.write_json_atomic(os.path.join(self.app_dir, _layout.SUCCESS_FILE), info)
        except OSError as e:
            note(f"could not write {_layout.SUCCESS_FILE}: {e}")

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


def note(text: str) -> None:
    """Writes a timestamped line to the supervisor's log (its stderr)."""
    with contextlib.suppress(OSError):
        os.write(2, f"{time.strftime('%H:%M:%S')} supervisor: {text}\n".encode())


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
            note("the status file could not be written: the final status is in the lock file")
    except OSError as e:
        note(f"could not record the final status anywhere: {e}")
