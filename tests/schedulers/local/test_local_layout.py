"""The status file's format on disk, pinned (``make test-fast``).

Apps written by earlier versions must still be read, and every writer of the status document
(launcher, supervisor, reader of a dead supervisor, cancel) writes the same format. The
documents below are byte for byte what the previous version wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchx_core.schedulers.local import _layout, _state
from torchx_core.schedulers.local._layout import (
    LOCK_FILE,
    MARKER_FILE,
    STATUS_FILE,
    RoleStates,
    StatusDoc,
)
from torchx_core.schedulers.local.scheduler import create_scheduler
from torchx_core.specs import AppState

APP = "fmt-bcdfghjklmnp"
# a finished app with a failed replica, as the supervisor wrote it (compact JSON, this key order)
FAILED_DOC = (
    '{"v":1,"app_id":"fmt-bcdfghjklmnp","name":"fmt","state":"FAILED","num_restarts":1,'
    '"msg":"replica trainer/1 exited with code 3 (after 1 restart(s))",'
    '"structured_error_msg":"{\\"message\\": \\"boom\\"}","sup_pid":4242,'
    '"created":1700000000.5,"updated":1700000009.25,"ended":1700000009.25,"failed":[0,1],'
    '"roles":[{"name":"trainer","states":"SF","pids":[0,0]},'
    '{"name":"ps","states":"C","pids":[0]}],"layout":"torchx"}'
)
# the launcher's PENDING status (no pid yet, no layout)
PENDING_DOC = (
    '{"v":1,"app_id":"fmt-bcdfghjklmnp","name":"fmt","state":"PENDING","num_restarts":0,'
    '"msg":"","structured_error_msg":"<NONE>","sup_pid":0,"created":1700000000.5,'
    '"updated":1700000000.5,"ended":null,"failed":null,'
    '"roles":[{"name":"trainer","states":"PP","pids":[0,0]}]}'
)


def test_the_status_document_writes_todays_format_byte_for_byte() -> None:
    for text in (FAILED_DOC, PENDING_DOC):
        doc = StatusDoc.from_json(json.loads(text))
        assert json.dumps(doc.to_json(), separators=(",", ":")) == text
    plan = {"app_id": APP, "name": "fmt", "roles": [{"name": "trainer", "num_replicas": 2}]}
    pending = _layout.pending_status(plan, 1700000000.5).to_json()
    assert json.dumps(pending, separators=(",", ":")) == PENDING_DOC


def test_a_status_file_of_the_previous_version_is_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    app_dir = root / APP
    app_dir.mkdir(parents=True)
    (app_dir / MARKER_FILE).write_text(f"{APP}\n")
    (app_dir / LOCK_FILE).write_text("4242\n")
    (app_dir / STATUS_FILE).write_text(FAILED_DOC)
    assert _state.read_status(str(app_dir), APP) == StatusDoc.from_json(json.loads(FAILED_DOC))
    desc = create_scheduler("s", root=str(root)).describe(APP)
    assert desc is not None and desc.state == AppState.FAILED and desc.num_restarts == 1
    assert desc.msg == "replica trainer/1 exited with code 3 (after 1 restart(s))"
    trainer, ps = desc.roles_statuses
    assert [r.state for r in trainer.replicas] == [AppState.SUCCEEDED, AppState.FAILED]
    assert trainer.replicas[1].structured_error_msg == '{"message": "boom"}'
    assert [r.state for r in ps.replicas] == [AppState.CANCELLED]


def test_an_older_minimal_status_gets_the_defaults() -> None:
    old = {"v": 1, "name": "", "state": "CANCELLED", "created": 2.0}
    doc = StatusDoc.from_json({**old, "roles": [{"name": "r", "states": "CS"}]}, app_id=APP)
    assert (doc.app_id, doc.msg, doc.sup_pid, doc.num_restarts) == (APP, "", 0, 0)
    assert doc.structured_error_msg == _layout.NO_ERROR and doc.updated == 2.0
    assert doc.roles[0].pids == [0, 0] and doc.failed is None and doc.layout is None


def test_a_cancel_without_the_supervisor_keeps_the_fields_it_found() -> None:
    found = StatusDoc.from_json(json.loads(PENDING_DOC))
    out = _layout.cancelled_status(found, APP, 7.0).to_json()
    assert out["state"] == "CANCELLED" and out["msg"] == "cancelled"
    assert (out["ended"], out["updated"], out["created"]) == (7.0, 7.0, 1700000000.5)
    assert out["roles"] == [{"name": "trainer", "states": "CC", "pids": [0, 0]}]
    kept = {k: v for k, v in out.items() if k not in ("state", "msg", "ended", "updated", "roles")}
    assert kept == {k: v for k, v in json.loads(PENDING_DOC).items() if k in kept}
    assert list(out) == list(json.loads(PENDING_DOC))
    fresh = _layout.cancelled_status(None, APP, 7.0)
    assert fresh == StatusDoc(
        APP, "", "CANCELLED", [], created=7.0, updated=7.0, ended=7.0, msg="cancelled"
    )


def test_role_states_default_to_no_pids() -> None:
    assert RoleStates("r", "PRS").to_json() == {"name": "r", "states": "PRS", "pids": [0, 0, 0]}


def test_the_supervisor_side_loads_by_path_with_the_standard_library_only() -> None:
    """``python -S -E _detached.py`` (spawn mode) imports its siblings as top-level modules."""
    import subprocess
    import sys

    here = Path(_layout.__file__).parent
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _detached;"
        " print(' '.join(sorted(m for m in sys.modules if m.startswith('torchx')"
        " or m in ('_layout', '_procs', '_replicas', '_supervisor', '_detached'))))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-E", "-c", code, str(here)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == ["_detached", "_layout", "_procs", "_replicas", "_supervisor"]


# -- one check of a status file (``status_problem``, used by ``check_status``) ------------------

# one wrong value per field of a status document: (field, value) -> the field named in the error
BAD_FIELDS = [
    ("state", "SLEEPING"),
    ("state", None),
    ("app_id", 5),
    ("name", ["fmt"]),
    ("num_restarts", "1"),
    ("num_restarts", True),  # a bool is not a count
    ("msg", None),
    ("structured_error_msg", 3),
    ("sup_pid", 4242.0),
    ("created", "yesterday"),
    ("created", False),
    ("updated", {}),
    ("ended", "now"),
    ("layout", 1),
    ("failed", [0]),
    ("failed", [0, "1"]),
    ("roles", "xyz"),
]
BAD_ROLES = [
    ({"name": "r", "states": "RX", "pids": [0, 0]}, "states"),  # a bad state character
    ({"name": "r", "states": "PxP", "pids": [0, 0, 0]}, "states"),
    ({"name": "r", "states": "r", "pids": [0]}, "states"),  # state characters are upper case
    ({"name": "r", "states": 5, "pids": [0]}, "states"),
    ({"name": "r", "pids": [0]}, "states"),
    ({"name": "r", "states": "S", "pids": "x"}, "pids"),
    ({"name": "r", "states": "SS", "pids": [0]}, "pids"),
    ({"name": "r", "states": "S", "pids": ["1"]}, "pids"),
    ({"name": 3, "states": "S", "pids": [0]}, "role"),
    ("r", "role"),
]


def test_a_status_as_written_has_no_problem_and_older_ones_neither() -> None:
    for text in (FAILED_DOC, PENDING_DOC):
        assert _layout.status_problem(json.loads(text)) is None
    minimal = {"state": "RUNNING", "roles": [{"name": "r", "states": "RS"}]}  # no pids, no times
    assert _layout.status_problem(minimal) is None


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_every_field_of_a_status_is_checked_and_named(field: str, value: object) -> None:
    doc = json.loads(FAILED_DOC)
    doc[field] = value
    with pytest.raises(ValueError, match=f"^unexpected {field} ") as err:
        _layout.check_status(doc)
    assert _layout.status_problem(doc) == str(err.value).removeprefix("unexpected ")


@pytest.mark.parametrize(("role", "named"), BAD_ROLES)
def test_every_role_of_a_status_is_checked_and_a_bad_state_character_refused(
    role: object, named: str
) -> None:
    doc = json.loads(FAILED_DOC)
    doc["roles"].append(role)
    problem = _layout.status_problem(doc)
    assert problem is not None and problem.startswith(named)
    with pytest.raises(ValueError, match=f"^unexpected {named}"):
        _layout.check_status(doc)


def test_a_status_that_is_not_an_object_is_refused() -> None:
    for value in ([], "RUNNING", None, 5):
        with pytest.raises(ValueError, match="not a JSON object"):
            _layout.check_status(value)


def test_the_reader_refuses_what_the_check_refuses(tmp_path: Path) -> None:
    """The fast path of ``_state.read_status`` and the check are one: ``app_id: 5`` is corrupt."""
    sched = create_scheduler("t", root=str(tmp_path))
    app_dir = tmp_path / APP
    app_dir.mkdir()
    (app_dir / MARKER_FILE).write_text(APP + "\n")
    doc = json.loads(FAILED_DOC)
    doc["app_id"] = 5
    (app_dir / STATUS_FILE).write_text(json.dumps(doc))
    with pytest.raises(_state.CorruptAppStateError, match="unexpected app_id 5"):
        sched.describe(APP)
