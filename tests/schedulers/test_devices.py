"""torchx_core.schedulers.devices: named devices -> host device mounts (as TorchX)."""

from __future__ import annotations

import pytest

from torchx_core.schedulers.devices import get_device_mounts, to_devicemounts
from torchx_core.specs import DeviceMount


def test_efa_and_neuron_devices_become_dev_mounts() -> None:
    mounts = get_device_mounts({"vpc.amazonaws.com/efa": 2, "aws.amazon.com/neurondevice": 1})
    assert mounts == [
        DeviceMount("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
        DeviceMount("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"),
        DeviceMount("/dev/neuron0", "/dev/neuron0"),
    ]
    assert all(m.permissions == "rwm" for m in mounts)


def test_unknown_device_is_skipped_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="Could not find named device: foo.com/x"):
        assert get_device_mounts({"foo.com/x": 3}) == []
    assert to_devicemounts(0, "/dev/x") == []
