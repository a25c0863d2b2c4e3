"""torchx-suite core: define, launch and manage jobs on any scheduler (TorchX-compatible API)."""

__version__ = "0.1.0"
