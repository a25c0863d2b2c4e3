"""Run configs: ``CfgVal``, ``runopt`` and ``runopts``.

Private module; the public path is :mod:`torchx_core.specs.api` (and :mod:`torchx_core.specs`).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from enum import Enum

from torchx_core.specs._dc import data
from torchx_core.specs.errors import (
    InvalidRunConfigException,
    RunOptDefinitionError,
    did_you_mean,
)

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    import logging
    from collections.abc import Iterator
    from typing import Any


def _logger() -> logging.Logger:
    import logging  # imported on first use: logging costs import time

    return logging.getLogger(__name__)


def _origin(tp: Any) -> Any:
    """``typing.get_origin`` for the types run options use, without importing typing."""
    if isinstance(tp, types.UnionType):
        return types.UnionType
    return getattr(tp, "__origin__", None)


def _args(tp: Any) -> tuple[Any, ...]:
    return tuple(getattr(tp, "__args__", ()))


def _is_literal(origin: Any) -> bool:
    typing_mod = sys.modules.get("typing")  # Literal types only exist once typing is loaded
    return typing_mod is not None and origin is typing_mod.Literal


def _is_union(origin: Any) -> bool:
    if origin is types.UnionType:
        return True
    typing_mod = sys.modules.get("typing")  # typing.Union only exists once typing is loaded
    return typing_mod is not None and origin is typing_mod.Union


CfgVal = str | int | float | bool | list[str] | dict[str, str] | None

_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})


def _to_snake(name: str) -> str:
    if name.islower():  # fast path: already snake_case (and re is not imported yet)
        return name
    import re

    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class cases:
    """Case conversion of option names (``cluster_name`` <-> ``clusterName``).

    >>> cases.snake_to_camel("hpc_cluster_uuid"), cases.camel_to_snake("hpcClusterUuid")
    ('hpcClusterUuid', 'hpc_cluster_uuid')
    """

    @staticmethod
    def snake_to_camel(name: str) -> str:
        """``snake_case`` -> ``camelCase``."""
        return _to_camel(name)

    @staticmethod
    def camel_to_snake(name: str) -> str:
        """``camelCase`` -> ``snake_case``."""
        return _to_snake(name)


def get_type_name(tp: Any) -> str:
    """Returns the name of a run option type as TorchX does: a class's ``__name__`` (``int``,
    ``list``), otherwise ``str(tp)`` (``list[str]``, ``typing.Union[str, int]``)."""
    if getattr(tp, "__module__", None) != "typing" and hasattr(tp, "__name__"):
        return str(tp.__name__)
    return str(tp)


def _type_label(tp: Any) -> str:
    """The type's name in this package's messages: :func:`get_type_name` without ``typing.``
    (``Union[str, int]``), and ``list[str]`` rather than ``list`` for a generic alias."""
    if _origin(tp) is None and hasattr(tp, "__name__"):
        return str(tp.__name__)
    return str(tp).replace("typing.", "")


def _unwrap_optional(tp: Any) -> Any:
    if _is_union(_origin(tp)):
        args = [a for a in _args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _is_list_of_str(tp: Any) -> bool:
    tp = _unwrap_optional(tp)
    return _origin(tp) is list or tp is list


def _is_dict_of_str(tp: Any) -> bool:
    tp = _unwrap_optional(tp)
    return _origin(tp) is dict or tp is dict


def _wrong_type(
    key: str, tp: Any, val: object, cfg: Mapping[str, Any] | None
) -> InvalidRunConfigException:
    """The error for a run option value of the wrong (non-str) type."""
    return InvalidRunConfigException(
        f"Run option: {key}, must be of type: {_type_label(tp)},"
        f" but was: {val!r} ({type(val).__name__})",
        key,
        cfg,
    )


def _split_items(value: str) -> list[str]:
    return [v for v in value.replace(";", ",").split(",") if v != ""]


def _cast_choice(tp: Any, value: str, where: str, key: str) -> CfgVal:
    """The ``Literal`` choice or ``Enum`` member of ``tp`` that ``value`` names."""
    if _is_literal(_origin(tp)):
        for choice in _args(tp):
            if str(choice) == value:
                return choice  # type: ignore[no-any-return]  # Literal args are untyped
        choices = ", ".join(repr(c) for c in _args(tp))
    else:
        for member in tp:
            if value in (member.name, str(member.value)):
                return member  # type: ignore[no-any-return]  # an Enum member (of Any tp)
        choices = ", ".join(repr(m.name) for m in tp)
    raise InvalidRunConfigException(
        f"{where}{value!r} is not one of the valid choices: {choices}", key, None
    )


def _cast_bool(value: str, where: str, key: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise InvalidRunConfigException(
        f"{where}{value!r} is not a bool; use one of true/false (also 1/0, yes/no, on/off)",
        key,
        None,
    )


def _cast_dict(value: str, where: str, key: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in _split_items(value):
        k, sep, v = item.partition(":")
        if not sep or not k:
            raise InvalidRunConfigException(
                f"{where}{item!r} in {value!r} is not a 'key:value' pair;"
                " write dict options as 'k1:v1,k2:v2' (or 'k1:v1;k2:v2')",
                key,
                None,
            )
        out[k] = v
    return out


def _cast(opt_type: Any, value: str, key: str) -> CfgVal:
    """Casts a string to ``opt_type``; raises InvalidRunConfigException naming ``key``."""
    tp = _unwrap_optional(opt_type)
    where = f"run option {key!r}: " if key else ""
    if not isinstance(value, str):
        raise InvalidRunConfigException(
            f"{where}expected a string to cast to {_type_label(tp)}, got {value!r}", key, None
        )
    if _is_literal(_origin(tp)) or (isinstance(tp, type) and issubclass(tp, Enum)):
        return _cast_choice(tp, value, where, key)
    if tp is bool:
        return _cast_bool(value, where, key)
    if _is_list_of_str(tp):
        return _split_items(value)
    if _is_dict_of_str(tp):
        return _cast_dict(value, where, key)
    if tp is str:
        return value
    try:
        converted: CfgVal = tp(value.strip() if tp in (int, float) else value)
        return converted
    except (TypeError, ValueError) as e:
        raise InvalidRunConfigException(
            f"{where}cannot cast {value!r} to {_type_label(tp)}; expected a valid"
            f" {_type_label(tp)} literal ({e})",
            key,
            None,
        ) from None


@data
class runopt:
    """Metadata for a single scheduler run option.

    Args:
        default: default value (None if none)
        opt_type: the option type (``str``, ``int``, ``float``, ``bool``, ``list[str]``,
            ``dict[str, str]``)
        is_required: whether the option must be given
        help: help text
    """

    default: CfgVal
    opt_type: type[CfgVal]
    is_required: bool
    help: str

    @property
    def is_type_list_of_str(self) -> bool:
        """True if the option type is ``list[str]``/``List[str]``."""
        return _is_list_of_str(self.opt_type)

    @property
    def is_type_dict_of_str(self) -> bool:
        """True if the option type is ``dict[str, str]``/``Dict[str, str]``."""
        return _is_dict_of_str(self.opt_type)

    def cast_to_type(self, value: str) -> CfgVal:
        """Casts the string form of a value to the type of this option.

        1. ``opt_type=str``, ``"foo"`` -> ``"foo"``
        2. ``opt_type=bool``, ``"True"``/``"False"`` -> ``True``/``False``
        3. ``opt_type=int``, ``"1"`` -> ``1``
        4. ``opt_type=float``, ``"1.1"`` -> ``1.1``
        5. ``opt_type=list[str]``, ``"a,b,c"`` or ``"a;b;c"`` -> ``["a", "b", "c"]``
        6. ``opt_type=dict[str,str]``, ``"a:1,b:2"`` or ``"a:1;b:2"`` -> ``{"a": "1", "b": "2"}``

        dict parsing uses ``:`` as the kv separator because ``=`` separates the top-level
        ``key=value`` pairs of a run config string.

        Raises:
            InvalidRunConfigException: the value cannot be cast
        """
        return _cast(self.opt_type, value, "")


class runopts:
    """Schema for scheduler run configuration.

    Holds accepted config keys, defaults, and help strings. Constructed by
    ``Scheduler.run_opts()`` and validated at submit time.

    >>> opts = runopts()
    >>> opts.add("cluster_id", type_=int, help="cluster to submit the job", required=True)
    >>> opts.add("priority", type_=float, default=0.5, help="job priority")
    >>> opts.cfg_from_str("cluster_id=3,priority=0.9")
    {'cluster_id': 3, 'priority': 0.9}

    A key none of the options names is refused wherever run options enter (``Scheduler.
    submit_dryrun``, the CLI's ``-cfg``, ``.torchxconfig``, the engine adapters), with a close
    match suggested; a scheduler whose backend really takes options it does not declare sets
    :attr:`free_form` on its runopts, and they are then passed through (with a warning).
    """

    #: the scheduler takes run options it does not declare (passed through to its backend)
    free_form: bool = False

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}

    def __iter__(self) -> Iterator[tuple[str, runopt]]:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._canonical(name) is not None

    def __getitem__(self, key: str) -> runopt:
        opt = self.get(key)
        if opt is None:
            raise InvalidRunConfigException(
                f"unknown run option {key!r}.{did_you_mean(key, self._opts)}"
                f" Valid options: {', '.join(self._opts) or '<none>'}",
                key,
                None,
            )
        return opt

    def __eq__(self, other: object) -> bool:
        return isinstance(other, runopts) and self._opts == other._opts

    @staticmethod
    def is_type(obj: CfgVal, tp: type[CfgVal]) -> bool:
        """Like ``isinstance()`` but supports generic types (e.g. ``list[str]``); a ``bool`` is
        not an ``int`` here (``priority=True`` is a mistake, not priority 1)."""
        origin = _origin(tp)
        if isinstance(obj, bool) and tp is not bool and origin is None:
            return False
        if origin is None:
            try:
                return isinstance(obj, tp)
            except TypeError:
                return False
        args = _args(tp)
        if _is_union(origin):
            return any(runopts.is_type(obj, a) for a in args)
        if origin is list:
            return isinstance(obj, list) and all(
                runopts.is_type(e, args[0]) if args else True for e in obj
            )
        if origin is dict:
            return isinstance(obj, dict) and all(
                (runopts.is_type(k, args[0]) and runopts.is_type(v, args[1])) if args else True
                for k, v in obj.items()
            )
        if _is_literal(origin):
            return any(obj == a and type(obj) is type(a) for a in args)
        return False

    def _canonical(self, name: str) -> str | None:
        if name in self._opts:
            return name
        snake = _to_snake(name)
        if snake in self._opts:
            return snake
        for spelling in (snake.replace("_", "-"), name.replace("-", "_")):
            if spelling in self._opts:  # sbatch-style `mail-user` is `mail_user` in Python
                return spelling
        return None

    def get(self, name: str) -> runopt | None:
        """Returns the registered option, or None.

        Accepts camelCase names (e.g. ``"clusterName"`` resolves ``"cluster_name"``).
        """
        key = self._canonical(name) if isinstance(name, str) else None
        return self._opts[key] if key is not None else None

    def add(
        self,
        cfg_key: str,
        type_: type[CfgVal],
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Registers a config option. Required options must not have a default.

        An empty list as the default of a ``dict`` option (TorchX accepts one) is stored as
        ``{}``.

        Raises:
            RunOptDefinitionError: a required option has a default, or the default has the
                wrong type
        """
        if required and default is not None:
            raise RunOptDefinitionError(
                f"Required option: {cfg_key} must not specify default value. Given: {default}"
            )
        if default == [] and getattr(type_, "__origin__", None) is dict:
            # TorchX's definitions write `default=[]` for an empty dict option: kept as {} (an
            # empty list would break every cfg that omits the option)
            default = {}
        if default is not None and not runopts.is_type(default, type_):
            raise RunOptDefinitionError(
                f"Option: {cfg_key}, must be of type: {_type_label(type_)}."
                f" Given: {default!r} ({type(default).__name__})"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def update(self, other: runopts) -> None:
        """Adds (or replaces) the options of ``other`` (free-form if either is)."""
        self._opts.update(other._opts)
        self.free_form = self.free_form or other.free_form

    def __or__(self, other: runopts) -> runopts:
        """A new runopts with the options of both (``other``'s win on a shared name).

        >>> a, b = runopts(), runopts()
        >>> a.add("foo", type_=str, default="a", help="foo option")
        >>> b.add("bar", type_=int, default=1, help="bar option")
        >>> sorted(name for name, _ in a | b)
        ['bar', 'foo']
        """
        if not isinstance(other, runopts):
            return NotImplemented
        merged = runopts()
        merged.update(self)
        merged.update(other)
        return merged

    def unknown_message(self, key: str) -> str:
        """The message for a run option ``key`` none of these options names (close matches
        suggested, the valid names listed): one wording at every entry point."""
        return self._unknown_msg(key)

    def _unknown_msg(self, key: str) -> str:
        return (
            f"unknown run option {key!r}.{did_you_mean(key, self._opts)}"
            f" Valid options: {', '.join(self._opts) or '<none>'}"
        )

    def resolve(self, cfg: Mapping[str, CfgVal], *, strict: bool = False) -> dict[str, CfgVal]:
        """Validates ``cfg`` against registered options, filling defaults.

        Accepts camelCase keys (the result uses the registered names). Keys that are not
        registered are kept as given (TorchX behaviour) with a logged warning that suggests a
        close match; with ``strict=True`` they are an error instead.

        Raises:
            InvalidRunConfigException: required options are missing, values have the wrong
                type, or (``strict``) keys are unknown. All problems are reported at once.
        """
        if not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                f"a run config must be a mapping of option name to value, got {cfg!r}", "", None
            )
        given: dict[str, CfgVal] = {}
        unknown: dict[str, CfgVal] = {}
        for key, val in cfg.items():
            canon = self._canonical(key) if isinstance(key, str) else None
            if canon is None:
                unknown[key] = val
            elif canon not in given or key == canon:
                given[canon] = val
        problems: list[tuple[str, str]] = []
        resolved: dict[str, CfgVal] = {}
        for name, opt in self._opts.items():
            val = given.get(name)
            if val is None:
                if opt.is_required:
                    problems.append(
                        (
                            name,
                            (
                                f"Required run option: {name}, must be provided and not `None`"
                                f" ({_type_label(opt.opt_type)}: {opt.help})"
                            ),
                        )
                    )
                resolved[name] = opt.default
                continue
            if (
                _unwrap_optional(opt.opt_type) is float
                and isinstance(val, int)
                and not isinstance(val, bool)
            ):
                val = float(val)
            if not runopts.is_type(val, opt.opt_type):
                problems.append(
                    (
                        name,
                        (
                            f"Run option: {name}, must be of type: {_type_label(opt.opt_type)},"
                            f" but was: {val!r} ({type(val).__name__})"
                        ),
                    )
                )
            resolved[name] = val
        for key, val in unknown.items():
            if strict:
                problems.append((str(key), self._unknown_msg(str(key))))
            else:
                _logger().warning("%s; passing it through unchecked", self._unknown_msg(str(key)))
                resolved[key] = val
        if problems:
            raise InvalidRunConfigException("; ".join(p for _, p in problems), problems[0][0], cfg)
        return resolved

    def cfg_from_str(self, cfg_str: str, *, strict: bool = False) -> dict[str, CfgVal]:
        """Parses a ``"k1=v1,k2=v2"`` string into a typed cfg map.

        Values are cast to the registered types. Unknown keys are ignored (and logged with a
        close-match suggestion; TorchX behaviour), or with ``strict=True`` (the CLI's ``-cfg``
        unless :attr:`free_form`) refused. Defaults and required options are not checked: call
        ``opts.resolve(opts.cfg_from_str(s))`` for that. ``","`` or ``";"`` delimit pairs;
        list values may use either too, and the last delimiter before a ``key=`` separates
        pairs::

            opts.cfg_from_str("FOO=v1;v2,BAR=v3") == {"FOO": ["v1", "v2"], "BAR": "v3"}

        Raises:
            InvalidRunConfigException: the string is malformed, a value cannot be cast or
                (``strict``) a key is unknown
        """
        if not isinstance(cfg_str, str):
            raise InvalidRunConfigException(
                f"cfg_str must be a string like 'key1=v1,key2=v2', got {cfg_str!r}", "", None
            )
        cfg: dict[str, CfgVal] = {}
        pairs = _split_cfg_str(cfg_str)
        unknown = [key for key in pairs if self._canonical(key) is None]
        if strict and unknown:
            raise InvalidRunConfigException(
                f"run config {cfg_str!r}: " + "; ".join(self._unknown_msg(k) for k in unknown),
                unknown[0],
                None,
            )
        for key, raw in pairs.items():
            canon = self._canonical(key)
            if canon is None:
                _logger().warning("%s; ignoring it", self._unknown_msg(key))
                continue
            try:
                cfg[canon] = _cast(self._opts[canon].opt_type, raw, canon)
            except InvalidRunConfigException as e:
                reason = str(e).split(". Given: ")[0]
                raise InvalidRunConfigException(
                    f"run config {cfg_str!r}: {reason}", canon, None
                ) from None
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> dict[str, CfgVal]:
        """Converts a JSON object string to a valid cfg for this runopts object.

        Unknown keys are ignored (and logged). String values are cast to the option type.

        Raises:
            InvalidRunConfigException: not a JSON object, or a value has the wrong type
        """
        try:
            import json

            data = json.loads(json_repr)
        except (TypeError, ValueError) as e:
            raise InvalidRunConfigException(
                f"run config {json_repr!r} is not valid JSON ({e}); expected an object like"
                ' {"key": "value"}',
                "",
                None,
            ) from None
        if not isinstance(data, dict):
            raise InvalidRunConfigException(
                f'run config JSON {json_repr!r} must be an object like {{"key": "value"}},'
                f" got a {type(data).__name__}",
                "",
                None,
            )
        cfg: dict[str, CfgVal] = {}
        for key, val in data.items():
            canon = self._canonical(key)
            if canon is None:
                _logger().warning("%s; ignoring it", self._unknown_msg(key))
                continue
            try:
                cfg[canon] = self._coerce_json(canon, val)
            except InvalidRunConfigException as e:
                reason = str(e).split(". Given: ")[0]
                raise InvalidRunConfigException(
                    f"run config JSON {json_repr!r}: {reason}", canon, None
                ) from None
        return cfg

    def _coerce_json(self, key: str, val: Any) -> CfgVal:
        opt = self._opts[key]
        tp = _unwrap_optional(opt.opt_type)
        if val is None:
            return None
        if opt.is_type_list_of_str and isinstance(val, list):
            if all(isinstance(v, (str, int, float, bool)) for v in val):
                return [str(v) for v in val]
        elif opt.is_type_dict_of_str and isinstance(val, dict):
            if all(isinstance(v, (str, int, float, bool)) for v in val.values()):
                return {str(k): str(v) for k, v in val.items()}
        elif tp is float and isinstance(val, (int, float)) and not isinstance(val, bool):
            return float(val)
        elif runopts.is_type(val, tp):
            checked: CfgVal = val
            return checked
        if isinstance(val, str):
            return _cast(opt.opt_type, val, key)
        raise _wrong_type(key, opt.opt_type, val, None)

    def __repr__(self) -> str:
        required = [(k, o) for k, o in self._opts.items() if o.is_required]
        optional = [(k, o) for k, o in self._opts.items() if not o.is_required]
        usage = ",".join(
            [f"{k}={k.upper()}" for k, _ in required] + [f"[{k}={k.upper()}]" for k, _ in optional]
        )
        lines = ["    usage:", f"        {usage}", ""]
        if required:
            lines.append("    required arguments:")
            for k, o in required:
                lines += [
                    f"        {k}={k.upper()} ({_type_label(o.opt_type)})",
                    f"            {o.help}",
                ]
            lines.append("")
        if optional:
            lines.append("    optional arguments:")
            for k, o in optional:
                lines += [
                    f"        {k}={k.upper()} ({_type_label(o.opt_type)}, {o.default})",
                    f"            {o.help}",
                ]
            lines.append("")
        return "\n".join(lines)

    __str__ = __repr__


def _split_cfg_str(cfg_str: str) -> dict[str, str]:
    """Splits ``"k1=v1,v2;k2=v3"`` into ``{"k1": "v1,v2", "k2": "v3"}``.

    The last ``,``/``;`` before each ``key=`` delimits pairs.
    """
    text = cfg_str.strip()
    if not text:
        return {}
    parts = text.split("=")
    if len(parts) < 2:
        raise InvalidRunConfigException(
            f"run config {cfg_str!r} has no 'key=value' pair; write 'key1=v1,key2=v2'", "", None
        )
    out: dict[str, str] = {}
    key = parts[0].strip()
    for i, middle in enumerate(parts[1:], start=1):
        if i == len(parts) - 1:
            value, next_key = middle.rstrip(",;"), None
        else:
            cut = max(middle.rfind(","), middle.rfind(";"))
            if cut < 0:
                raise InvalidRunConfigException(
                    f"run config {cfg_str!r}: cannot tell where the value of {key!r} ends in"
                    f" {middle!r}; separate pairs with ',' or ';' (values may not contain '=')",
                    key,
                    None,
                )
            value, next_key = middle[:cut], middle[cut + 1 :].strip()
        import re

        if not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", key):
            raise InvalidRunConfigException(
                f"run config {cfg_str!r}: {key!r} is not a valid option name"
                " (letters, digits, '_', '.', '-'); write 'key1=v1,key2=v2'",
                key,
                None,
            )
        if key in out:
            raise InvalidRunConfigException(
                f"run config {cfg_str!r}: option {key!r} is given twice; use each option once",
                key,
                None,
            )
        out[key] = value
        if next_key is not None:
            key = next_key
    return out
