"""``torch.distributed`` conveniences that also work in a plain (non-distributed) process.

Importing this module does not import torch: the rank helpers read the environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, set by ``torchrun``/torchx) until a process group
exists, and torch is imported by the functions that need it (``init_pg``, devices, barriers)::

    from torchx_core.distributed import init_pg, is_rank0, on_rank0_first

    device = init_pg()                 # "gloo" on CPU, "nccl" with GPUs; world of 1 under python
    with on_rank0_first():             # rank 0 downloads, the others then read the cache
        data = load_or_download()
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

__all__ = [
    "Backend",
    "init_pg",
    "is_local_rank0",
    "is_rank0",
    "local_cuda_device",
    "local_device",
    "local_rank",
    "on_local_rank0_first",
    "on_rank0_first",
    "rank",
    "world_size",
]

logger: logging.Logger = logging.getLogger(__name__)

Backend = Literal["nccl", "gloo", "auto"]
_BACKENDS = ("nccl", "gloo", "auto")


def __getattr__(name: str) -> Any:
    # TorchX's module holds `dist` (torch.distributed; tests patch `distributed.dist.get_rank`):
    # here torch is imported only when it is asked for
    if name == "dist":
        import torch.distributed

        return torch.distributed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _pg_initialized() -> bool:
    """Whether a default process group exists (never imports torch: no torch, no group)."""
    dist = sys.modules.get("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"${name}={value!r} is not an integer (set by torchrun/torchx)") from None


def local_rank() -> int:
    """This process's rank within its node: ``$LOCAL_RANK``, else 0.

    With a process group but no ``LOCAL_RANK`` (not launched by torchrun/torchx) a warning is
    issued and 0 returned.
    """
    if "LOCAL_RANK" in os.environ:
        return _env_int("LOCAL_RANK", 0)
    if _pg_initialized():
        warnings.warn(
            "a torch.distributed process group is initialized but LOCAL_RANK is not set;"
            " local_rank() returns 0. Launch with torchrun or torchx (dist.ddp) to set it.",
            stacklevel=2,
        )
    return 0


def rank() -> int:
    """The global rank: from the process group if there is one, else ``$RANK``, else 0."""
    if _pg_initialized():
        import torch.distributed as dist

        return int(dist.get_rank())
    return _env_int("RANK", 0)


def world_size() -> int:
    """The world size: from the process group if there is one, else ``$WORLD_SIZE``, else 1."""
    if _pg_initialized():
        import torch.distributed as dist

        return int(dist.get_world_size())
    return _env_int("WORLD_SIZE", 1)


def is_rank0() -> bool:
    """True on global rank 0 (and in a non-distributed process)."""
    return rank() == 0


def is_local_rank0() -> bool:
    """True on the first process of each node (and in a non-distributed process)."""
    return local_rank() == 0


def local_cuda_device() -> torch.device:
    """``cuda:<local rank>``."""
    import torch

    return torch.device(f"cuda:{local_rank()}")


def _has_cuda_devices() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def local_device() -> torch.device:
    """The device this process should use.

    With a process group: ``cuda:<local rank>`` for ``nccl``, else ``cpu``. Without one:
    ``cuda`` if the host has GPUs, else ``cpu``.
    """
    import torch

    if _pg_initialized():
        import torch.distributed as dist

        return local_cuda_device() if dist.get_backend() == "nccl" else torch.device("cpu")
    return torch.device("cuda") if _has_cuda_devices() else torch.device("cpu")


def init_pg(backend: Backend = "auto", **kwargs: Any) -> torch.device:
    """Initializes the default process group and returns this process's device.

    Under torchrun/torchx (``torch.distributed.is_torchelastic_launched()``) the group spans the
    job; under plain ``python`` it is a world of one on a free local port, so the same script
    runs both ways. ``backend="auto"`` is ``nccl`` when the host has GPUs (and NCCL), else
    ``gloo``.

    Args:
        backend: ``"nccl"``, ``"gloo"`` or ``"auto"``
        kwargs: passed to ``torch.distributed.init_process_group``

    Raises:
        ValueError: ``backend`` is not one of the three.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(_BACKENDS)}")
    import torch
    import torch.distributed as dist

    if backend == "auto":
        backend = "nccl" if _has_cuda_devices() and dist.is_nccl_available() else "gloo"
    if dist.is_torchelastic_launched():
        dist.init_process_group(backend=backend, **kwargs)
    else:
        if "init_method" not in kwargs and "store" not in kwargs:
            # a world of one on its own free port (an inherited MASTER_PORT may be shared)
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "0"
        dist.init_process_group(backend=backend, rank=0, world_size=1, **kwargs)
    logger.debug("process group up: backend=%s rank=%d/%d", backend, rank(), world_size())
    return local_cuda_device() if backend == "nccl" else torch.device("cpu")


def _barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


@contextmanager
def on_rank0_first() -> Iterator[None]:
    """Runs the block on rank 0 first, then on every other rank (no-op without a group).

    The other ranks wait in a barrier until rank 0 has left the block (also when it raised).
    """
    grouped = _pg_initialized()
    if grouped and not is_rank0():
        _barrier()
    try:
        yield
    finally:
        if grouped and is_rank0():
            _barrier()


@contextmanager
def on_local_rank0_first() -> Iterator[None]:
    """Runs the block on each node's local rank 0 first, then on the node's other ranks.

    The wait is a global barrier that the local ranks 0 enter after the block: node-local work
    (a download to the node's disk) is done once per node before anyone reads it.
    """
    grouped = _pg_initialized()
    if grouped and not is_local_rank0():
        _barrier()
    try:
        yield
    finally:
        if grouped and is_local_rank0():
            _barrier()
