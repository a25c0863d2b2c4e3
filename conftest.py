"""Repository-wide pytest configuration.

Service fixtures live in `tests/support/<svc>_fixtures.py` modules, imported by name in the conftest
of each directory that uses them; a module whose fixtures every directory needs is registered here
instead (pytest only accepts ``pytest_plugins`` in the root conftest). Append one line per module;
never remove others' lines.
"""

pytest_plugins: list[str] = [
]


import pytest


@pytest.fixture(autouse=True)
def _fresh_shared_status() -> None:
    """Each test starts with no shared status cache: fakes reuse app ids across tests."""
    from torchx_core.runner import status_watch

    status_watch.reset()
