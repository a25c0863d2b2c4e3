"""torchx_core.deprecations: TorchX's moved-module and deprecated-function warnings."""

from __future__ import annotations

import pytest

from torchx_core.deprecations import deprecated, deprecated_module


def test_deprecated_module_names_both_imports() -> None:
    with pytest.warns(UserWarning, match=r"\[Deprecated\] a\.old has moved to a\.new") as rec:
        deprecated_module(old_import="a.old", new_import="a.new", stacklevel=1)
    assert "will be removed" in str(rec[0].message) and "from a.new import" in str(rec[0].message)


def test_deprecated_warns_on_each_call_and_keeps_the_function() -> None:
    @deprecated(replacement="new_f")
    def old_f(x: int, *, y: int = 1) -> int:
        """Adds."""
        return x + y

    assert old_f.__name__ == "old_f" and old_f.__doc__ == "Adds."
    for _ in range(2):
        with pytest.warns(UserWarning, match="old_f is deprecated.*use new_f instead"):
            assert old_f(1, y=2) == 3
