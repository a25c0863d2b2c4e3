"""The ``>>>`` examples in torchx_kfp's docstrings hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytestmark = pytest.mark.kfp


@pytest.mark.parametrize(
    "module", ["torchx_kfp.container", "torchx_kfp.runtime", "torchx_kfp.states"]
)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no examples"
    assert result.failed == 0
