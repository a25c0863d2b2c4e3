"""``.torchxconfig``: INI defaults for scheduler run options, components and CLI subcommands.

Where the files are read from (first found wins for each key)::

    1. options given explicitly (``-cfg`` on the CLI, ``cfg=`` in Python)
    2. if ``$TORCHXCONFIG`` is set: only that file
    3. otherwise ``$HOME/.torchxconfig``, then ``./.torchxconfig``
    4. the defaults in code

Sections::

    [local_cwd]                  # run options of a scheduler (``torchx runopts local_cwd``)
    log_dir = /tmp/logs

    [component:dist.ddp]         # defaults for a component's arguments
    j = 2x2

    [cli:run]                    # defaults for ``torchx run`` options (+ ``component``)
    scheduler = local_cwd
    component = utils.echo

Values: booleans as ``True``/``False``; lists as ``a;b;c``; maps as ``k1:v1;k2:v2``; ``None``
for "unset". Unknown run option names are skipped with a warning naming the valid ones.

The CLI reads these files automatically; in Python call :func:`apply` (``get_runner`` loads the
``[component:*]`` sections).
"""

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from torchx_core.settings import ENV_TORCHXCONFIG
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    import configparser

    from torchx_core.specs import CfgVal, runopt, runopts

__all__ = [
    "CONFIG_FILE",
    "CONFIG_PREFIX_DELIM",
    "ENV_TORCHXCONFIG",
    "ConfigError",
    "apply",
    "dump",
    "find_configs",
    "get_config",
    "get_configs",
    "load",
    "load_sections",
]

logger: logging.Logger = logging.getLogger(__name__)

CONFIG_FILE = ".torchxconfig"
CONFIG_PREFIX_DELIM = ":"
_NONE = "None"
#: the directories searched for ``.torchxconfig``, unless ``$TORCHXCONFIG`` names one file;
#: ``~`` and ``.`` are resolved when searched (the home and working directory of that moment)
DEFAULT_CONFIG_DIRS: list[str] = ["~", "."]


class ConfigError(TorchXError, ValueError):
    """A ``.torchxconfig`` file is missing (``$TORCHXCONFIG``), unreadable or malformed."""


class ConfigFileNotFoundError(ConfigError, FileNotFoundError):
    """``$TORCHXCONFIG`` names a file that does not exist (a ``FileNotFoundError``, as in
    TorchX)."""


def _default_dirs() -> list[str]:
    return [os.getcwd() if d == "." else os.path.expanduser(d) for d in DEFAULT_CONFIG_DIRS]


def get_scheduler_factories() -> dict[str, Any]:
    """Scheduler name -> factory of every available scheduler (what ``dump`` and ``load`` use)."""
    from torchx_core.schedulers import get_scheduler_factories as factories

    return factories()


def find_configs(dirs: Iterable[str] | None = None) -> list[str]:
    """Returns the ``.torchxconfig`` files to read, highest precedence first.

    If ``$TORCHXCONFIG`` is set, only that file (which must exist; set but empty: no file at
    all). Otherwise the readable ``.torchxconfig`` files in ``dirs`` (default
    :data:`DEFAULT_CONFIG_DIRS`: ``[$HOME, cwd]``).

    Raises:
        ConfigFileNotFoundError: ``$TORCHXCONFIG`` names a file that does not exist.
    """
    env = os.environ.get(ENV_TORCHXCONFIG)
    if env is not None:
        if not env:
            return []
        if not os.path.isfile(env):
            raise ConfigFileNotFoundError(
                f"`{ENV_TORCHXCONFIG}={env}` does not exist or is not a file; point it at a"
                f" `{CONFIG_FILE}` file or unset it"
            )
        return [env]
    found: list[str] = []
    seen: set[str] = set()
    for d in dirs or _default_dirs():
        path = os.path.join(d, CONFIG_FILE)
        real = os.path.realpath(path)
        if real in seen:
            continue
        if os.access(path, os.R_OK) and os.path.isfile(path):
            found.append(path)
            seen.add(real)
    return found


