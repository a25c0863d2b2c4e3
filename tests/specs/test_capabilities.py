"""torchx_core.specs.capabilities.CapabilityKey."""

from __future__ import annotations

import pytest

from torchx_core import specs
from torchx_core.specs import Resource
from torchx_core.specs.capabilities import CapabilityKey


def test_set_get_default_and_plain_key() -> None:
    bw = CapabilityKey("aws", "network_bandwidth_gbps", int)
    res = Resource(cpu=1, gpu=0, memMB=1)
    assert bw.get(res) is None and bw.get(res, default=7) == 7
    bw.set(res, 400)
    assert res.capabilities == {"aws.network_bandwidth_gbps": 400}
    assert bw.get(res) == 400 and bw.get(res, default=1) == 400


@pytest.mark.parametrize("stored", ["400", True, 4.0])
def test_wrong_type_is_a_type_error(stored: object) -> None:
    bw = CapabilityKey("aws", "bw", int)
    res = Resource(cpu=1, gpu=0, memMB=1, capabilities={"aws.bw": stored})
    with pytest.raises(TypeError, match=r"capability `aws\.bw` expected `int`"):
        bw.get(res)


def test_key_is_a_frozen_value() -> None:
    a = CapabilityKey("ns", "x", str)
    assert a == CapabilityKey("ns", "x", str) and a != CapabilityKey("ns", "x", int)
    assert len({a, CapabilityKey("ns", "x", str)}) == 1
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        a.name = "y"  # type: ignore[misc]
    assert specs.CapabilityKey is CapabilityKey
