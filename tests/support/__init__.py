"""Shared test helpers: the fake scheduler, the fakes of the Airflow provider tests, and the
session fixtures of the real services (``<svc>_fixtures.py``). ``tests`` is on ``sys.path``
(``pythonpath`` in pyproject's ``[tool.pytest.ini_options]``), so tests import
``support.<module>``; fixtures are imported by name in the conftest that uses them."""
