"""``data``/``field``: standard dataclasses for the spec types, without importing ``dataclasses``.

Importing :mod:`dataclasses` pulls in ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``),
and ``@dataclass`` compiles three functions per class with ``exec``. For the dozen classes
defined when ``torchx_core.specs`` is imported that was about half of its import time.

``@data`` builds what the spec classes need at run time itself: an ``__init__`` with the
same signature ``@dataclass`` generates (``<factory>`` defaults, keyword-only fields,
``__post_init__``), one shared ``__repr__``/``__eq__`` (same output and field selection as the
generated ones; unhashable like ``eq=True`` dataclasses) and ``__match_args__``. The
``dataclasses`` metadata (``__dataclass_fields__``/``__dataclass_params__``) is built on first
access by running the real ``dataclasses.dataclass`` over a shadow class with the same fields,
so ``dataclasses.fields/asdict/replace/is_dataclass`` and ``@dataclass`` subclasses work
unchanged; they import ``dataclasses`` themselves.

Type checkers see plain ``dataclasses.dataclass``/``dataclasses.field``.
"""

from __future__ import annotations

import reprlib

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from dataclasses import dataclass as data
    from dataclasses import field
    from typing import Any

__all__ = ["data", "field", "field_names"]


class _Missing:
    def __repr__(self) -> str:
        return "<MISSING>"


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


_MISSING: Any = _Missing()
_HAS_FACTORY: Any = _Factory()


class _Spec:
    """What :func:`field` returns while the class body runs (turned into a field by ``data``)."""

    __slots__ = (
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kw_only",
        "metadata",
        "repr",
    )

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        init: bool,
        repr: bool,
        hash: bool | None,
        compare: bool,
        metadata: Any,
        kw_only: bool,
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = metadata
        self.kw_only = kw_only


