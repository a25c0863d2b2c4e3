"""Typed scheduler run options: :py:class:`StructuredOpts`.

Re-exported as ``torchx_core.schedulers.api.StructuredOpts`` (TorchX's public path).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from types import GenericAlias

from torchx_core.specs._runopts import (
    CfgVal,
    _cast,
    _to_camel,
    _to_snake,
    _type_label,
    _unwrap_optional,
    _wrong_type,
    runopts,
)
from torchx_core.specs.errors import InvalidRunConfigException, RunOptDefinitionError, did_you_mean

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from typing_extensions import Self

_CACHE_ATTR = "_torchx_structured_fields"

_SIMPLE_TYPES: dict[str, object] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list[str]": list[str],
    "List[str]": list[str],
    "dict[str, str]": dict[str, str],
    "Dict[str, str]": dict[str, str],
}


@dataclass(frozen=True)
class _OptField:
    name: str
    tp: Any  # the option type with Optional removed
    required: bool
    default: Any  # dataclasses.MISSING if required
    default_factory: Any  # dataclasses.MISSING if none
    help: str
    nested: type[StructuredOpts] | None
    key: str  # the option's name in a cfg: the field's name, or its metadata["cfg_key"]

    def make_default(self) -> Any:
        if self.default_factory is not dataclasses.MISSING:
            return self.default_factory()
        return None if self.default is dataclasses.MISSING else self.default


def _field_docstrings(cls: type) -> dict[str, str]:
    """Reads attribute docstrings (a string literal right after ``name: type``) from the source."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        if not tree.body or not isinstance(tree.body[0], ast.ClassDef):
            continue
        body = tree.body[0].body
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _resolve_hints(cls: type) -> dict[str, Any]:
    import typing  # on first use only

    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward refs: fall back per field below
        hints: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            tp = f.type
            if isinstance(tp, str):
                tp = _SIMPLE_TYPES.get(tp.replace(" | None", "").strip(), str)
            hints[f.name] = tp
        return hints


def _is_nested(tp: Any) -> bool:
    # on Python 3.10 a parameterized builtin (``list[str]``) passes isinstance(tp, type), then
    # makes issubclass raise TypeError
    return (
        isinstance(tp, type) and not isinstance(tp, GenericAlias) and issubclass(tp, StructuredOpts)
    )


