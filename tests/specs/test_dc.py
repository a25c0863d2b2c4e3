"""``_dc.data`` classes behave like ``@dataclass`` ones, without importing ``dataclasses``."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from torchx_core import specs
from torchx_core.specs import _dc
from torchx_core.specs._dc import data, field, field_names

SPEC_CLASSES = [
    specs.Resource,
    specs.BindMount,
    specs.VolumeMount,
    specs.DeviceMount,
    specs.Workspace,
    specs.macros.Values,
    specs.Role,
    specs.AppDef,
    specs.runopt,
    specs.ReplicaStatus,
    specs.RoleStatus,
    specs.AppStatus,
]


def _stdlib_twin(cls: type) -> type:
    """The class ``@dataclass`` makes from the same annotations and field options."""
    ns: dict[str, object] = {"__annotations__": {}, "__module__": cls.__module__}
    for f in dataclasses.fields(cls):
        ns["__annotations__"][f.name] = f.type  # type: ignore[index]
        ns[f.name] = dataclasses.field(
            default=f.default,
            default_factory=f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            metadata=f.metadata,
            kw_only=f.kw_only,
        )
    twin = type(cls.__name__, (), ns)
    twin.__qualname__ = cls.__qualname__
    return dataclasses.dataclass(twin)


def test_all_spec_classes_are_data_classes() -> None:
    assert set(SPEC_CLASSES) <= set(_dc._FIELDS)


@pytest.mark.parametrize("cls", SPEC_CLASSES, ids=lambda c: c.__qualname__)
def test_same_signature_and_match_args_as_stdlib(cls: type) -> None:
    twin = _stdlib_twin(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(twin))
    assert cls.__init__.__annotations__ == twin.__init__.__annotations__  # type: ignore[misc]
    assert cls.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]
    assert field_names(cls) == tuple(f.name for f in dataclasses.fields(twin))
    assert dataclasses.is_dataclass(cls)


def test_instances_match_stdlib_repr_eq_and_helpers() -> None:
    role = specs.Role("r", "img", args=["a"], env={"K": "v"}, base_image="b")
    twin = _stdlib_twin(specs.Role)("r", "img", args=["a"], env={"K": "v"}, base_image="b")
    assert repr(role) == repr(twin)
    assert dataclasses.asdict(role) == dataclasses.asdict(twin)
    assert dataclasses.replace(role, name="s") == specs.Role("s", "img", args=["a"], env={"K": "v"})
    assert pickle.loads(pickle.dumps(role)) == role
    assert copy.deepcopy(role) == role and copy.deepcopy(role) is not role
    assert role.args is not specs.Role("r", "img").args  # fresh default per instance


def test_field_options_and_checks() -> None:
    calls: list[str] = []

    @data
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)
        hidden: str = field(default="h", repr=False, compare=False)
        derived: int = field(default=0, init=False)
        key: str = field(default="k", kw_only=True)

        def __post_init__(self) -> None:
            calls.append("post")
            self.derived = self.x + self.y

    p = Point(1, 2, key="z")
    assert calls == ["post"] and p.derived == 3 and p.key == "z"
    assert (
        repr(p)
        == "test_field_options_and_checks.<locals>.Point(x=1, y=2, tags=[], derived=3, key='z')"
    )
    assert Point(1, 2, hidden="other") == Point(1, 2)
    with pytest.raises(TypeError):
        Point(1, 2, 3, "h", 5)  # derived is not an init parameter
    assert [f.name for f in dataclasses.fields(Point)] == [
        "x",
        "y",
        "tags",
        "hidden",
        "derived",
        "key",
    ]
    assert Point.__match_args__ == ("x", "y", "tags", "hidden")

    with pytest.raises(ValueError, match="mutable default"):

        @data
        class Bad:
            items: list[str] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @data
        class Order:
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=int)
