"""TorchX's image providers of the local scheduler, and the other public names of its module.

An image provider says where a role runs on this host: ``fetch(image)`` gives the image root (the
``img_root`` macro), ``get_cwd(image)`` the working directory and ``get_entrypoint`` the command.
:class:`CWDImageProvider` (``local_cwd``: the current directory) and
:class:`LocalDirectoryImageProvider` (``local``: the directory named by the image) are the
scheduler's own two modes; a subclass of :class:`ImageProvider` passed as
``LocalScheduler(image_provider_class=...)`` is asked for each role at dry-run time.
"""

from __future__ import annotations

import abc
import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from torchx_core.schedulers.api import SchedulerArgumentError
from torchx_core.schedulers.local._torchx_face import TORCHX_NAMES
from torchx_core.specs import CfgVal, Role

__all__ = list(TORCHX_NAMES)  # one list: the scheduler module serves these lazily

logger: logging.Logger = logging.getLogger(__name__)

STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
COMBINED_LOG = "combined.log"
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
NA = "<N/A>"

# TorchX's aliases of the local scheduler's names
AppId = str
AppName = str
RoleName = str


class SignalException(Exception):
    """A termination signal (SIGTERM, SIGINT) received by the launching process.

    TorchX's local scheduler raises it from its signal handlers so that callers can clean up.
    This scheduler installs no signal handler (its apps run detached and outlive the launcher);
    the class is here for code that catches it.

    Args:
        msg: the message
        sigval: the signal received
    """

    def __init__(self, msg: str, sigval: signal.Signals) -> None:
        super().__init__(msg)
        self.sigval = sigval


@dataclass
class ReplicaParam:
    """How one replica is started: its argv, environment, log files and working directory."""

    args: list[str]
    env: dict[str, str]
    stdout: str | None = None
    stderr: str | None = None
    combined: str | None = None
    cwd: str | None = None


class ImageProvider(abc.ABC):
    """Where a role's image is on this host (TorchX's local image provider interface)."""

    def fetch_role(self, role: Role) -> str:
        """The image root of ``role`` (default: ``fetch(role.image)``)."""
        return self.fetch(role.image)

    @abc.abstractmethod
    def fetch(self, image: str) -> str:
        """Makes ``image`` available here; returns its root directory ("" if there is none)."""

    def get_replica_param(
        self,
        img_root: str,
        role: Role,
        stdout: str | None = None,
        stderr: str | None = None,
        combined: str | None = None,
    ) -> ReplicaParam:
        """The :class:`ReplicaParam` of a replica of ``role`` whose image is at ``img_root``."""
        return ReplicaParam(
            [self.get_entrypoint(img_root, role), *role.args],
            role.env,
            stdout,
            stderr,
            combined,
            self.get_cwd(role.image),
        )

    def get_cwd(self, image: str) -> str | None:
        """The working directory of the replicas (None: the launcher's)."""
        return None

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """The command to run (default: the entrypoint under ``img_root``)."""
        return os.path.join(img_root, role.entrypoint)


class LocalDirectoryImageProvider(ImageProvider):
    """The image is an existing directory of this host; roles run in it (the ``local`` mode).

    >>> LocalDirectoryImageProvider(cfg={}).fetch("/")
    '/'
    """

    def __init__(self, cfg: Mapping[str, CfgVal]) -> None:
        self.cfg = cfg

    def fetch(self, image: str) -> str:
        """``image`` itself.

        Raises:
            ValueError: ``image`` is not an existing directory.
        """
        if not os.path.isdir(image):
            raise ValueError(
                f"Invalid image name: {image!r}, does not exist or is not a directory; the"
                " `local` scheduler runs each role in the directory named by its image (use"
                " `local_cwd` to run in the current directory)"
            )
        return image

    def get_cwd(self, image: str) -> str | None:
        return image

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """The entrypoint as given (relative ones resolve against the image directory)."""
        return role.entrypoint


class CWDImageProvider(ImageProvider):
    """The image is ignored; roles run in the current working directory (the ``local_cwd`` mode).

    >>> CWDImageProvider(cfg={}).fetch("ignored:latest") == os.getcwd()
    True
    """

    def __init__(self, cfg: Mapping[str, CfgVal]) -> None:
        self.cfg = cfg

    def fetch(self, image: str) -> str:
        return os.getcwd()

    def get_cwd(self, image: str) -> str | None:
        return os.getcwd()

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


def local_mode(
    backend: str,
    image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] | None,
    cache_size: object,
) -> tuple[str, Callable[[Mapping[str, CfgVal]], ImageProvider]]:
    """The backend and image provider class of a ``LocalScheduler`` built with TorchX's args.

    ``LocalDirectoryImageProvider`` means ``local`` and ``CWDImageProvider`` ``local_cwd``;
    without a class, the backend's own provider.

    Raises:
        SchedulerArgumentError: ``cache_size`` is not an int >= 1.
    """
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        # TorchX refuses it too; this scheduler keeps no cache, but a bad value is an error
        raise SchedulerArgumentError(
            f"cache_size must be an int >= 1, got {cache_size!r} (the local scheduler keeps no"
            " app cache: leave it out)"
        )
    if image_provider_class is LocalDirectoryImageProvider:
        backend = "local"
    elif image_provider_class is CWDImageProvider:
        backend = "local_cwd"
    default = LocalDirectoryImageProvider if backend == "local" else CWDImageProvider
    return backend, image_provider_class or default


def custom_provider(
    cls: Callable[[Mapping[str, CfgVal]], ImageProvider], cfg: Mapping[str, CfgVal]
) -> ImageProvider | None:
    """An instance of a user's image provider class (None for the two built-in ones)."""
    if cls in (LocalDirectoryImageProvider, CWDImageProvider):
        return None
    return cls(cfg)


def cuda_device_count() -> int:
    """The GPUs of this host as ``nvidia-smi -L`` lists them (0 without it, as TorchX)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    except subprocess.CalledProcessError as e:
        logger.warning("`nvidia-smi -L` failed, assuming no GPUs: %s", e.stderr)
        return 0
    except OSError:
        logger.warning("`nvidia-smi` not found, assuming no GPUs on this host")
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.strip())
