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


_NUMBER = (int, float)


def check_status(status: Any) -> None:
    """Raises ``ValueError`` naming the first field of a status file that is not as written.

    Straight-line checks on the common path (a status is read on every ``describe``, in fresh
    processes too); the field at fault is looked for only when one fails.
    """
    if type(status) is not dict:
        raise _invalid("content: not a JSON object")
    g = status.get
    roles = g("roles")
    failed = g("failed")
    ok = (
        g("state") in _STATE_NAMES
        and type(roles) is list
        and type(g("num_restarts", 0)) is int
        and type(g("sup_pid", 0)) is int
        and type(g("created") or 0) in _NUMBER
        and type(g("updated") or 0) in _NUMBER
        and type(g("ended") or 0) in _NUMBER
        and type(g("msg", "")) is str
        and type(g("structured_error_msg", "")) is str
        and type(g("name", "")) is str
        and (
            failed is None
            or (
                type(failed) is list
                and len(failed) == 2
                and type(failed[0]) is int
                and type(failed[1]) is int
            )
        )
    )
    if ok and type(roles) is list:  # ok says it is; the checker needs it said here
        for r in roles:
            states = r.get("states") if type(r) is dict else None
            if (
                type(states) is not str
                or states.strip(_STATE_CHAR_SET)
                or type(r.get("name")) is not str
                or type(r.get("pids", ())) not in (list, tuple)
                or len(r.get("pids", states)) != len(states)
            ):
                ok = False
                break
    if not ok:
        _explain(status)
        raise _invalid("content")


def _explain(status: Any) -> None:
    """Raises ``ValueError`` naming the first field that is not as the supervisor writes it."""
    if not isinstance(status, dict):
        raise _invalid("not a JSON object")
    if status.get("state") not in _STATE_NAMES:
        raise _invalid(f"state {_short(status.get('state'))}")
    roles = status.get("roles")
    if not isinstance(roles, list):
        raise _invalid(f"roles {_short(roles)}")
    for role in roles:
        if not isinstance(role, dict) or not isinstance(role.get("name"), str):
            raise _invalid(f"role {_short(role)}")
        states = role.get("states")
        if not isinstance(states, str) or states.strip(_STATE_CHAR_SET):
            raise _invalid(f"states of role {role['name']!r}: {_short(states)}")
        pids = role.get("pids", [])
        if not isinstance(pids, list) or len(pids) != len(states):
            raise _invalid(f"pids of role {role['name']!r}: {_short(pids)}")
    for key in ("num_restarts", "sup_pid"):
        if type(status.get(key, 0)) is not int:
            raise _invalid(f"{key} {_short(status.get(key))}")
    for key in ("created", "updated", "ended"):
        value = status.get(key)
        if value is not None and type(value) not in (int, float):
            raise _invalid(f"{key} {_short(value)}")
    for key in ("msg", "structured_error_msg", "name", "app_id"):
        if not isinstance(status.get(key, ""), str):
            raise _invalid(f"{key} {_short(status.get(key))}")
    failed = status.get("failed")
    if failed is not None and not (
        isinstance(failed, list) and len(failed) == 2 and all(type(i) is int for i in failed)
    ):
        raise _invalid(f"failed {_short(failed)}")


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
