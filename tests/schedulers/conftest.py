"""Fixtures of the scheduler tests: each backend's fixture module is imported here, one line each.

(``pytest_plugins`` is only allowed in the top-level conftest, so the fixture modules next to this
file are imported instead; this directory is on ``sys.path`` while its tests run.)
"""

from aws_fixtures import *  # noqa: F403 - pytest finds the fixtures by name
from docker_fixtures import *  # noqa: F403 - pytest finds the fixtures by name
from kubernetes_fixtures import *  # noqa: F403 - pytest finds the fixtures by name
from ray_fixtures import *  # noqa: F403 - pytest finds the fixtures by name
