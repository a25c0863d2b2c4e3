"""The one table of step settings and the one parser every entry point reads them with.

An engine step (Airflow operator, sensor, trigger and executor, Prefect task, block and
worker, KFP launcher, the CLI and ``.torchxconfig``, the Python ``AppLifecycle``) takes the same
settings: how often to poll, how long an app may stay unknown, a deadline, when to defer, how
long a killed task's app may linger, the owner token, log tail sizes and on/off switches. They
arrive typed (Python arguments) or as strings (Airflow config and connection extras,
environment variables, Prefect job and work-pool variables, KFP parameters, CLI ``-cfg``).
:data:`SETTINGS` lists each one with its kind, bound and default, and :meth:`Setting.parse`
gives one verdict and one wording for a value from any source::

    SETTINGS["poll_interval"].parse(" 5 ")       # 5.0: a trimmed numeric string is a number
    SETTINGS["poll_interval"].problem(0)         # 'poll_interval must be a finite number ...'
    SETTINGS["tail_lines"].problem(True)         # a bool is never a number

The rules, the same everywhere:

- **numbers**: an ``int`` or ``float`` (never a ``bool``), or a string that is one once
  trimmed (``" 5 "``, ``"0.5"``; a count takes an integer literal only); ``nan`` is refused,
  ``inf`` only where a setting says it means "never" (``defer_after``); the bound (``> 0`` or
  ``>= 0``) is checked after parsing, so ``-1`` and ``"-1"`` get the same message;
- **switches**: ``True``/``False``, or a string ``true``/``false``, ``yes``/``no``,
  ``on``/``off``, ``1``/``0`` (any case, trimmed); ``1`` as an int is not a switch;
- **text** (``owner``...): a non-empty string, trimmed;
- **keys**: a mapping of settings (an Airflow section, ``executor_config``...) with an unknown
  key is refused with a close match suggested (:func:`unknown_key_problem`).

Every message says what was given, what is valid and how to fix it; an entry point may rename
the setting to its own parameter (``unknown_timeout`` is ``unknown_state_timeout`` in the
adapters) and put its name in front. Stdlib only (and ``torchx_core.specs.errors``); ``difflib``
is imported on the error path only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from torchx_core.specs.errors import TorchXError, did_you_mean

__all__ = [
    "COUNT",
    "FLAG",
    "SECONDS",
    "SETTINGS",
    "TEXT",
    "InvalidSettingError",
    "InvalidTaskArgumentError",
    "Setting",
    "given",
    "parse_settings",
    "unknown_key_problem",
]

#: a duration (or a time) in seconds: ``int``/``float`` or a numeric string
SECONDS = "seconds"
#: a whole number >= a minimum: ``int`` or an integer string
COUNT = "count"
#: an on/off switch: ``bool`` or ``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``
FLAG = "flag"
#: a non-empty string, trimmed
TEXT = "text"

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


class InvalidTaskArgumentError(TorchXError, ValueError):
    """An argument of a lifecycle (or of an engine task built on it) is wrong."""

    permanent = True


class InvalidSettingError(InvalidTaskArgumentError):
    """Settings with problems; ``problems`` lists every one, each in the table's wording.

    Args:
        what: what got the settings (``"[torchx_executor]"``, ``"TorchXJob"``...)
        problems: one sentence per problem
    """

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        self.what = what
        self.problems = list(problems)
        super().__init__(f"invalid {what}: " + "; ".join(self.problems))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.what, self.problems))


def given(value: object) -> str:
    """How a message shows the value a user gave: its repr, with its type unless a number.

    >>> given(0.5), given("30"), given(None), given(True)
    ('0.5', "'30' (str)", 'None (NoneType)', 'True (bool)')
    """
    if type(value) in (int, float):
        return repr(value)
    return f"{value!r} ({type(value).__name__})"


_Parsed = float | int | bool | str | None


@dataclass(frozen=True)
class Setting:
    """One setting: its kind, bound and default, and how a value of it is read.

    Args:
        name: the setting's name (an entry point may expose it under another)
        kind: :data:`SECONDS`, :data:`COUNT`, :data:`FLAG` or :data:`TEXT`
        default: the usual default (an entry point may have its own)
        minimum: the bound of a number
        above: the number must be ``> minimum`` (else ``>= minimum``)
        infinite: ``inf`` is valid (it means "never")
        optional: ``None`` is valid (it means "none" or "no limit")
        example: a valid value, for the "how to fix it" part of a message
        help: what the setting does
    """

    name: str
    kind: str
    default: object = None
    minimum: float = 0
    above: bool = False
    infinite: bool = False
    optional: bool = False
    example: str = ""
    help: str = ""

    def valid(self) -> str:
        """What a valid value is, in words (``"a finite number of seconds > 0"``)."""
        bound = f"{'>' if self.above else '>='} {self.minimum:g}"
        if self.kind == SECONDS:
            text = (
                f"a number of seconds {bound}, or inf (never)"
                if self.infinite
                else f"a finite number of seconds {bound}"
            )
        elif self.kind == COUNT:
            text = f"an int {bound}"
        elif self.kind == FLAG:
            text = "True or False"
        else:
            text = "a non-empty string"
        return text + (" or None" if self.optional else "")

    def problem(self, value: object, name: str | None = None) -> str | None:
        """The problem with ``value`` (None: it is valid), naming it ``name`` (default: its own).

        >>> SETTINGS["poll_interval"].problem(" 2.5 ") is None
        True
        >>> print(SETTINGS["unknown_timeout"].problem(float("nan"), "unknown_timeout"))
        unknown_timeout must be a finite number of seconds >= 0, got nan (set e.g. \
unknown_timeout=300)
        """
        ok, _ = self._read(value)
        return None if ok else self._message(value, name or self.name)

    def parse(self, value: object, name: str | None = None) -> _Parsed:
        """The value as its kind (a float, an int, a bool, a trimmed str or None).

        Raises:
            InvalidSettingError: ``value`` is not valid (the message of :meth:`problem`)
        """
        ok, parsed = self._read(value)
        if not ok:
            raise InvalidSettingError("setting", [self._message(value, name or self.name)])
        return parsed

    def read(self, value: object, problems: list[str], name: str | None = None) -> _Parsed:
        """:meth:`parse`, appending the problem to ``problems`` instead of raising (then the
        default is returned)."""
        ok, parsed = self._read(value)
        if not ok:
            problems.append(self._message(value, name or self.name))
            return self.default  # type: ignore[return-value]  # defaults are of the kind
        return parsed

    # -- reading -----------------------------------------------------------------------------

    def _message(self, value: object, name: str) -> str:
        fix = f" (set e.g. {name}={self.example})" if self.example else ""
        return f"{name} must be {self.valid()}, got {given(value)}{fix}"

    def _read(self, value: object) -> tuple[bool, _Parsed]:
        if value is None:
            return self.optional, None
        if self.kind == FLAG:
            return _flag(value)
        if self.kind == TEXT:
            text = value.strip() if isinstance(value, str) else ""
            return bool(text), text
        number = _number(value, self.kind == COUNT)
        if number is None or math.isnan(number):
            return False, None
        if math.isinf(number):
            return self.infinite and number > 0, number
        ok = number > self.minimum if self.above else number >= self.minimum
        return ok, number


def _flag(value: object) -> tuple[bool, _Parsed]:
    if isinstance(value, bool):
        return True, value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE or low in _FALSE:
            return True, low in _TRUE
    return False, None


def _number(value: object, whole: bool) -> float | int | None:
    """``value`` as a number (an int for a count), or None; strings are trimmed first."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text) if whole else float(text)
        except ValueError:
            return None
    if whole:
        return value if isinstance(value, int) else None
    return float(value) if isinstance(value, (int, float)) else None


