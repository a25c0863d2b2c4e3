"""Prefect-facing helpers: the task run's identity, the handle store, artifacts.

Every function here is synchronous (Prefect's sync client); the async task calls them through
``asyncio.to_thread``, which carries the Prefect run context along.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from torchx_core.specs import MissingDependencyError

try:
    from prefect import get_client
    from prefect.artifacts import create_link_artifact, create_markdown_artifact
    from prefect.context import FlowRunContext, TaskRunContext
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("prefect", "prefect", "torchx_prefect") from e

from torchx_prefect._launch import run_identity

logger: logging.Logger = logging.getLogger(__name__)

LABEL_PREFIX = "torchx.app."
"""Flow-run label prefix under which app handles are persisted (``torchx.app.<identity>``)."""


@dataclass(frozen=True)
class TaskIdentity:
    """Who is launching: the Prefect flow run and task call, stable across task retries.

    Args:
        flow_run_id: the flow run (``None`` for a task called outside a flow)
        task_run_id: the task run (the same across retries of one task run)
        task_key: the task's key
        dynamic_key: distinguishes calls of the same task within one flow run
        run_count: the attempt number of this task run (1 on the first try)
        retries: the task's configured number of retries
    """

    flow_run_id: UUID | None
    task_run_id: UUID | None
    task_key: str
    dynamic_key: str
    run_count: int
    retries: int

    @property
    def digest(self) -> str:
        """A short digest of flow-run id + task key + dynamic key (the task run id off-flow)."""
        anchor = self.flow_run_id if self.flow_run_id is not None else self.task_run_id
        return run_identity(anchor, self.task_key, self.dynamic_key)

    @property
    def retries_left(self) -> bool:
        """True if Prefect will run this task again after a failure of this attempt."""
        return self.run_count <= self.retries

    @property
    def label_key(self) -> str:
        """The flow-run label that stores this task's app handle."""
        return LABEL_PREFIX + self.digest


def current_identity() -> TaskIdentity:
    """The identity of the running Prefect task (or flow, if called from a flow body)."""
    task_ctx = TaskRunContext.get()
    flow_ctx = FlowRunContext.get()
    flow_run_id = flow_ctx.flow_run.id if flow_ctx is not None and flow_ctx.flow_run else None
    if task_ctx is None:
        return TaskIdentity(flow_run_id, None, "flow-body", "0", 1, 0)
    tr = task_ctx.task_run
    return TaskIdentity(
        flow_run_id=tr.flow_run_id or flow_run_id,
        task_run_id=tr.id,
        task_key=tr.task_key,
        dynamic_key=str(tr.dynamic_key),
        run_count=max(int(tr.run_count or 0), 1),
        retries=int(task_ctx.task.retries or 0),
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

    def labels(self) -> dict[str, Any]:
        """All labels of the flow run (empty without a flow run)."""
        if self.flow_run_id is None:
            return {}
        with self._client_factory() as client:
            return dict(client.read_flow_run(self.flow_run_id).labels or {})

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
            "Could not persist %s=%s on flow run %s after %d attempts%s", key, handle,
            self.flow_run_id, attempts, f": {error}" if error is not None else "",
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
