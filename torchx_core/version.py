"""The torchx-suite version and the default image of the builtin components (``torchx.version``)."""

from __future__ import annotations

from torchx_core import __version__
from torchx_core.components import IMAGE as TORCHX_IMAGE

__all__ = ["TORCHX_IMAGE", "__version__"]


def _get_torchx_image(torchx_version: str) -> str:
    """TorchX's image for a TorchX version: ``ghcr.io/pytorch/torchx:<torchx_version>``.

    ``TORCHX_IMAGE`` is not built from this package's version (torchx-suite's version is no tag
    of that image): it is the components' ``IMAGE``.
    """
    return f"ghcr.io/pytorch/torchx:{torchx_version}"