class StructuredOpts(Mapping[str, CfgVal]):
    """Base class for typed scheduler configuration options.

    Subclasses are ``@dataclass`` decorated; each field is a run option:

    * ``as_runopts()`` builds :py:class:`runopts` from the fields,
    * ``from_cfg(cfg)`` parses a raw config dict into a typed instance,
    * snake_case field names also accept camelCase aliases (``hpcIdentity``); a field's
      ``metadata={"cfg_key": "mail-user"}`` names its option instead (for keys that cannot be
      field names),
    * help text comes from ``field(metadata={"help": ...})`` or from the string literal right
      below the field (read lazily from the source),
    * nested ``StructuredOpts`` fields are flattened with dot-prefixed keys (``k8s.context``).

    An instance is a read-only mapping of its option values, nested ones flattened
    (``opts["cluster_name"]``, ``opts.get("clusterName")``, ``list(opts)`` ->
    ``[..., "k8s.context"]``); ``opts_a | opts_b`` merges two into a cfg dict.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class MyOpts(StructuredOpts):
    ...     cluster_name: str
    ...     num_retries: int = 3
    >>> MyOpts.from_cfg({"clusterName": "a", "num_retries": "5"})
    MyOpts(cluster_name='a', num_retries=5)
    """

    @classmethod
    def _opt_fields(cls) -> list[_OptField]:
        cached: list[_OptField] | None = cls.__dict__.get(_CACHE_ATTR)
        if cached is not None:
            return cached
        if not dataclasses.is_dataclass(cls):
            raise RunOptDefinitionError(
                f"{cls.__name__} must be decorated with @dataclass to be used as StructuredOpts"
            )
        hints = _resolve_hints(cls)
        docs = _field_docstrings(cls)
        out: list[_OptField] = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            raw_tp = hints.get(f.name, str)
            tp = _unwrap_optional(raw_tp)
            has_default = f.default is not dataclasses.MISSING or (
                f.default_factory is not dataclasses.MISSING
            )
            help_text = str(f.metadata.get("help") or docs.get(f.name) or f.name)
            out.append(
                _OptField(
                    name=f.name,
                    tp=tp,
                    required=not has_default,
                    default=f.default,
                    default_factory=f.default_factory,
                    help=help_text,
                    nested=tp if _is_nested(tp) else None,
                    key=str(f.metadata.get("cfg_key") or f.name),
                )
            )
        setattr(cls, _CACHE_ATTR, out)
        return out

    @classmethod
    def _field(cls, key: str) -> _OptField | None:
        """The field a cfg key names: its ``cfg_key``, its name, or its name in camelCase."""
        fields = cls._opt_fields()
        for f in fields:
            if key in (f.key, f.name):
                return f
        snake = _to_snake(key)
        return next((f for f in fields if snake in (f.key, f.name)), None)

    @classmethod
    def get_docstrings(cls) -> dict[str, str]:
        """Returns ``{option key: help text}``; nested options are flattened (``k8s.context``)."""
        docs: dict[str, str] = {}
        for f in cls._opt_fields():
            docs[f.key] = f.help
            if f.nested is not None:
                docs.update({f"{f.key}.{k}": v for k, v in f.nested.get_docstrings().items()})
        return docs

    @classmethod
    def as_runopts(cls) -> runopts:
        """Build runopts from dataclass fields.

        Nested StructuredOpts fields are flattened with dot-prefixed keys (e.g., field
        ``k8s: K8sOpts`` with sub-field ``context`` becomes ``k8s.context``).
        """
        opts = runopts()
        for f in cls._opt_fields():
            if f.nested is not None:
                for key, sub in f.nested.as_runopts():
                    opts.add(f"{f.key}.{key}", sub.opt_type, sub.help, sub.default, sub.is_required)
                continue
            default = None if f.required else f.make_default()
            if f.tp is float and isinstance(default, int) and not isinstance(default, bool):
                default = float(default)
            opts.add(f.key, f.tp, f.help, default=default, required=f.required)
        return opts

    @classmethod
    def _valid_keys(cls) -> list[str]:
        return [k for k, _ in cls.as_runopts()]

    @classmethod
    def _coerce(cls, f: _OptField, key: str, val: Any, cfg: Mapping[str, Any]) -> Any:
        if runopts.is_type(val, f.tp):
            return val
        if f.tp is float and isinstance(val, int) and not isinstance(val, bool):
            return float(val)
        if isinstance(val, str):
            return _cast(f.tp, val, key)
        raise _wrong_type(key, f.tp, val, cfg)

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, CfgVal]) -> Self:
        """Create an instance from a raw config dict.

        Fields are snake_case but also accept camelCase aliases (e.g., ``hpc_identity`` can be
        set via ``hpcIdentity``). Nested StructuredOpts fields are reconstructed from
        dot-prefixed keys (e.g., ``k8s.context``). String values are cast to the field type.

        Raises:
            InvalidRunConfigException: unknown keys (with a "did you mean" suggestion), missing
                required options, or values of the wrong type (all reported at once)
        """
        return cls._from_cfg(cfg, prefix="", full_cfg=cfg)

    @classmethod
    def _sort_keys(
        cls, cfg: Mapping[str, Any], fields: Mapping[str, _OptField]
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
        """Splits ``cfg`` into ``({field: value}, {nested field: its cfg}, unknown keys)``."""
        flat: dict[str, Any] = {}
        nested_cfg: dict[str, dict[str, Any]] = {n: {} for n, f in fields.items() if f.nested}
        unknown: list[str] = []
        for key, val in cfg.items():
            if not isinstance(key, str):
                unknown.append(repr(key))
                continue
            head, dot, rest = key.partition(".")
            f = cls._field(head if dot else key)
            if dot:
                if f is not None and f.nested is not None and rest:
                    nested_cfg[f.name][rest] = val
                else:
                    unknown.append(key)
                continue
            if f is not None and f.nested is None:
                if f.name not in flat or key in (f.key, f.name):  # the exact key wins
                    flat[f.name] = val
            else:
                unknown.append(key)
        return flat, nested_cfg, unknown

    @classmethod
    def _from_cfg(cls, cfg: Mapping[str, Any], prefix: str, full_cfg: Mapping[str, Any]) -> Self:
        if not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                f"{cls.__name__}.from_cfg expects a mapping of option name to value, got {cfg!r}",
                "",
                None,
            )
        fields = {f.name: f for f in cls._opt_fields()}
        flat, nested_cfg, unknown = cls._sort_keys(cfg, fields)
        problems: list[str] = []
        if unknown:
            valid = cls._valid_keys()
            for key in unknown:
                problems.append(
                    f"unknown option {prefix}{key!s} for {cls.__name__}.{did_you_mean(key, valid)}"
                    f" Valid options: {', '.join(prefix + v for v in valid)}"
                )
        kwargs: dict[str, Any] = {}
        for name, f in fields.items():
            key = f"{prefix}{f.key}"
            try:
                if f.nested is not None:
                    kwargs[name] = f.nested._from_cfg(nested_cfg[name], f"{key}.", full_cfg)
                    continue
                val = flat.get(name)
                if val is None:
                    if f.required:
                        problems.append(
                            f"Required run option: {key} ({_type_label(f.tp)}: {f.help}),"
                            f" must be provided and not `None` (camelCase {_to_camel(name)!r} also"
                            " accepted)"
                        )
                        continue
                    kwargs[name] = f.make_default()
                else:
                    kwargs[name] = cls._coerce(f, key, val, full_cfg)
            except InvalidRunConfigException as e:
                problems.append(str(e).split(". Given: ")[0])
        if problems:
            raise InvalidRunConfigException("; ".join(problems), prefix.rstrip("."), full_cfg)
        return cls(**kwargs)

    # --- read-only Mapping over the option values (nested options flattened) -----------------
    def __getitem__(self, key: str) -> CfgVal:
        if not isinstance(key, str):
            raise KeyError(key)
        head, dot, rest = key.partition(".")
        f = type(self)._field(head if dot else key)
        if f is None:
            raise KeyError(key)
        value = getattr(self, f.name)
        if dot:
            if not isinstance(value, StructuredOpts):
                raise KeyError(key)
            return value[rest]
        plain: CfgVal = value
        return plain

    def __iter__(self) -> Iterator[str]:
        keys: list[str] = []
        for f in type(self)._opt_fields():
            value = getattr(self, f.name)
            if f.nested is None:
                keys.append(f.key)
            elif isinstance(value, StructuredOpts):  # an unset (None) group has no options
                keys.extend(f"{f.key}.{k}" for k in value)
        return iter(keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __or__(self, other: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        """A cfg dict of both options' values (``other``'s win), as TorchX merges them.

        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class A(StructuredOpts):
        ...     foo: str = "a"
        ...     bar: int = 1
        >>> @dataclass
        ... class B(StructuredOpts):
        ...     foo: str = "b"
        >>> A() | B()
        {'foo': 'b', 'bar': 1}
        """
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**dict(self), **dict(other)}
