"""Running launcher steps on this machine with ``kfp.local``.

``kfp.local.DockerRunner`` bind-mounts the pipeline root into each step's container (at the same
path) and starts the container as its image's user: the launcher image's ``torchx`` (uid 1000
unless built with ``USER_UID``). A pipeline root that user cannot write (yours, mode 0755 or
0700) ends the step with ``PermissionError`` before the launcher starts. :func:`docker_runner`
instead runs each step as the owner of the pipeline root, as ``kfp.local.SubprocessRunner`` runs
it as you::

    import kfp.local, torchx_kfp

    root = "/tmp/pipeline-root"
    kfp.local.init(runner=torchx_kfp.docker_runner(root), pipeline_root=root)
"""

from __future__ import annotations

import os
import pwd
from typing import TYPE_CHECKING, Any

from torchx_kfp.errors import InvalidKfpOptionsError

if TYPE_CHECKING:
    import kfp.local

__all__ = ["docker_runner"]


def docker_runner(
    pipeline_root: str | os.PathLike[str], **docker_run_args: Any
) -> kfp.local.DockerRunner:
    """A ``kfp.local.DockerRunner`` whose steps can write ``pipeline_root``.

    Each step's container runs as the owner of ``pipeline_root`` (``user="<uid>:<gid>"``; the
    directory is created if missing, then owned by you), with ``HOME=/tmp`` and ``USER`` (the
    owner's name) set, since that uid has no home or account in the image. Give ``user`` (or
    ``HOME``/``USER`` in ``environment``) yourself to choose otherwise. A Slurm step must run as
    a user of the cluster: there, keep the image's user (built with ``USER_UID``) and make the
    pipeline root writable for it.

    Args:
        pipeline_root: the directory passed to ``kfp.local.init(pipeline_root=...)``
        docker_run_args: ``kfp.local.DockerRunner`` arguments (``network_mode``, ``mounts``,
            ``environment`` as a dict...)

    Raises:
        InvalidKfpOptionsError: ``pipeline_root`` is not a directory (or cannot be created), or
            ``environment`` is not a dict
    """
    import kfp.local

    root = os.path.abspath(os.fspath(pipeline_root))
    try:
        os.makedirs(root, exist_ok=True)
        owner = os.stat(root)
    except OSError as e:
        raise InvalidKfpOptionsError(
            f"pipeline_root {root!r} is not a directory this process can create or read ({e});"
            " give the directory passed to kfp.local.init(pipeline_root=...)"
        ) from e
    environment = docker_run_args.pop("environment", None) or {}
    if not isinstance(environment, dict):
        raise InvalidKfpOptionsError(
            f"environment must be a dict of variables, got {type(environment).__name__};"
            ' e.g. environment={"AWS_DEFAULT_REGION": "us-east-1"}'
        )
    docker_run_args.setdefault("user", f"{owner.st_uid}:{owner.st_gid}")
    environment = {"HOME": "/tmp", "USER": _user_name(owner.st_uid), **environment}
    return kfp.local.DockerRunner(environment=environment, **docker_run_args)


def _user_name(uid: int) -> str:
    """The account name of ``uid`` here (its number if it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
