"""Fixtures for the Prefect adapter tests.

Unit tests use :class:`FakeRunner` (a small stateful stand-in for the Runner's public API).
Integration tests (marked ``prefect``) use a real Prefect server started by
``scripts/services/prefect/start.sh`` (session-scoped, temporary PREFECT_HOME; see
``prefect_fixtures.py``) and real apps on the local scheduler under a temporary root; every test
checks that it leaves no app process behind.
"""

from __future__ import annotations

import pytest
from prefect_fakes import FakeRunner
from prefect_fixtures import prefect_api, prefect_server  # noqa: F401


@pytest.fixture
def fake_runner() -> FakeRunner:
    return FakeRunner()

