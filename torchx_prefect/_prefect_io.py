"""Prefect-facing helpers: the task call's identity and owner token, the handle store, artifacts.

Every function here is synchronous (Prefect's sync client); the async task calls them through
``asyncio.to_thread``, which carries the Prefect run context along.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from torchx_core.specs.errors import check_dependency_version, missing_dependency

check_dependency_version("prefect", "prefect", "torchx_prefect")

try:
    from prefect import get_client
    from prefect.artifacts import (
        create_link_artifact,
        create_markdown_artifact,
        create_table_artifact,
    )
    from prefect.context import FlowRunContext, TaskRunContext
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "prefect", "prefect", "torchx_prefect", distribution="prefect", cause=e
    ) from e

logger: logging.Logger = logging.getLogger(__name__)

LABEL_PREFIX = "torchx.app."
"""Flow-run label prefix under which app handles are persisted (``torchx.app.<digest>``)."""


@dataclass(frozen=True)
class TaskIdentity:
    """Who is launching: the Prefect flow run and the task call, stable across re-runs.

    The app's identity (hence its name, see :func:`torchx_core.runner.lifecycle.app_name`) is
    ``(flow-run id, task name, call digest, occurrence)``:

    * the flow-run id (the task-run id for a task called outside a flow);
    * the task's *name* (not Prefect's ``task_key``, which digests the task's source code);
    * the digest of what the call launches (:func:`torchx_prefect._launch.call_digest`: AppDef or
      component + args, scheduler, cfg, workspace);
    * the occurrence: the n-th task run of this flow-run execution with that name and digest
      (0 for the first). Calls with identical parameters are interchangeable, so their order
      does not matter, and a re-run of the flow run that makes the same calls gets the same
      identities.

    Prefect's own dynamic key is not used: Prefect 3 draws it at random for every call. Retries
    of one task run keep the identity (the occurrence is remembered per task-run id); a re-run
    of the flow run (a new execution) counts again from 0. Flows that put varying values (a
    timestamp, a random seed) into the AppDef get a new app on re-run.

    Args:
        anchor: the flow-run id (task-run id off-flow)
        task_name: the task's name
        call: the call digest
        occurrence: the occurrence among identical calls of this flow-run execution
        task_run_id: the task run (the same across its retries)
        flow_run_id: the flow run (``None`` for a task called outside a flow)
        flow_run_count: the flow run's execution number (its ``run_count`` in the API; the
            session reads it there, so that the flow hooks see the same number)
        run_count: the attempt number of this task run (1 on the first try)
        retries: the task's configured number of retries
    """

    anchor: str
    task_name: str
    call: str
    occurrence: int
    task_run_id: object
    flow_run_id: UUID | None
    flow_run_count: int
    run_count: int
    retries: int

    @property
    def owner(self) -> str:
        """This attempt's owner token, recorded with the app."""
        return (
            flow_run_owner_prefix(self.anchor, self.flow_run_count)
            + f"{self.task_name}/{self.task_run_id}#try={self.run_count}"
        )

    @property
    def parts(self) -> tuple[str, str, str, int]:
        """The identity parts the app name is built from."""
        return (self.anchor, self.task_name, self.call, self.occurrence)

    @property
    def retries_left(self) -> bool:
        """True if Prefect will run this task again after a failure of this attempt."""
        return self.run_count <= self.retries

    @property
    def label_key(self) -> str:
        """The flow-run label that stores this call's app handle."""
        digest = hashlib.sha256("\x1f".join(map(str, self.parts)).encode()).hexdigest()[:10]
        return LABEL_PREFIX + digest


