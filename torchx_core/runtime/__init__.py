"""Helpers for code running inside a job (TorchX's ``torchx.runtime``): see ``runtime.tracking``."""
