"""Generic, cloud-agnostic named resources (t-shirt sizes).

These are meant as defaults for components and examples, NOT for production workloads: the
exact cpu/gpu/memory values may change between releases and do not map to any instance type,
and they carry no device capabilities (e.g. EFA). Register your own named resources (see
:mod:`torchx_core.specs.register`) for what you actually run on.

============  ===  ===  =========
Name          CPU  GPU  Memory
============  ===  ===  =========
gpu.small     8    1    32 GiB
gpu.medium    16   2    64 GiB
gpu.large     32   4    128 GiB
gpu.xlarge    64   8    256 GiB
cpu.nano      1    0    512 MiB
cpu.micro     1    0    1 GiB
cpu.small     1    0    2 GiB
cpu.medium    2    0    4 GiB
cpu.large     2    0    8 GiB
cpu.xlarge    8    0    32 GiB
============  ===  ===  =========
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torchx_core.specs._app import Resource

GiB: int = 1024

# name -> (cpu, gpu, memMB)
_TABLE: dict[str, tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32 * GiB),
    "gpu.medium": (16, 2, 64 * GiB),
    "gpu.large": (32, 4, 128 * GiB),
    "gpu.xlarge": (64, 8, 256 * GiB),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1 * GiB),
    "cpu.small": (1, 0, 2 * GiB),
    "cpu.medium": (2, 0, 4 * GiB),
    "cpu.large": (2, 0, 8 * GiB),
    "cpu.xlarge": (8, 0, 32 * GiB),
}


def _make(cpu: int, gpu: int, mem: int) -> Resource:
    return Resource(cpu=cpu, gpu=gpu, memMB=mem)


NAMED_RESOURCES: dict[str, Callable[[], Resource]] = {
    name: partial(_make, *spec) for name, spec in _TABLE.items()
}

# one function per size as well (``gpu_small()``)
globals().update({name.replace(".", "_"): fn for name, fn in NAMED_RESOURCES.items()})