#: Every step setting, by its core name.
SETTINGS: Mapping[str, Setting] = {
    s.name: s
    for s in (
        Setting("poll_interval", SECONDS, 5.0, above=True, example="5",
                help="seconds between two status polls"),
        Setting("unknown_timeout", SECONDS, 300.0, example="300",
                help="seconds an app may stay UNKNOWN, unreadable or VANISHED in a row"),
        Setting("timeout", SECONDS, None, above=True, optional=True, example="3600",
                help="seconds a step may wait for its app before cancelling it (None: no limit)"),
        Setting("timeout_at", SECONDS, None, optional=True, example="1767225600",
                help="a UNIX time past which the step cancels its app (None: no deadline)"),
        Setting("defer_after", SECONDS, 15.0, infinite=True, example="15",
                help="seconds a deferrable task watches its app before deferring (inf: never)"),
        Setting("kill_grace", SECONDS, 60.0, example="60",
                help="seconds an app may run on after its task ended"),
        Setting("cancel_timeout", SECONDS, 30.0, above=True, example="30",
                help="the bound of one cancellation of an app"),
        Setting("owner", TEXT, None, example="'airflow:dag/task/run#try=1'",
                help="the token naming the attempt that owns an app"),
        Setting("tail_lines", COUNT, 50, example="50",
                help="log lines per replica in a failure's log tail"),
        Setting("max_log_replicas", COUNT, 16, example="16",
                help="at most this many replicas are streamed and tailed"),
        Setting("retries", COUNT, 0, example="0", help="retries of the engine's step"),
        Setting("flag", FLAG, False, example="True", help="an on/off switch"),
    )
}  # fmt: skip


def unknown_key_problem(key: object, valid: Iterable[str], where: str) -> str:
    """The message for a key that is not a setting of ``where``, with close matches.

    >>> print(unknown_key_problem("poll_intervall", ["poll_interval", "tail_lines"], "[x]"))
    unknown setting 'poll_intervall' in [x]. Did you mean: 'poll_interval'? Valid settings: \
poll_interval, tail_lines
    """
    names = list(valid)
    return (
        f"unknown setting {key!r} in {where}.{did_you_mean(str(key), names)}"
        f" Valid settings: {', '.join(names)}"
    )


def parse_settings(
    raw: Mapping[str, object],
    settings: Mapping[str, Setting],
    where: str,
    problems: list[str],
) -> dict[str, _Parsed]:
    """Reads every key of ``raw`` as the setting ``settings`` maps it to (keyed by the name the
    entry point exposes); unknown keys and invalid values are appended to ``problems``.

    Args:
        raw: the values as given (typed, or strings from a config source)
        settings: exposed name -> setting (the message names the exposed name)
        where: the source, for an unknown key (``"[torchx_executor]"``)
        problems: where every problem goes
    """
    out: dict[str, _Parsed] = {}
    for key, value in raw.items():
        setting = settings.get(key) if isinstance(key, str) else None
        if setting is None:
            problems.append(unknown_key_problem(key, settings, where))
            continue
        ok_before = len(problems)
        parsed = setting.read(value, problems, key)
        if len(problems) == ok_before:
            out[key] = parsed
    return out
