"""The options every engine step launches an app with, checked in one place.

:class:`~torchx_core.runner.lifecycle.AppLifecycle` and each engine adapter (Airflow operator,
Prefect task, KFP ``launch``) take the same options: the scheduler, its run options, the
workspace, how often to poll, how long an app may stay unknown, how many log lines and
replicas to show, and a few on/off switches. :class:`LaunchOptions` holds them (as given, not
yet trusted) and :meth:`LaunchOptions.problems` lists everything wrong with them, each problem
saying what was given, what is valid and how to fix it, in one wording for every engine::

    opts = LaunchOptions(scheduler="local_cwd", poll_interval=0, tail_lines=-1)
    opts.problems()
    # ['poll_interval must be a finite number of seconds > 0, got 0 (set e.g. ...)', ...]
    opts.check("app lifecycle arguments")   # raises InvalidLaunchOptionsError listing both
    opts = opts.parsed()                    # the values as the table reads them (" 5 " -> 5.0)

An adapter adds only its engine's own checks to the list and raises its own error class;
``names`` maps a field to the parameter name the caller exposes (``unknown_timeout`` is
``unknown_state_timeout`` in every adapter). Every number and switch is read by the one table
of step settings, :mod:`torchx_core.runner.step_settings` (same verdict and wording for a value
at every entry point, typed or a string). Stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torchx_core.runner.step_settings import (
    COUNT,
    SECONDS,
    SETTINGS,
    InvalidSettingError,
    InvalidTaskArgumentError,
    Setting,
    given,
)
from torchx_core.specs import Workspace

__all__ = [
    "InvalidLaunchOptionsError",
    "InvalidTaskArgumentError",
    "LaunchOptions",
    "count_problem",
    "flag_problem",
    "given",
    "seconds_problem",
]


class InvalidLaunchOptionsError(InvalidSettingError):
    """Launch options with problems; ``problems`` lists every one (see :class:`LaunchOptions`).

    Args:
        what: what got the options (``"app lifecycle arguments"``)
        problems: one sentence per problem
    """


def seconds_problem(name: str, value: object, allow_zero: bool) -> str | None:
    """The problem with a duration ``value`` (a finite number > 0, or >= 0), or None; the table's
    wording (:mod:`~torchx_core.runner.step_settings`), its example when ``name`` is a setting.

    >>> seconds_problem("cancel_timeout", 0, allow_zero=False)
    'cancel_timeout must be a finite number of seconds > 0, got 0 (set e.g. cancel_timeout=30)'
    >>> seconds_problem("poll_interval", " 0.5 ", allow_zero=False) is None
    True
    """
    known = SETTINGS.get(name)
    setting = (
        known
        if known is not None and known.kind == SECONDS and known.above is not allow_zero
        else Setting(name, SECONDS, above=not allow_zero)
    )
    return setting.problem(value, name)


def count_problem(name: str, value: object) -> str | None:
    """The problem with a count ``value`` (an int >= 0 or an integer string), or None."""
    known = SETTINGS.get(name)
    setting = known if known is not None and known.kind == COUNT else Setting(name, COUNT)
    return setting.problem(value, name)


def flag_problem(name: str, value: object) -> str | None:
    """The problem with an on/off switch ``value`` (a bool or ``"true"``/``"false"``...)."""
    return SETTINGS["flag"].problem(value, name)


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """How one app is launched and watched, as the caller gave it (checked by :meth:`problems`).

    Args:
        scheduler: the scheduler name the app runs on (``torchx schedulers`` lists them)
        cfg: the scheduler's run options (None: none)
        workspace: the workspace to build into the app (a path or URL, a ``Workspace``, None)
        poll_interval: seconds between two status polls (> 0)
        unknown_timeout: seconds an app may stay UNKNOWN, unreadable or VANISHED (>= 0)
        tail_lines: log lines per replica in a failure's log tail (>= 0)
        max_log_replicas: at most this many replicas are streamed and tailed (>= 0)
        flags: the caller's on/off switches by name (each must be ``True`` or ``False``)
    """

    scheduler: str
    cfg: Mapping[str, Any] | None = None
    workspace: Workspace | str | None = None
    poll_interval: float = 5.0
    unknown_timeout: float = 300.0
    tail_lines: int = 50
    max_log_replicas: int = 16
    flags: Mapping[str, bool] = field(default_factory=dict)

    def problems(self, names: Mapping[str, str] | None = None) -> list[str]:
        """Every problem with these options, in field order ([] when they are all valid).

        Args:
            names: the parameter name the caller exposes for a field, where it differs
                (``{"unknown_timeout": "unknown_state_timeout"}``), so messages name what the
                user typed
        """
        name = dict(names or {}).get
        found: list[str | None] = []
        scheduler: object = self.scheduler
        if not isinstance(scheduler, str) or not scheduler.strip():
            found.append(
                f"{name('scheduler', 'scheduler')} must be a scheduler name such as 'local_cwd'"
                f" (`torchx schedulers` lists them), got {given(scheduler)}"
            )
        cfg: object = self.cfg
        if cfg is not None and not isinstance(cfg, Mapping):
            found.append(
                f"{name('cfg', 'cfg')} must be a mapping (dict) of the scheduler's run options,"
                f" got {given(cfg)}"
            )
        workspace: object = self.workspace
        if workspace is not None and not isinstance(workspace, (str, Workspace)):
            found.append(
                f"{name('workspace', 'workspace')} must be a path or URL string, a Workspace or"
                f" None, got {given(workspace)}"
            )
        found += [
            SETTINGS[key].problem(getattr(self, key), name(key, key))
            for key in ("poll_interval", "unknown_timeout", "tail_lines", "max_log_replicas")
        ]
        found += [flag_problem(flag, value) for flag, value in self.flags.items()]
        return [p for p in found if p is not None]

    def parsed(
        self, what: str = "launch options", *, names: Mapping[str, str] | None = None
    ) -> LaunchOptions:
        """These options with every number and switch read by the table (``" 5 "`` -> 5.0,
        ``"yes"`` -> True), after :meth:`check`.

        Raises:
            InvalidLaunchOptionsError: as :meth:`check`
        """
        self.check(what, names=names)
        number = {
            key: SETTINGS[key].parse(getattr(self, key))
            for key in ("poll_interval", "unknown_timeout", "tail_lines", "max_log_replicas")
        }
        return replace(
            self,
            poll_interval=float(number["poll_interval"]),  # type: ignore[arg-type]  # parsed
            unknown_timeout=float(number["unknown_timeout"]),  # type: ignore[arg-type]
            tail_lines=int(number["tail_lines"]),  # type: ignore[arg-type]
            max_log_replicas=int(number["max_log_replicas"]),  # type: ignore[arg-type]
            flags={flag: bool(SETTINGS["flag"].parse(v)) for flag, v in self.flags.items()},
        )

    def check(
        self,
        what: str = "launch options",
        *,
        names: Mapping[str, str] | None = None,
        more: Sequence[str] = (),
    ) -> None:
        """Raises once if :meth:`problems` (plus the caller's own ``more``) finds anything.

        Args:
            what: what got the options, for the message (``"app lifecycle arguments"``)
            names: as in :meth:`problems`
            more: the caller's own problems, listed after these

        Raises:
            InvalidLaunchOptionsError: listing every problem
        """
        problems = [*self.problems(names), *more]
        if problems:
            raise InvalidLaunchOptionsError(what, problems)
