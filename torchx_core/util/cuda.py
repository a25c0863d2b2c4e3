"""CUDA availability (``torchx.util.cuda``); torch is imported only when asked."""

from __future__ import annotations

__all__ = ["has_cuda_devices"]


def has_cuda_devices() -> bool:
    """True if this host has at least one CUDA device *and* torch can use it.

    ``torch.cuda.is_available()`` alone is not enough: it reports what the installed torch
    build supports; the device count says whether a GPU is actually there.

    Raises:
        ModuleNotFoundError: torch is not installed.
    """
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
