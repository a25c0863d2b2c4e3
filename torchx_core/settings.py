"""The ``TORCHX_*`` environment variable names, in one place (TorchX's ``torchx.settings``).

``from torchx_core import settings`` and read ``settings.ENV_TORCHXCONFIG`` etc. The modules
that use a name re-export it under the name they always had. (The job-side packages
``torchx_core.tracker`` and ``torchx_core.util`` import nothing of the launcher and spell their
names themselves; ``tests/runner/test_runner_config.py`` keeps them equal.)
"""

from __future__ import annotations

__all__ = [
    "ENV_TORCHXCONFIG",
    "ENV_TORCHX_IMAGE",
    "ENV_TORCHX_INTERNAL_SESSION_ID",
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
]

#: the trackers the runner injects into every replica (``name=factory,...``)
ENV_TORCHX_TRACKERS: str = "TORCHX_TRACKERS"
#: the parent run id the runner injects for tracker lineage
ENV_TORCHX_PARENT_RUN_ID: str = "TORCHX_PARENT_RUN_ID"
#: the app handle of the running job, injected into every replica
ENV_TORCHX_JOB_ID: str = "TORCHX_JOB_ID"
#: the one ``.torchxconfig`` file to read instead of ``$HOME``'s and the working directory's
ENV_TORCHXCONFIG: str = "TORCHXCONFIG"
#: the session id of this process (one per process unless set)
ENV_TORCHX_INTERNAL_SESSION_ID: str = "TORCHX_INTERNAL_SESSION_ID"
#: the default image of the builtin components
ENV_TORCHX_IMAGE: str = "TORCHX_IMAGE"
