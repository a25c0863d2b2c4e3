"""torchx_core.components.structured_arg (TorchX's structured --name and -j arguments)."""

from __future__ import annotations

import pytest

from torchx_core.components.structured_arg import StructuredJArgument, StructuredNameArgument


@pytest.mark.parametrize(
    "name, m, script, expected",
    [
        ("foo/bar", None, "bar/baz.py", ("foo", "bar")),
        ("foo/", None, "bar/baz.py", ("foo", "baz")),
        ("/bar", None, "bar/baz.py", ("default-experiment", "bar")),
        ("foobar", "foo.bar", None, ("default-experiment", "foobar")),
        ("foo/", "foo.bar.baz", None, ("foo", "baz")),
        ("/", "foo.bar.baz", None, ("default-experiment", "baz")),
    ],
)
def test_name_forms(
    name: str, m: str | None, script: str | None, expected: tuple[str, str]
) -> None:
    arg = StructuredNameArgument.parse_from(name=name, m=m, script=script)
    assert (arg.experiment_name, arg.run_name) == expected
    assert str(arg) == f"{expected[0]}/{expected[1]}"


def test_name_needs_exactly_one_of_module_and_script() -> None:
    with pytest.raises(ValueError, match="No main module or script"):
        StructuredNameArgument.parse_from(name="a/b")
    with pytest.raises(ValueError, match="Both main module and script"):
        StructuredNameArgument.parse_from(name="a/b", m="x", script="y.py")


def test_j_defaults_to_gpus_and_warns_on_mismatch() -> None:
    assert str(StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="2")) == "2x8"
    with pytest.warns(UserWarning, match="nproc_per_node=4 which does not equal"):
        assert str(StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="2x4")) == "2x4"
    with pytest.raises(ValueError, match="is not a GPU instance"):
        StructuredJArgument.parse_from(h="aws_trn1.32xlarge", j="2")
    with pytest.warns(UserWarning, match="nproc_per_node=16"):
        assert str(StructuredJArgument.parse_from(h="aws_trn1.32xlarge", j="2x16")) == "2x16"
    with pytest.raises(ValueError, match="Invalid format"):
        StructuredJArgument.parse_from(h="gpu.small", j="2x4x1")
