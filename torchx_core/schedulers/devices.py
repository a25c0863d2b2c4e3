"""Host device mounts for named devices (``torchx.schedulers.devices``).

Resources name their devices (``Resource.devices``: EFA interfaces, Neuron cores); container
schedulers that run on hosts without a device plugin mount the matching ``/dev`` files.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from functools import partial

from torchx_core.specs import DeviceMount
from torchx_core.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE

__all__ = ["DEVICES", "get_device_mounts", "to_devicemounts"]


def to_devicemounts(num_devices: int, device_type: str) -> list[DeviceMount]:
    """``num_devices`` mounts of ``{device_type}{index}`` onto the same path.

    >>> [m.src_path for m in to_devicemounts(2, "/dev/neuron")]
    ['/dev/neuron0', '/dev/neuron1']
    """
    return [
        DeviceMount(src_path=f"{device_type}{i}", dst_path=f"{device_type}{i}")
        for i in range(num_devices)
    ]


DEVICES: Mapping[str, Callable[[int], list[DeviceMount]]] = {
    EFA_DEVICE: partial(to_devicemounts, device_type="/dev/infiniband/uverbs"),
    NEURON_DEVICE: partial(to_devicemounts, device_type="/dev/neuron"),
}


def get_device_mounts(devices: dict[str, int]) -> list[DeviceMount]:
    """The device mounts for named devices (``{"vpc.amazonaws.com/efa": 2}``).

    A device without a known mapping is skipped with a warning naming the known ones.
    """
    mounts: list[DeviceMount] = []
    for name, count in devices.items():
        make = DEVICES.get(name)
        if make is None:
            warnings.warn(
                f"Could not find named device: {name} (known: {', '.join(DEVICES)})",
                stacklevel=2,
            )
            continue
        mounts += make(count)
    return mounts
