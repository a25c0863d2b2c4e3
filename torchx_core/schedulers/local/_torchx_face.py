"""TorchX's face of the local scheduler, kept light: the names of TorchX's ``local_scheduler``
module that ``_images`` defines (listed without importing it: the scheduler module serves them
lazily; a test checks the list against ``_images.__all__``), the scheduler's methods around
TorchX's image providers, which load ``_images`` only when called, and TorchX's attributes
its users read (``_tmp_log_dirs``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchx_core.schedulers.local._images import ImageProvider
    from torchx_core.specs import CfgVal

TORCHX_NAMES = (
    "COMBINED_LOG",
    "ENV_CUDA_VISIBLE_DEVICES",
    "NA",
    "STDERR_LOG",
    "STDOUT_LOG",
    "AppId",
    "AppName",
    "CWDImageProvider",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "ReplicaParam",
    "RoleName",
    "SignalException",
)


class TorchXLocalFace:
    """TorchX's image-provider methods of ``LocalScheduler`` (``_provider_class`` is the class
    given to its constructor, None for the backend's own)."""

    backend: str
    _provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] | None

    def _set_provider(
        self,
        backend: str,
        image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] | None,
        cache_size: int,
    ) -> str:
        """Keeps TorchX's image provider class (``image_provider_class``) and returns the
        backend it means; ``_images`` is loaded only when a class or a cache size is given.

        Raises:
            SchedulerArgumentError: ``cache_size`` is not an int >= 1.
        """
        self._provider_class = image_provider_class
        if image_provider_class is not None or cache_size != 100:
            from torchx_core.schedulers.local._images import local_mode

            backend, self._provider_class = local_mode(backend, image_provider_class, cache_size)
        return backend

    @property
    def _tmp_log_dirs(self) -> list[str]:
        """TorchX's temporary log directories, which its ``close()`` deletes: none here. An app
        run without ``log_dir`` keeps its logs in its own directory under the state root, where
        any process reads them until the TTL collection; ``close()`` deletes nothing."""
        return []

    def _cuda_device_count(self) -> int:
        """The GPUs of this host as ``nvidia-smi -L`` lists them (0 without it, as TorchX)."""
        from torchx_core.schedulers.local._images import cuda_device_count

        return cuda_device_count()

    @property
    def _image_provider_class(self) -> Callable[[Mapping[str, CfgVal]], ImageProvider]:
        """TorchX's image provider class of this scheduler (``CWDImageProvider`` for
        ``local_cwd``, ``LocalDirectoryImageProvider`` for ``local``, or the one given)."""
        from torchx_core.schedulers.local._images import (
            CWDImageProvider,
            LocalDirectoryImageProvider,
        )

        if self._provider_class is not None:
            return self._provider_class
        return LocalDirectoryImageProvider if self.backend == "local" else CWDImageProvider

    def _custom_provider(self, cfg: Mapping[str, CfgVal]) -> ImageProvider | None:
        """An instance of a user's image provider class; None for the built-in ones."""
        if self._provider_class is None:
            return None
        from torchx_core.schedulers.local._images import custom_provider

        return custom_provider(self._provider_class, cfg)
