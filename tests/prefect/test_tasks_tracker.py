"""Tracker results in Prefect (real server): what an app recorded through ``AppRun`` becomes a
table artifact on the task run and a line of the run's logs. The launcher's fsspec tracker is
configured in the flow's environment."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect_helpers import artifacts_of, flow_run_logs, task_runs

from torchx_core.specs import AppDef, Role

pytestmark = [pytest.mark.integration, pytest.mark.prefect, pytest.mark.local]

RECORD = (
    "from torchx_core.tracker import app_run_from_env\n"
    "run = app_run_from_env()\n"
    "run.add_metadata(accuracy=0.9, epochs=2, model='mlp')\n"
    "run.add_artifact('model', '/ckpt/model.pt', {'step': 7})\n"
)


@pytest.fixture
def tracked(prefect_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith(("TORCHX_TRACKER", "TORCHX_PARENT_RUN_ID")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "torchx-local"))
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {tmp_path / 'tracker-root'}\n")
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", str(conf))
    yield tmp_path


def test_task_run_gets_a_tracker_table_artifact(tracked: Path) -> None:
    from prefect import flow

    from torchx_prefect import run_app_sync

    name = f"tracked-{uuid.uuid4().hex[:6]}"
    app = AppDef(
        name,
        roles=[Role("trainer", image=str(tracked), entrypoint=sys.executable, args=["-c", RECORD])],
    )

    @flow
    def f() -> Any:
        return run_app_sync(app, poll_interval=0.2)

    state = f(return_state=True)
    assert state.is_completed(), state
    result = state.result()
    (tr,) = task_runs(state.state_details.flow_run_id)
    arts = {a.key: a for a in artifacts_of(tr.id)}
    table = arts[f"torchx-{result.app_name}-tracker"]
    assert table.type == "table"
    rows = table.data if isinstance(table.data, list) else json.loads(table.data)
    assert rows == [
        {"kind": "metadata", "name": "accuracy", "value": "0.9"},
        {"kind": "metadata", "name": "epochs", "value": "2"},
        {"kind": "metadata", "name": "model", "value": "mlp"},
        {"kind": "artifact", "name": "model", "value": "/ckpt/model.pt"},
    ]
    needle = f"tracker results of {result.app_handle} (fsspec)"
    assert any(needle in m for m in flow_run_logs(state.state_details.flow_run_id, needle))
