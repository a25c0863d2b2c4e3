"""The local scheduler's files: their names, the replica state characters, the status document.

The status document (``status.json``, see :class:`StatusDoc`) is written by the supervisor as its
app runs, by the launcher before it (``PENDING``), by a reader that finds its supervisor dead,
and by a cancel that had to kill it; all of them build it here. On disk it is one JSON object::

    {"v": 1, "app_id": ..., "name": ..., "state": "RUNNING", "num_restarts": 0, "msg": "",
     "structured_error_msg": "<NONE>", "sup_pid": 1234, "created": 1.0, "updated": 2.0,
     "ended": null, "failed": [role index, replica] | null,
     "roles": [{"name": "trainer", "states": "RRS", "pids": [11, 12, 0]}], "layout": "torchx"}

(``layout`` only for ``log_dir`` apps; one state character per replica, see :data:`STATE_CHARS`.)

Standard library only, and no other module of the project: the supervisor, started as a bare
interpreter (``python -S``, see ``_launch``), imports it as a top-level module.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

#: set in every replica's environment to its app id: how the processes of an app are found
APP_ID_ENV = "TORCHX_APP_ID"
#: set in every replica's environment to the app's instance (see :func:`new_instance`): a sweep
#: kills only the processes that carry both the app id and the instance of the app directory
INSTANCE_ENV = "TORCHX_APP_INSTANCE"

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
NO_ERROR = "<NONE>"  # structured_error_msg without an error (TorchX's ``NONE``)
# one character per replica in the status file
STATE_CHARS = {
    "P": "PENDING",
    "R": "RUNNING",
    "S": "SUCCEEDED",
    "F": "FAILED",
    "C": "CANCELLED",
    "U": "UNKNOWN",
}


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


# -- writing ------------------------------------------------------------------------------------


def write_json_atomic(path: str, obj: Any) -> None:
    """Writes ``obj`` as JSON to ``path`` atomically (temporary file + rename), mode 0600.

    On failure (a full disk) nothing is left behind: the temporary file is removed and ``path``
    keeps its previous content.
    """
    data = json.dumps(obj, separators=(",", ":")).encode()
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def release_reserve(app_dir: str) -> bool:
    """Removes the app's reserved space (see ``RESERVE_FILE``); True if there was one."""
    try:
        os.unlink(os.path.join(app_dir, RESERVE_FILE))
        return True
    except OSError:
        return False


# -- the supervisor's own path to its app directory -----------------------------------------------

_FD_PATH = "/proc/self/fd/"


def pin_dir(app_dir: str, lock_fd: int) -> str:
    """A path to the app directory that stays right when it (or the root above it) is moved.

    ``/proc/self/fd/<n>`` of a descriptor of the directory, opened where the supervisor's lock
    file (``lock_fd``) is now and checked to hold that very file; ``app_dir`` as given when
    that fails (no ``/proc``, or the directory is already gone). For this process only: a
    replica is given real paths.
    """
    try:
        lock = os.fstat(lock_fd)
        for _ in range(3):  # a rename between the look-up and the open: look again
            where = os.path.dirname(os.readlink(f"{_FD_PATH}{lock_fd}"))
            fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                st = os.stat(LOCK_FILE, dir_fd=fd)
                if (st.st_dev, st.st_ino) == (lock.st_dev, lock.st_ino):
                    return f"{_FD_PATH}{fd}"
            except OSError:
                pass
            os.close(fd)
    except OSError:
        pass
    return app_dir


def current_dir(path: str, pinned: str) -> str:
    """How the supervisor reaches its app directory now: by ``path`` while that still leads to
    it (through whatever is mounted there, a read-only bind mount included), else by ``pinned``
    (see :func:`pin_dir`): the directory, or the root above it, was renamed."""
    if pinned == path:
        return path
    try:
        a, b = os.stat(path), os.stat(pinned)
        if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
            return path
    except OSError:
        pass
    return pinned


