"""Where the user looks: the executor's own lines in a task try's log file.

A task's log (the UI's and the REST API's) is the file ``<[logging] base_log_folder>/<the
workload's log_path>``, written by the Task SDK's supervisor in the app. When the app never
started (a bad ``executor_config``, an unknown scheduler, a missing extra) or ended without its
task saying why (cancelled from outside, killed, vanished), nobody else writes the reason there:
the executor appends it, in the supervisor's format (one JSON object per line), with the app's
log tail. Airflow then shows it (read from the scheduler host's log folder, the one the API
server reads when the folder is shared or remote logging uploads it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.models.taskinstance import TaskInstance

__all__ = ["TaskLog", "log_path_of"]

logger: logging.Logger = logging.getLogger(__name__)

#: the logger name the lines carry (the UI shows it beside each line)
SOURCE = "torchx_airflow.executor"


class TaskLog:
    """Appends the executor's lines to task logs under one base folder."""

    def __init__(self, base_folder: str | Path) -> None:
        self.base = Path(base_folder)

    def path(self, log_path: str) -> Path:
        """The file of a task try's log (``log_path``: relative, as the workload gives it)."""
        return self.base / log_path

    def exists(self, log_path: str | None) -> bool:
        """Whether the task's log file exists (the task wrote it on a shared disk)."""
        return bool(log_path) and self.path(log_path or "").is_file()

    def append(self, log_path: str | None, event: str, lines: Sequence[str] = ()) -> bool:
        """Appends ``event`` (an error) and ``lines`` (the app's log tail, as info lines).

        Returns False, logging why to the scheduler's log, when the file cannot be written.
        """
        if not log_path:
            return False
        now = datetime.now(timezone.utc).isoformat()
        records = [{"timestamp": now, "level": "error", "event": event, "logger": SOURCE}]
        records += [{"timestamp": now, "level": "info", "event": line, "logger": SOURCE}
                    for line in lines]  # fmt: skip
        target = self.path(log_path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)
        except OSError as e:
            logger.warning("cannot write the reason to the task's log %s: %s", target, e)
            return False
        return True

    def copy(self, log_path: str | None, lines: Sequence[str]) -> bool:
        """Writes the app's log as the task's log when the task wrote none here (the app ran
        where this folder is not shared): the log stays readable after the task ended."""
        if not log_path or self.exists(log_path) or not lines:
            return False
        now = datetime.now(timezone.utc).isoformat()
        out = [
            line
            if line.startswith("{")
            else json.dumps({"timestamp": now, "level": "info", "event": line, "logger": SOURCE})
            for line in (raw.rstrip("\n") for raw in lines)
        ]
        target = self.path(log_path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(line + "\n" for line in out), encoding="utf-8")
        except OSError as e:
            logger.warning("cannot copy the app's log to the task's log %s: %s", target, e)
            return False
        return True


def log_path_of(ti: TaskInstance, try_number: int | None = None) -> str:
    """The relative log path of a task instance's try (default: its current one), as Airflow
    names it for a new workload (``[logging] log_filename_template``)."""
    from airflow.utils.helpers import log_filename_template_renderer

    render = log_filename_template_renderer()
    if try_number is None:
        return str(render(ti=ti))
    return str(render(ti=ti, try_number=try_number))
