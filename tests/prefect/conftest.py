"""Fixtures for the Prefect adapter tests.

Unit tests use the shared fake scheduler (``tests/support/fake_scheduler.py``) under a real
:class:`~torchx_core.runner.Runner`. Integration tests (marked ``prefect``) use a real Prefect
server started by ``scripts/services/prefect/start.sh`` (session-scoped, temporary PREFECT_HOME;
see ``prefect_fixtures.py``) and real apps on the local scheduler under a temporary root; every
test checks that it leaves no app process behind.
"""

from __future__ import annotations

from prefect_fixtures import prefect_api, prefect_server  # noqa: F401
