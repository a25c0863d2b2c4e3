"""Fixtures for the Prefect adapter tests.

Unit tests use :class:`FakeRunner` (a small stateful stand-in for the Runner's public API).
Integration tests (marked ``prefect``) use a real Prefect test server (``prefect_test_harness``,
session-scoped, temporary PREFECT_HOME) and real apps on the local scheduler under a temporary
root; every test checks that it leaves no app process behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from prefect_fakes import FakeRunner


@pytest.fixture
def fake_runner() -> FakeRunner:
    return FakeRunner()


# ---------------------------------------------------------------------------------------------
# integration: a real Prefect server and the real local scheduler


_PREFECT_ENV = (
    "PREFECT_HOME",
    "PREFECT_LOCAL_STORAGE_PATH",
    "PREFECT_MEMO_STORE_PATH",
    "PREFECT_SERVER_ANALYTICS_ENABLED",
    "PREFECT_API_URL",
)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A temporary Prefect API (SQLite + uvicorn subprocess) for the whole session.

    PREFECT_HOME, the local result storage and the memo store live in a temporary directory,
    analytics are off and PREFECT_API_URL is unset, both in this process's Prefect settings
    (already loaded if Prefect was imported during collection) and in the environment that
    subprocesses (the test server, the Prefect runner's flow processes) inherit.
    """
    from prefect.settings import (
        PREFECT_HOME,
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_MEMO_STORE_PATH,
        PREFECT_SERVER_ANALYTICS_ENABLED,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    home = tmp_path_factory.mktemp("prefect-home")
    values = {
        "PREFECT_HOME": str(home),
        "PREFECT_LOCAL_STORAGE_PATH": str(home / "storage"),
        "PREFECT_MEMO_STORE_PATH": str(home / "memo_store.toml"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    saved = {k: os.environ.get(k) for k in _PREFECT_ENV}
    os.environ.update(values)
    os.environ.pop("PREFECT_API_URL", None)
    try:
        with temporary_settings(
            updates={
                PREFECT_HOME: home,
                PREFECT_LOCAL_STORAGE_PATH: home / "storage",
                PREFECT_MEMO_STORE_PATH: home / "memo_store.toml",
                PREFECT_SERVER_ANALYTICS_ENABLED: False,
            }
        ), prefect_test_harness(server_startup_timeout=300):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
