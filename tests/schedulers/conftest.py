"""Fixtures of the scheduler tests: each backend's fixture module is imported here, one line each.

(``pytest_plugins`` is only allowed in the top-level conftest, so the fixture modules next to this
file are imported instead; this directory is on ``sys.path`` while its tests run.)
"""

from aws_fixtures import *
from docker_fixtures import *
from kubernetes_fixtures import *
from ray_fixtures import *
