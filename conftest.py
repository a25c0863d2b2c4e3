"""Repository-wide pytest configuration.

Service fixtures live in `tests/**/**_fixtures.py` modules registered here (pytest only accepts
``pytest_plugins`` in the root conftest). Append one line per module; never remove others' lines.
"""

pytest_plugins: list[str] = [
]