def real_dir(path: str) -> str:
    """Where the directory ``path`` (possibly made by :func:`pin_dir`) is now."""
    if path.startswith(_FD_PATH):
        with contextlib.suppress(OSError):
            return os.readlink(path)
    return path


# -- app directory identity ----------------------------------------------------------------------


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


# -- the status document ---------------------------------------------------------------------------


class RoleStates:
    """One role of a status document: its name, one state character and one pid per replica."""

    __slots__ = ("name", "pids", "states")

    def __init__(self, name: str, states: str, pids: list[int] | None = None) -> None:
        self.name = name
        self.states = states
        self.pids = [0] * len(states) if pids is None else pids

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "states": self.states, "pids": self.pids}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RoleStates) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"RoleStates({self.name!r}, {self.states!r}, {self.pids!r})"


class StatusDoc:
    """The status file's content, typed; :meth:`to_json` gives the exact object on disk."""

    __slots__ = (
        "app_id", "created", "ended", "failed", "layout", "msg", "name", "num_restarts", "roles",
        "state", "structured_error_msg", "sup_pid", "updated",
    )  # fmt: skip

    def __init__(
        self,
        app_id: str,
        name: str,
        state: str,
        roles: list[RoleStates],
        *,
        created: float,
        updated: float | None = None,
        ended: float | None = None,
        num_restarts: int = 0,
        msg: str = "",
        structured_error_msg: str = NO_ERROR,
        sup_pid: int = 0,
        failed: tuple[int, int] | None = None,
        layout: str | None = None,
    ) -> None:
        self.app_id = app_id
        self.name = name
        self.state = state
        self.roles = roles
        self.created = created
        self.updated = created if updated is None else updated
        self.ended = ended
        self.num_restarts = num_restarts
        self.msg = msg
        self.structured_error_msg = structured_error_msg
        self.sup_pid = sup_pid
        self.failed = failed
        self.layout = layout

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``status.json`` (keys in this order, ``layout`` if set)."""
        doc: dict[str, Any] = {
            "v": 1,
            "app_id": self.app_id,
            "name": self.name,
            "state": self.state,
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "sup_pid": self.sup_pid,
            "created": self.created,
            "updated": self.updated,
            "ended": self.ended,
            "failed": None if self.failed is None else list(self.failed),
            "roles": [r.to_json() for r in self.roles],
        }
        if self.layout:
            doc["layout"] = self.layout
        return doc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatusDoc) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable: compared by content, never hashed

    def __repr__(self) -> str:
        return f"StatusDoc({self.to_json()!r})"

    def terminal(self) -> bool:
        """Whether the app has ended (``SUCCEEDED``, ``FAILED`` or ``CANCELLED``)."""
        return self.state in TERMINAL

    @classmethod
    def from_json(cls, doc: dict[str, Any], app_id: str = "") -> StatusDoc:
        """A status read from disk (checked by :func:`check_status`, or trusted as our own);
        the fields an older version did not write take their defaults."""
        failed = doc.get("failed")
        created = doc.get("created") or 0.0
        return cls(
            doc.get("app_id") or app_id,
            doc.get("name") or "",
            doc["state"],
            [RoleStates(r["name"], r["states"], r.get("pids")) for r in doc.get("roles") or ()],
            created=created,
            updated=doc.get("updated") or created,
            ended=doc.get("ended"),
            num_restarts=doc.get("num_restarts") or 0,
            msg=doc.get("msg") or "",
            structured_error_msg=doc.get("structured_error_msg") or NO_ERROR,
            sup_pid=doc.get("sup_pid") or 0,
            failed=None if failed is None else (failed[0], failed[1]),
            layout=doc.get("layout"),
        )


_STATE_NAMES = frozenset(STATE_CHARS.values())
_STATE_CHAR_SET = "".join(STATE_CHARS)

_NONE = type(None)
_TEXT: tuple[type, ...] = (str,)
_INT: tuple[type, ...] = (int,)
_TIME: tuple[type, ...] = (int, float, _NONE)

#: The scalar fields of a status document: name -> (its value when absent, the exact types a
#: writer gives it; ``bool`` is not an ``int``). With ``state``, ``failed`` and the roles
#: (:func:`_role_problem`) it is the one description :func:`status_problem` checks against.
STATUS_FIELDS: dict[str, tuple[object, tuple[type, ...]]] = {
    "app_id": ("", _TEXT),
    "name": ("", _TEXT),
    "num_restarts": (0, _INT),
    "msg": ("", _TEXT),
    "structured_error_msg": ("", _TEXT),
    "sup_pid": (0, _INT),
    "created": (None, _TIME),
    "updated": (None, _TIME),
    "ended": (None, _TIME),
    "layout": (None, (str, _NONE)),
}
_FIELD_CHECKS = tuple((key, absent, types) for key, (absent, types) in STATUS_FIELDS.items())


def check_status(status: Any) -> None:
    """Raises ``ValueError`` naming the first field of a status file that is not as written."""
    problem = status_problem(status)
    if problem is not None:
        raise _invalid(problem)


def status_problem(status: Any) -> str | None:
    """The first field of ``status`` (as read from a status file) that is not as a writer
    writes it, with its value; None when it is a well-formed status document.

    One pass, the same on the common path (a status is read on every ``describe``, in fresh
    processes too) as for the message: the fields are those of :data:`STATUS_FIELDS`.
    """
    if type(status) is not dict:
        return "content: not a JSON object"
    g = status.get
    state = g("state")
    if state not in _STATE_NAMES:
        return f"state {_short(state)}"
    for key, absent, types in _FIELD_CHECKS:
        if type(g(key, absent)) not in types:
            return f"{key} {_short(g(key, absent))}"
    failed = g("failed")
    if failed is not None and not (
        type(failed) is list
        and len(failed) == 2
        and type(failed[0]) is int
        and type(failed[1]) is int
    ):
        return f"failed {_short(failed)}"
    roles = g("roles")
    if type(roles) is not list:
        return f"roles {_short(roles)}"
    for role in roles:
        problem = _role_problem(role)
        if problem is not None:
            return problem
    return None


def _role_problem(role: Any) -> str | None:
    """What is wrong with one role of a status document (None: nothing)."""
    if type(role) is not dict or type(role.get("name")) is not str:
        return f"role {_short(role)}"
    states = role.get("states")
    if type(states) is not str or states.strip(_STATE_CHAR_SET):
        return f"states of role {role['name']!r}: {_short(states)}"
    pids = role.get("pids", None)
    if pids is None:
        return None
    if type(pids) is list and len(pids) == len(states):
        for pid in pids:
            if type(pid) is not int:
                break
        else:
            return None
    return f"pids of role {role['name']!r}: {_short(pids)}"


def _invalid(what: str) -> ValueError:
    return ValueError(f"unexpected {what}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def pending_status(plan: dict[str, Any], now: float) -> StatusDoc:
    """The status the launcher writes before the supervisor runs (``PENDING``, no pid yet)."""
    return StatusDoc(
        plan["app_id"],
        plan["name"],
        "PENDING",
        [RoleStates(r["name"], "P" * r["num_replicas"]) for r in plan["roles"]],
        created=now,
        layout=plan.get("layout"),
    )


def cancelled_status(doc: StatusDoc | None, app_id: str, now: float) -> StatusDoc:
    """``doc`` (a status as read, or None) ended as ``CANCELLED`` without its supervisor's help:
    replicas not finished become ``C``; every other field is kept as it was."""
    if doc is None:
        doc = StatusDoc(app_id, "", "CANCELLED", [], created=now)
    for r in doc.roles:
        r.states = "".join("C" if c in "PRU" else c for c in r.states)
        r.pids = [0] * len(r.states)
    doc.state, doc.msg, doc.ended, doc.updated = "CANCELLED", "cancelled", now, now
    return doc


def write_status(app_dir: str, doc: StatusDoc) -> None:
    """Writes the app's status file atomically (see :func:`write_json_atomic`)."""
    write_json_atomic(os.path.join(app_dir, STATUS_FILE), doc.to_json())
