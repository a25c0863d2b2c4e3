"""Dashboard tests: unit tests over the fake scheduler (``tests/runner/fake_scheduler.py``) through
Starlette's test client, and browser tests (``test_dashboard_browser.py``) against a real
``torchx dashboard`` process with real apps."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))  # fake_scheduler
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schedulers"))  # slurm_fixtures
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))  # airflow_deployment
