"""Structured component arguments: one CLI value that carries several.

TorchX's ``torchx.components.structured_arg``.

``--name exp/run`` names an experiment and a run for trackers; ``-j 2x8`` gives the number of
nodes and processes per node (the processes default to the host's GPUs).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from torchx_core import specs

__all__ = ["StructuredJArgument", "StructuredNameArgument"]


@dataclass
class StructuredNameArgument:
    """``{experiment}/{run}`` names (see :meth:`parse_from`)."""

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return f"{self.experiment_name or ''}/{self.run_name}"

    @staticmethod
    def parse_from(
        name: str,
        m: str | None = None,
        script: str | None = None,
        default_experiment_name: str = "default-experiment",
    ) -> StructuredNameArgument:
        """Parses ``name`` (``exp/run``, ``exp/``, ``/run``, ``run`` or ``/``).

        A missing run name comes from the module's last part or the script's stem; a missing
        experiment name is ``default_experiment_name``.

        >>> StructuredNameArgument.parse_from(name="foo/", script="bar/baz.py")
        StructuredNameArgument(experiment_name='foo', run_name='baz')
        >>> StructuredNameArgument.parse_from(name="/bar", m="foo.bar.baz")
        StructuredNameArgument(experiment_name='default-experiment', run_name='bar')

        Raises:
            ValueError: neither or both of ``m`` and ``script`` are given
        """
        if not m and not script:
            raise ValueError(
                "No main module or script specified. Specify either a main module or a script path"
            )
        if m and script:
            raise ValueError(
                "Both main module and script set. Specify exactly one of: main module or script,"
                " but not both"
            )
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        if not run:
            run = m.rpartition(".")[2] if m else Path(str(script)).stem
        return StructuredNameArgument(experiment or default_experiment_name, run)


@dataclass
class StructuredJArgument:
    """``{nnodes}x{nproc_per_node}`` for a named host (see :meth:`parse_from`)."""

    nnodes: int
    nproc_per_node: int

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.nproc_per_node}"

    @staticmethod
    def parse_from(h: str, j: str) -> StructuredJArgument:
        """Parses ``j`` for hosts of named resource ``h``.

        ``-j 2`` on a GPU host runs one process per GPU; ``-j 2x4`` is taken as given (with a
        warning when it differs from the host's GPU count).

        >>> str(StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="2"))
        '2x8'

        Raises:
            ValueError: ``j`` is malformed, or gives no process count for a host without GPUs
        """
        parts = j.split("x")
        gpus = specs.named_resources[h].gpu
        if not all(p.strip().isdigit() for p in parts) or len(parts) > 2:
            raise ValueError(
                f"Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: {j}"
            )
        nnodes = int(parts[0])
        if len(parts) == 1:
            if gpus <= 0:
                raise ValueError(
                    f"nproc_per_node cannot be inferred from GPU count. `{h}` is not a GPU"
                    f" instance. You must specify `-j $NNODESx$NPROCS_PER_NODE`"
                    f" (e.g. `-j {nnodes}x8`)"
                )
            return StructuredJArgument(nnodes, gpus)
        nproc = int(parts[1])
        if nproc != gpus:
            warnings.warn(
                f"In `-j {j}` you specified nproc_per_node={nproc} which does not equal the"
                f" number of GPUs on a {h}: {gpus}. This may lead to under-utilization or an"
                f" error. If this was intentional, ignore this warning. Otherwise set"
                f" `-j {nnodes}` to auto-set nproc_per_node to the number of GPUs on the host.",
                stacklevel=2,
            )
        return StructuredJArgument(nnodes, nproc)
