"""Small programs run by the builtin components (``python -m torchx_core.components._apps.X``)."""
