"""Stand-in for ``ResumableJobMixin`` on Airflow 3.x without it (and without common-compat).

There is no task state store before Airflow 3.3, so every try calls ``submit_job``;
:py:class:`torchx_airflow.TorchXOperator` then reattaches by the app's deterministic name
(``Runner.list``) instead of submitting twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context


class ResumableJobMixin:
    """Submits, polls and returns the result on every try (no state store to resume from)."""

    external_id_key: str = "remote_job_id"

    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Context) -> Any:
        """Submits the job, waits for it, returns its result."""
        external_id = self.submit_job(context)  # type: ignore[attr-defined]
        self.poll_until_complete(external_id, context)  # type: ignore[attr-defined]
        return self.get_job_result(external_id, context)  # type: ignore[attr-defined]
