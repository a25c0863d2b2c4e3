"""Internals of the ``slurm`` scheduler; the public module is
:mod:`torchx_core.schedulers.slurm.scheduler`."""