def _parser() -> configparser.ConfigParser:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    return parser


def _read(path: str) -> configparser.ConfigParser:
    import configparser

    parser = _parser()
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except configparser.Error as e:
        raise ConfigError(f"malformed config file {path}: {e}") from e
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from e
    return parser


def load_sections(prefix: str, dirs: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
    """Loads every ``[{prefix}:{name}]`` section: ``{name: {key: value}}`` (raw strings).

    Earlier files win key by key (``$HOME`` before cwd).

    Args:
        prefix: section prefix, e.g. ``"component"`` or ``"cli"``
        dirs: directories to look in (default ``[$HOME, cwd]``)
    """
    sections: dict[str, dict[str, str]] = {}
    for path in find_configs(dirs):
        parser = _read(path)
        for section_name in parser.sections():
            head, sep, name = section_name.partition(CONFIG_PREFIX_DELIM)
            if not sep or head != prefix or not name:
                continue
            section = sections.setdefault(name, {})
            for key, value in parser.items(section_name):
                section.setdefault(key, value)
    return sections


def get_configs(prefix: str, name: str, dirs: Iterable[str] | None = None) -> dict[str, str]:
    """Returns the ``[{prefix}:{name}]`` section as a dict (empty if absent)."""
    return load_sections(prefix, dirs).get(name, {})


def get_config(prefix: str, name: str, key: str, dirs: Iterable[str] | None = None) -> str | None:
    """Returns ``key`` of section ``[{prefix}:{name}]`` or ``None``."""
    return get_configs(prefix, name, dirs).get(key)


def _type_kind(opt_type: Any) -> str:
    origin = typing.get_origin(opt_type) or opt_type
    if origin is bool:
        return "bool"
    if origin in (list, tuple):
        return "list"
    if origin is dict:
        return "dict"
    if origin is int:
        return "int"
    if origin is float:
        return "float"
    return "str"


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_value(value: str, opt_type: Any, name: str = "") -> CfgVal:
    """Converts a config-file string to the run option's type.

    Raises:
        ConfigError: the value does not parse as ``opt_type``.
    """
    kind = _type_kind(opt_type)
    try:
        if kind == "bool":
            low = value.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError("expected one of True/False/1/0/yes/no")
        if kind == "list":
            return [v.strip() for v in value.replace(",", ";").split(";") if v.strip()]
        if kind == "dict":
            out: dict[str, str] = {}
            for item in value.replace(",", ";").split(";"):
                if not item.strip():
                    continue
                k, sep, v = item.partition(":")
                if not sep:
                    k, sep, v = item.partition("=")
                if not sep:
                    raise ValueError(f"`{item}` is not `key:value`")
                out[k.strip()] = v.strip()
            return out
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        return value
    except ValueError as e:
        raise ConfigError(f"config option `{name}` = {value!r} is not a valid {kind}: {e}") from e


def _scheduler_run_opts(scheduler: str) -> runopts:
    """Raises UnknownSchedulerException for a scheduler that does not exist."""
    factory = get_scheduler_factories().get(scheduler)
    if factory is None:
        from torchx_core.schedulers import get_scheduler_factory

        factory = get_scheduler_factory(scheduler)  # raises, listing the valid names
    return factory("_").run_opts()


def load(
    scheduler: str,
    f: TextIO,
    cfg: dict[str, CfgVal],
    run_opts: runopts | None = None,
    source: str = "<config>",
) -> None:
    """Loads section ``[{scheduler}]`` of INI file ``f`` into ``cfg`` without overriding keys.

    Args:
        scheduler: the scheduler name (section name)
        f: the open config file
        cfg: the run config to fill in place
        run_opts: the scheduler's run options (looked up from the registry if not given)
        source: file name for messages
    """
    import configparser

    parser = _parser()
    try:
        parser.read_file(f)
    except configparser.Error as e:
        raise ConfigError(f"malformed config file {source}: {e}") from e
    _load_section(parser, scheduler, cfg, run_opts, source)


def _load_section(
    parser: configparser.ConfigParser,
    scheduler: str,
    cfg: dict[str, CfgVal],
    run_opts: runopts | None,
    source: str,
) -> None:
    if not parser.has_section(scheduler):
        return
    opts = run_opts if run_opts is not None else _scheduler_run_opts(scheduler)
    for name, value in parser.items(scheduler):
        if name in cfg:
            continue
        opt: runopt | None = opts.get(name)
        if opt is None and not opts.free_form:
            # an unknown key is an error at every entry point (as `-cfg` and the Python API)
            raise ConfigError(
                f"{source}: [{scheduler}] {name} = {value}: {opts.unknown_message(name)}."
                " Fix the name or remove the line"
            )
        if opt is None:
            logger.warning(
                "%s: `%s` in section [%s] is not a declared run option of `%s` (free-form:"
                " passed through unchecked)",
                source,
                name,
                scheduler,
                scheduler,
            )
            cfg[name] = value
            continue
        cfg[name] = None if value == _NONE else parse_value(value, opt.opt_type, name)


def apply(
    scheduler: str,
    cfg: dict[str, CfgVal],
    dirs: Iterable[str] | None = None,
    run_opts: runopts | None = None,
) -> None:
    """Fills ``cfg`` (in place) with the ``[{scheduler}]`` options of the config files.

    Keys already in ``cfg`` win; then files in precedence order (see :func:`find_configs`).

    Args:
        scheduler: scheduler name
        cfg: run config to complete
        dirs: directories to look in (default ``[$HOME, cwd]``)
        run_opts: the scheduler's run options (avoids creating the scheduler to get them)
    """
    for path in find_configs(dirs):
        parser = _read(path)
        if parser.has_section(scheduler):
            _load_section(parser, scheduler, cfg, run_opts, path)
            logger.debug("loaded [%s] run options from %s", scheduler, path)


def _format_default(opt: runopt) -> str:
    default = opt.default
    if default is None or default == [] or default == {}:
        return _NONE
    kind = _type_kind(opt.opt_type)
    if kind == "list":
        return ";".join(str(v) for v in default)  # type: ignore[union-attr]
    if kind == "dict":
        return ";".join(f"{k}:{v}" for k, v in default.items())  # type: ignore[union-attr]
    return str(default)


def dump(
    f: TextIO,
    schedulers: list[str] | None = None,
    required_only: bool = False,
    run_opts: Mapping[str, runopts] | None = None,
) -> None:
    """Writes a ``.torchxconfig`` template with the run options of ``schedulers``.

    Optional options are written with their defaults, required ones with a ``#FIXME`` placeholder.
    Schedulers whose optional dependencies are missing are skipped with a comment.

    Raises:
        UnknownSchedulerException: a scheduler in ``schedulers`` does not exist (as in TorchX)

    Args:
        f: where to write
        schedulers: scheduler names (default: every registered scheduler)
        required_only: write only the required options
        run_opts: scheduler -> run options (looked up from the registry when missing)
    """
    from torchx_core.specs.errors import UnknownSchedulerException

    factories = get_scheduler_factories()
    names = schedulers or list(factories)
    unknown = [n for n in names if n not in factories and n not in (run_opts or {})]
    if unknown:
        raise UnknownSchedulerException(unknown[0], list(factories))
    parser = _parser()
    skipped: list[str] = []
    for name in names:
        try:
            opts = (run_opts or {}).get(name) or factories[name]("_").run_opts()
        except (TorchXError, ImportError) as e:
            skipped.append(f"{name} ({e})")
            continue
        parser.add_section(name)
        for opt_name, opt in opts:
            if opt.is_required:
                parser.set(name, opt_name, f"#FIXME:({_type_kind(opt.opt_type)}) {opt.help}"[:80])
            elif not required_only:
                parser.set(name, opt_name, _format_default(opt))
    f.writelines(f"# skipped {line}\n" for line in skipped)
    parser.write(f, space_around_delimiters=True)
