"""``torchx_core.schedulers.docker_scheduler``: TorchX's import path of this backend, an alias.

The code lives in :mod:`torchx_core.schedulers.docker.scheduler`; this module IS that module
(the same object in ``sys.modules``), so every name, private ones and ``mock.patch`` targets
included, works under both paths.
"""

import sys

from torchx_core.schedulers.docker import scheduler as _impl

sys.modules[__name__] = _impl
