"""Dashboard tests: unit tests over the fake scheduler (``tests/support/fake_scheduler.py``) through
Starlette's test client, and browser tests (``test_dashboard_browser.py``) against a real
``torchx dashboard`` process with real apps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.fake_scheduler import JobTable, make_runner

from torchx_core.runner import Runner


@pytest.fixture
def table() -> JobTable:
    """The fake scheduler's jobs, held (they stay running until a test moves them)."""
    t = JobTable()
    t.hold = True
    return t


@pytest.fixture
def runner(table: JobTable) -> Iterator[Runner]:
    """A Runner over the fake scheduler (the browser and proxy tests define their own)."""
    r = make_runner(table)
    yield r
    r.close()
