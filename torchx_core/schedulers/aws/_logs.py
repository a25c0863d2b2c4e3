"""Helpers shared by the AWS schedulers (``aws_batch``, ``aws_sagemaker``): boto3 clients and
CloudWatch Logs reading.

Neutral helper: no scheduler imports another scheduler's module.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import Any

from torchx_core.schedulers.api import SchedulerError
from torchx_core.specs.errors import import_optional

__all__ = ["iter_log_events", "make_client"]


def make_client(service: str, scheduler: str) -> Any:
    """Creates the default boto3 client of ``service`` for ``scheduler``.

    Raises:
        MissingDependencyError: boto3 is not installed (names the ``aws`` extra)
        SchedulerError: boto3 cannot configure the client (no region, unknown profile, ...)
    """
    boto3 = import_optional("boto3", "aws", f"the {scheduler} scheduler")
    from botocore.exceptions import BotoCoreError

    try:
        return boto3.client(service)
    except BotoCoreError as e:  # NoRegionError, ProfileNotFound, ...
        raise SchedulerError(
            f"{scheduler}: cannot create the AWS {service} client: {e}; configure a region"
            " (AWS_DEFAULT_REGION, or `region` in ~/.aws/config) and credentials (AWS_PROFILE,"
            " or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        ) from e


def _not_found(e: BaseException) -> bool:
    code = (
        getattr(e, "response", {}).get("Error", {}).get("Code", "")
        if hasattr(e, "response")
        else ""
    )
    return "ResourceNotFound" in (code or type(e).__name__) or "ResourceNotFound" in str(e)


def iter_log_events(
    logs: Any,
    group: str,
    stream: str,
    token: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Generator[str, None, str | None]:
    """Yields the events of one log stream as lines (with ``\\n``), from ``token`` on.

    A generator whose return value (``token = yield from iter_log_events(...)``) is the token to
    continue from when following the stream. A stream that does not exist (yet) yields nothing.

    Args:
        logs: a boto3 ``logs`` client (or a fake with ``get_log_events``)
        group: the log group
        stream: the log stream
        token: ``nextForwardToken`` returned by a previous call, or None to start at the head
        since: only events at or after this time
        until: only events at or before this time
    """
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
    if since is not None:
        kwargs["startTime"] = int(since.timestamp() * 1000)
    if until is not None:
        kwargs["endTime"] = int(until.timestamp() * 1000)
    while True:
        if token:
            kwargs["nextToken"] = token
        try:
            page = logs.get_log_events(**kwargs)
        except Exception as e:  # botocore ClientError; the stream may not exist yet
            if _not_found(e):
                return token
            raise SchedulerError(f"cannot read CloudWatch logs {group}/{stream}: {e}") from e
        for event in page.get("events", []):
            yield str(event.get("message", "")).rstrip("\n") + "\n"
        new_token = page.get("nextForwardToken")
        if not new_token or new_token == token:
            return token
        token = new_token
