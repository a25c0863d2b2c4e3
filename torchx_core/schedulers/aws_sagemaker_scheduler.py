"""TorchX's import path ``torchx_core.schedulers.aws_sagemaker_scheduler``, an alias.

The code lives in :mod:`torchx_core.schedulers.aws.sagemaker`; this module IS that module (the same
object in ``sys.modules``), so every name, private ones and ``mock.patch`` targets included,
works under both paths.
"""

import sys

from torchx_core.schedulers.aws import sagemaker as _impl

sys.modules[__name__] = _impl