class _Occurrences:
    """Numbers the task runs of one flow-run execution that share a name and call digest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[object, ...], list[object]] = {}

    def index(self, execution: tuple[object, ...], task_run_id: object) -> int:
        with self._lock:
            runs = self._seen.setdefault(execution, [])
            if task_run_id not in runs:
                runs.append(task_run_id)
            return runs.index(task_run_id)


_OCCURRENCES = _Occurrences()


def flow_run_owner_prefix(flow_run_id: object, flow_run_count: object) -> str:
    """The owner-token prefix of every task attempt of one flow-run execution
    (``prefect:<flow run>#run=<n>/``; a task attempt appends ``<task name>/<task run>#try=<n>``)."""
    return f"prefect:{flow_run_id}#run={flow_run_count}/"


def current_identity(call: str) -> TaskIdentity:
    """The identity of the running Prefect task call (or of the flow body calling it directly).

    Args:
        call: the call digest (:func:`torchx_prefect._launch.call_digest`)
    """
    task_ctx = TaskRunContext.get()
    flow_ctx = FlowRunContext.get()
    flow_run = flow_ctx.flow_run if flow_ctx is not None else None
    if task_ctx is None:
        task_name, task_run_id, run_count, retries = "flow-body", uuid4(), 1, 0
    else:
        tr = task_ctx.task_run
        task_name, task_run_id = task_ctx.task.name, tr.id
        run_count = max(int(tr.run_count or 0), 1)
        retries = int(task_ctx.task.retries or 0)
    flow_run_id = flow_run.id if flow_run is not None else None
    flow_run_count = max(int(getattr(flow_run, "run_count", 0) or 0), 1)
    anchor = str(flow_run_id if flow_run_id is not None else task_run_id)
    occurrence = _OCCURRENCES.index((anchor, flow_run_count, task_name, call), task_run_id)
    return TaskIdentity(
        anchor,
        task_name,
        call,
        occurrence,
        task_run_id,
        flow_run_id,
        flow_run_count,
        run_count,
        retries,
    )


class FlowRunHandleStore:
    """Persists app handles as labels of the Prefect flow run (``torchx.app.<identity>``).

    Labels live in Prefect's database with the flow run, so a retried task, a flow-level hook
    in another process (the Prefect runner) and the UI all see which apps a run started.

    Args:
        flow_run_id: the flow run to store on; ``None`` disables the store (tasks off-flow)
        client_factory: returns a context manager giving a sync Prefect client (default:
            ``prefect.get_client(sync_client=True)``; tests inject a fake)
    """

    def __init__(
        self, flow_run_id: UUID | None, client_factory: Callable[[], Any] | None = None
    ) -> None:
        self.flow_run_id = flow_run_id
        self._client_factory = client_factory or (lambda: get_client(sync_client=True))

    def read(self) -> tuple[dict[str, Any], int | None]:
        """The flow run's labels and its ``run_count`` (``({}, None)`` without a flow run)."""
        if self.flow_run_id is None:
            return {}, None
        with self._client_factory() as client:
            run = client.read_flow_run(self.flow_run_id)
        return dict(run.labels or {}), getattr(run, "run_count", None)

    def labels(self) -> dict[str, Any]:
        """All labels of the flow run (empty without a flow run)."""
        return self.read()[0]

    def get(self, key: str) -> str | None:
        """The handle stored under ``key``, if any."""
        value = self.labels().get(key)
        return str(value) if value else None

    def put(self, key: str, handle: str, attempts: int = 5, backoff: float = 0.2) -> bool:
        """Stores ``handle`` under ``key`` and reads it back.

        Labels are merged server-side with a read-modify-write, so concurrent writers can drop
        each other's update, and a busy database can refuse a write: both are retried (with a
        growing pause) up to ``attempts`` times.

        Returns:
            True if the handle was read back.
        """
        if self.flow_run_id is None:
            return False
        error: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(backoff * attempt)
            try:
                with self._client_factory() as client:
                    client.update_flow_run_labels(self.flow_run_id, {key: handle})
                if self.get(key) == handle:
                    return True
            except Exception as e:  # noqa: BLE001 - retried; reported below if it persists
                error = e
        logger.warning(
            "Could not persist %s=%s on flow run %s after %d attempts%s",
            key,
            handle,
            self.flow_run_id,
            attempts,
            f": {error}" if error is not None else "",
        )
        return False

    def handles(self) -> dict[str, str]:
        """Every app handle stored on the flow run, ``{label: handle}``."""
        return app_handles_from_labels(self.labels())


def app_handles_from_labels(labels: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``torchx.app.*`` entries of a label mapping."""
    return {k: str(v) for k, v in (labels or {}).items() if k.startswith(LABEL_PREFIX) and v}


def publish_status(key: str, markdown: str, description: str) -> None:
    """Creates (a new version of) the markdown status artifact ``key`` on the current run."""
    create_markdown_artifact(markdown=markdown, key=key, description=description, _sync=True)  # type: ignore[call-arg]  # async_dispatch accepts _sync


def publish_link(key: str, link: str, text: str) -> None:
    """Creates a link artifact ``key`` on the current run."""
    create_link_artifact(link=link, link_text=text, key=key, _sync=True)  # type: ignore[call-arg]  # async_dispatch accepts _sync


def publish_table(key: str, rows: list[dict[str, str]], description: str) -> None:
    """Creates (a new version of) the table artifact ``key`` on the current run."""
    create_table_artifact(table=rows, key=key, description=description, _sync=True)  # type: ignore[call-arg]  # async_dispatch accepts _sync
