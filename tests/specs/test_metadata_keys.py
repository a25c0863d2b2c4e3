"""torchx_core.specs.metadata_keys: TorchX's metadata key spellings."""

from __future__ import annotations

from torchx_core import specs
from torchx_core.specs.metadata_keys import NA, TORCHX_CONTEXT_NAME, app_metadata


def test_metadata_keys_are_torchx_spellings() -> None:
    assert (app_metadata.CONTEXT, app_metadata.VERSION, app_metadata.SCHEDULER) == (
        "torchx/context",
        "torchx/version",
        "torchx/scheduler",
    )
    assert app_metadata.ROLES_PREFIX == "torchx/roles."
    assert (NA, TORCHX_CONTEXT_NAME) == ("<<NA>>", "TORCHX_CONTEXT_NAME")
    assert specs.app_metadata is app_metadata and specs.NA == NA