def _field(
    *,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    metadata: Any = None,
    kw_only: bool = False,
) -> Any:
    """Same parameters as :func:`dataclasses.field`."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Spec(
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        hash=hash,
        compare=compare,
        metadata=metadata,
        kw_only=kw_only,
    )


class _F:
    """One field of a ``data`` class (name, annotation string, options)."""

    __slots__ = ("ann", "name", "spec")

    def __init__(self, name: str, ann: Any, spec: _Spec) -> None:
        self.name = name
        self.ann = ann
        self.spec = spec


_FIELDS: dict[type, tuple[_F, ...]] = {}  # data classes -> their fields (incl. inherited)
_REPR: dict[type, tuple[str, ...]] = {}
_EQ: dict[type, tuple[str, ...]] = {}


def _is_classvar(ann: Any) -> bool:
    text = ann if isinstance(ann, str) else getattr(ann, "__qualname__", "") or str(ann)
    return text.startswith(("ClassVar", "typing.ClassVar", "t.ClassVar"))


def _own_fields(cls: type) -> list[_F]:
    out: list[_F] = []
    # not inspect.get_annotations: inspect is what this module avoids importing
    for name, ann in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_classvar(ann):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Spec) else _field(default=value)
        if isinstance(spec.default, (list, dict, set)):
            raise ValueError(  # the error dataclasses raises
                f"mutable default {type(spec.default)} for field {name} is not allowed:"
                " use default_factory"
            )
        if spec.default is _MISSING:
            if isinstance(value, _Spec):
                delattr(cls, name)
        else:
            setattr(cls, name, spec.default)
        out.append(_F(name, ann, spec))
    return out


def _collect(cls: type) -> tuple[_F, ...]:
    merged: dict[str, _F] = {}
    for base in cls.__mro__[-1:0:-1]:
        for f in _FIELDS.get(base, ()):
            merged[f.name] = f
    for f in _own_fields(cls):
        merged[f.name] = f
    return tuple(merged.values())


def _make_init(cls: type, fields: tuple[_F, ...]) -> Any:
    """Compiles ``__init__`` with the signature ``@dataclass`` would generate."""
    env: dict[str, Any] = {"__HAS_FACTORY": _HAS_FACTORY, "__MISSING": _MISSING}
    positional: list[str] = []
    kw_only: list[str] = []
    body: list[str] = []
    annotations: dict[str, Any] = {}
    seen_default = False
    for f in fields:
        s = f.spec
        if s.default_factory is not _MISSING:
            env[f"__factory_{f.name}"] = s.default_factory
            value = f"__factory_{f.name}()"
            if s.init:
                value = f"{value} if {f.name} is __HAS_FACTORY else {f.name}"
        elif s.init:
            value = f.name
        elif s.default is not _MISSING:
            env[f"__default_{f.name}"] = s.default
            value = f"__default_{f.name}"
        else:
            continue  # init=False without a default: left unset, as dataclasses does
        body.append(f"    self.{f.name} = {value}")
        if not s.init:
            continue
        annotations[f.name] = f.ann
        if s.default_factory is not _MISSING:
            param = f"{f.name}=__HAS_FACTORY"
        elif s.default is not _MISSING:
            env[f"__default_{f.name}"] = s.default
            param = f"{f.name}=__default_{f.name}"
        else:
            param = f.name
        if s.kw_only:
            kw_only.append(param)
            continue
        if "=" in param:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        positional.append(param)
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *kw_only] if kw_only else [])])
    src = f"def __init__({params}) -> None:\n" + ("\n".join(body) or "    pass") + "\n"
    exec(src, env)  # our own generated source, as dataclasses does
    fn = env["__init__"]
    annotations["return"] = None
    fn.__annotations__ = annotations
    fn.__qualname__ = f"{cls.__qualname__}.__init__"
    fn.__module__ = cls.__module__
    return fn


class _LazyDataclassAttr:
    """Class attribute ``__dataclass_fields__``/``__dataclass_params__`` built on first access."""

    def __init__(self, owner: type, attr: str) -> None:
        self.owner = owner
        self.attr = attr

    def __get__(self, instance: object, objtype: type | None = None) -> Any:
        shadow = _shadow(self.owner)
        return getattr(shadow, self.attr)


_SHADOWS: dict[type, type] = {}


def _shadow(cls: type) -> type:
    """A plain ``@dataclass`` with the same fields as ``cls`` (for the dataclasses metadata)."""
    shadow = _SHADOWS.get(cls)
    if shadow is None:
        import dataclasses

        ns: dict[str, Any] = {
            "__annotations__": {f.name: f.ann for f in _FIELDS[cls]},
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        }
        for f in _FIELDS[cls]:
            s = f.spec
            ns[f.name] = dataclasses.field(
                default=s.default if s.default is not _MISSING else dataclasses.MISSING,
                default_factory=(
                    s.default_factory if s.default_factory is not _MISSING else dataclasses.MISSING
                ),
                init=s.init,
                repr=s.repr,
                hash=s.hash,
                compare=s.compare,
                metadata=s.metadata,
                kw_only=s.kw_only,
            )
        shadow = dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)(
            type(cls.__name__, (), ns)
        )
        _SHADOWS[cls] = shadow
    return shadow


def _names(cache: dict[type, tuple[str, ...]], cls: type, option: str) -> tuple[str, ...]:
    names = cache.get(cls)
    if names is None:
        if cls in _FIELDS:
            names = tuple(f.name for f in _FIELDS[cls] if getattr(f.spec, option))
        else:  # a subclass made a dataclass by the standard @dataclass (repr/eq=False)
            import dataclasses

            names = tuple(f.name for f in dataclasses.fields(cls) if getattr(f, option))
        cache[cls] = names
    return names


@reprlib.recursive_repr()
def _dc_repr(self: Any) -> str:
    cls = type(self)
    body = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(_REPR, cls, "repr"))
    return f"{cls.__qualname__}({body})"


def _dc_eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: NotImplemented is Any
    names = _names(_EQ, type(self), "compare")
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def field_names(cls: type) -> tuple[str, ...]:
    """Names of the fields of a dataclass, in order (``data`` ones: no ``dataclasses`` import)."""
    if cls in _FIELDS:
        return tuple(f.name for f in _FIELDS[cls])
    import dataclasses

    return tuple(f.name for f in dataclasses.fields(cls))


def _data(cls: Any) -> Any:
    """Like ``@dataclass`` (defaults), with the shared ``__repr__``/``__eq__``."""
    fields = _collect(cls)
    _FIELDS[cls] = fields
    cls.__init__ = _make_init(cls, fields)
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _dc_repr
    cls.__eq__ = _dc_eq
    if "__hash__" not in cls.__dict__:  # as @dataclass: a __hash__ written in the class stays
        cls.__hash__ = None  # eq=True dataclasses are unhashable
    match_args = tuple(f.name for f in fields if f.spec.init and not f.spec.kw_only)
    cls.__match_args__ = match_args  # type: ignore[misc]
    cls.__dataclass_fields__ = _LazyDataclassAttr(cls, "__dataclass_fields__")
    cls.__dataclass_params__ = _LazyDataclassAttr(cls, "__dataclass_params__")
    if cls.__doc__ is None:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields)})"
    return cls


if not TYPE_CHECKING:
    data = _data
    field = _field
