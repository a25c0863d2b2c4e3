"""The programs of ``utils.copy`` and ``utils.booth`` (TorchX's ``torchx.apps.utils``).

Run as ``python -m torchx_core.apps.utils.copy_main`` and ``... .booth_main``; they take the
arguments of TorchX's modules of the same names, so either runs a component's command.
"""
