"""Fixtures of the scheduler tests: each backend's fixture module is imported here, one line each.

(``pytest_plugins`` is only allowed in the top-level conftest, so the fixtures of the modules in
``tests/support/`` are imported here by name.)
"""

from support.aws_fixtures import aws_clients, batch_queue, moto_server  # noqa: F401 - fixtures
from support.docker_fixtures import docker_engine, docker_registry  # noqa: F401 - fixtures
from support.kubernetes_fixtures import k8s_emulator  # noqa: F401 - fixtures
from support.ray_fixtures import ray_head  # noqa: F401 - fixtures
