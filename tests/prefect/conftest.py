"""Fixtures for the Prefect adapter tests.

Unit tests use the shared fake scheduler (``tests/runner/fake_scheduler.py``) under a real
:class:`~torchx_core.runner.Runner`. Integration tests (marked ``prefect``) use a real Prefect
server started by ``scripts/services/prefect/start.sh`` (session-scoped, temporary PREFECT_HOME;
see ``prefect_fixtures.py``) and real apps on the local scheduler under a temporary root; every
test checks that it leaves no app process behind.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))  # fake_scheduler

from prefect_fixtures import prefect_api, prefect_server  # noqa: F401
