"""The torchx-suite version and the default image of the builtin components (``torchx.version``)."""

from __future__ import annotations

from torchx_core import __version__
from torchx_core.components import IMAGE as TORCHX_IMAGE

__all__ = ["TORCHX_IMAGE", "__version__"]
