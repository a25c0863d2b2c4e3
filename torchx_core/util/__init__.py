"""Small stdlib-only helpers shared by every layer (``torchx.util`` compatible).

Nothing here imports another ``torchx_core`` package, so ``specs`` and the plugin registry may
use it.
"""
