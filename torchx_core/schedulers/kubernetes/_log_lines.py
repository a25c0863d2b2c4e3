"""Kubernetes pod log lines: the API's response as lines, cut at a time (``until``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any


def aware(ts: datetime) -> datetime:
    """``ts`` with a time zone (a naive time is read as UTC)."""
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def response_lines(resp: Any) -> Iterable[str]:
    """Lines from a pod log response (a urllib3 response, bytes or str)."""
    if isinstance(resp, (bytes, str)):
        text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp
        return iter(text.splitlines(keepends=True))
    if hasattr(resp, "stream"):

        def gen() -> Iterable[str]:
            buf = b""
            for chunk in resp.stream(64 * 1024):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace") + "\n"
            if buf:
                yield buf.decode("utf-8", "replace")

        return gen()
    return iter(str(resp).splitlines(keepends=True))


def until_lines(lines: Iterable[str], until: datetime) -> Iterable[str]:
    """Stops at the first line stamped after ``until``; strips the stamps the API added."""
    for line in lines:
        stamp, _, rest = line.partition(" ")
        try:
            ts = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            yield line
            continue
        if ts > until:
            return
        yield rest
