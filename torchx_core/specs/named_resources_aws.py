"""Named resources for AWS EC2 instance types (``aws_<instance type>``).

Values follow https://aws.amazon.com/ec2/instance-types/: vCPUs, GPUs and memory, with memory
reduced by :data:`MEM_TAX` (the share the OS, kubelet and agents keep for themselves) so a
replica asking for the whole host still fits. As in TorchX, :data:`GiB` is 1024 (MB per GiB)
and ``memMB = GiB_of_the_host * int(GiB * MEM_TAX)`` (e.g. p4d.24xlarge: 1152 * 983 =
1,132,416); define your own instance types the same way. Each resource carries the instance
type as the ``node.kubernetes.io/instance-type`` capability, and EFA network interfaces
(``vpc.amazonaws.com/efa``) or Neuron devices (``aws.amazon.com/neurondevice``) as ``devices``.

These definitions may change between releases; register your own named resources for what
you run on (see :mod:`torchx_core.specs.register`).

Usage::

    from torchx_core.specs import named_resources
    print(named_resources["aws_t3.medium"])
    print(named_resources["aws_p3.2xlarge"])
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torchx_core.specs._app import Resource

MEM_TAX: float = 0.96
#: MB per GiB (as in TorchX); a host's usable memory is ``n * int(GiB * MEM_TAX)``
GiB: int = 1024
K8S_ITYPE: str = "node.kubernetes.io/instance-type"
EFA_DEVICE: str = "vpc.amazonaws.com/efa"
NEURON_DEVICE: str = "aws.amazon.com/neurondevice"

# instance type -> (vCPU, GPU, memory GiB, EFA interfaces, Neuron devices)
_TABLE: dict[str, tuple[int, int, int, int, int]] = {
    # burstable / general purpose / compute optimized
    "t3.medium": (2, 0, 4, 0, 0),
    "t3.large": (2, 0, 8, 0, 0),
    "t3.xlarge": (4, 0, 16, 0, 0),
    "t3.2xlarge": (8, 0, 32, 0, 0),
    "m5.large": (2, 0, 8, 0, 0),
    "m5.xlarge": (4, 0, 16, 0, 0),
    "m5.2xlarge": (8, 0, 32, 0, 0),
    "m5.4xlarge": (16, 0, 64, 0, 0),
    "m5.8xlarge": (32, 0, 128, 0, 0),
    "m5.12xlarge": (48, 0, 192, 0, 0),
    "m5.16xlarge": (64, 0, 256, 0, 0),
    "m5.24xlarge": (96, 0, 384, 0, 0),
    "m5.metal": (96, 0, 384, 0, 0),
    "m5d.large": (2, 0, 8, 0, 0),
    "m5d.xlarge": (4, 0, 16, 0, 0),
    "m5d.2xlarge": (8, 0, 32, 0, 0),
    "m5d.4xlarge": (16, 0, 64, 0, 0),
    "m5d.8xlarge": (32, 0, 128, 0, 0),
    "m5d.12xlarge": (48, 0, 192, 0, 0),
    "m5d.16xlarge": (64, 0, 256, 0, 0),
    "m5d.24xlarge": (96, 0, 384, 0, 0),
    "m5d.metal": (96, 0, 384, 0, 0),
    "c5.large": (2, 0, 4, 0, 0),
    "c5.xlarge": (4, 0, 8, 0, 0),
    "c5.2xlarge": (8, 0, 16, 0, 0),
    "c5.4xlarge": (16, 0, 32, 0, 0),
    "c5.9xlarge": (36, 0, 72, 0, 0),
    "c5.12xlarge": (48, 0, 96, 0, 0),
    "c5.18xlarge": (72, 0, 142, 0, 0),  # 144 GiB host; MEM_TAX is not enough here (TorchX)
    "c5.24xlarge": (96, 0, 192, 0, 0),
    # GPU: P3 (V100), P4d/P4de (A100), P5/P5e/P5en (H100/H200), P6 (B200, B300, GB200)
    "p3.2xlarge": (8, 1, 61, 0, 0),
    "p3.8xlarge": (32, 4, 244, 0, 0),
    "p3.16xlarge": (64, 8, 488, 0, 0),
    "p3dn.24xlarge": (96, 8, 768, 1, 0),
    "p4d.24xlarge": (96, 8, 1152, 4, 0),
    "p4de.24xlarge": (96, 8, 1152, 4, 0),
    "p5.48xlarge": (192, 8, 2048, 32, 0),
    "p5e.48xlarge": (192, 8, 2048, 32, 0),
    "p5en.48xlarge": (192, 8, 2048, 16, 0),
    "p6-b200.48xlarge": (192, 8, 2048, 8, 0),
    "p6-b300.48xlarge": (192, 8, 4096, 16, 0),
    "p6e-gb200.36xlarge": (144, 4, 960, 16, 0),
    # GPU: G4dn (T4), G5 (A10G), G6e (L40S)
    "g4dn.xlarge": (4, 1, 16, 0, 0),
    "g4dn.2xlarge": (8, 1, 32, 0, 0),
    "g4dn.4xlarge": (16, 1, 64, 0, 0),
    "g4dn.8xlarge": (32, 1, 128, 1, 0),
    "g4dn.12xlarge": (48, 4, 192, 1, 0),
    "g4dn.16xlarge": (64, 1, 256, 1, 0),
    "g4dn.metal": (96, 8, 384, 1, 0),
    "g5.xlarge": (4, 1, 16, 0, 0),
    "g5.2xlarge": (8, 1, 32, 0, 0),
    "g5.4xlarge": (16, 1, 64, 0, 0),
    "g5.8xlarge": (32, 1, 128, 1, 0),
    "g5.12xlarge": (48, 4, 192, 1, 0),
    "g5.16xlarge": (64, 1, 256, 1, 0),
    "g5.24xlarge": (96, 4, 384, 1, 0),
    "g5.48xlarge": (192, 8, 768, 1, 0),
    "g6e.xlarge": (4, 1, 32, 0, 0),
    "g6e.2xlarge": (8, 1, 64, 0, 0),
    "g6e.4xlarge": (16, 1, 128, 0, 0),
    "g6e.8xlarge": (32, 1, 256, 0, 0),
    "g6e.12xlarge": (48, 4, 384, 0, 0),
    "g6e.16xlarge": (64, 1, 512, 0, 0),
    "g6e.24xlarge": (96, 4, 768, 2, 0),
    "g6e.48xlarge": (192, 8, 1536, 4, 0),
    # Trainium / Inferentia (Neuron devices, no GPUs)
    "trn1.2xlarge": (8, 0, 32, 0, 1),
    "trn1.32xlarge": (128, 0, 512, 8, 16),
    "trn1n.32xlarge": (128, 0, 512, 16, 16),
    "inf2.xlarge": (4, 0, 16, 0, 1),
    "inf2.8xlarge": (32, 0, 128, 0, 1),
    "inf2.24xlarge": (96, 0, 384, 0, 6),
    "inf2.48xlarge": (192, 0, 768, 0, 12),
}


def instance_type_resource(itype: str) -> Resource:
    """Returns the Resource of an AWS instance type listed in this module (e.g. ``"p3.2xlarge"``).

    Raises:
        UnknownNamedResourceError: the instance type is not listed
    """
    spec = _TABLE.get(itype)
    if spec is None:
        from torchx_core.specs.errors import UnknownNamedResourceError

        raise UnknownNamedResourceError(f"aws_{itype}", [f"aws_{k}" for k in _TABLE])
    cpu, gpu, mem_gib, efa, neuron = spec
    devices: dict[str, int] = {}
    if efa:
        devices[EFA_DEVICE] = efa
    if neuron:
        devices[NEURON_DEVICE] = neuron
    return Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem_gib * int(GiB * MEM_TAX),
        capabilities={K8S_ITYPE: itype},
        devices=devices,
    )


def instance_type_from_resource(resource: Resource) -> str | None:
    """The AWS instance type a resource asks for (its ``node.kubernetes.io/instance-type``).

    Warns (``UserWarning``) and returns None when the resource has no such capability: jobs
    on compute environments with several instance types may then land on the wrong one.
    """
    itype = resource.capabilities.get(K8S_ITYPE)
    if itype is None:
        import warnings

        warnings.warn(
            "Cannot determine the instance type of the resource, which can cause issues for"
            " non-homogeneous compute environments and multi-node jobs. Add the"
            f" `{K8S_ITYPE}` capability (torchx_core.specs.named_resources_aws.K8S_ITYPE)"
            " to the resource.",
            stacklevel=2,
        )
    found: str | None = itype
    return found


NAMED_RESOURCES: dict[str, Callable[[], Resource]] = {
    f"aws_{itype}": partial(instance_type_resource, itype) for itype in _TABLE
}

# one function per instance type as well (``aws_p3_2xlarge()``), like TorchX's module
globals().update(
    {name.replace(".", "_").replace("-", "_"): fn for name, fn in NAMED_RESOURCES.items()}
)
