"""The options every engine step launches an app with, checked in one place.

:class:`~torchx_core.runner.lifecycle.AppLifecycle` and each engine adapter (Airflow operator,
Prefect task, KFP ``launch``) take the same options: the scheduler, its run options, the
workspace, how often to poll, how long an app may stay unknown, how many log lines and
replicas to show, and a few on/off switches. :class:`LaunchOptions` holds them (as given, not
yet trusted) and :meth:`LaunchOptions.problems` lists everything wrong with them, each problem
saying what was given, what is valid and how to fix it, in one wording for every engine::

    opts = LaunchOptions(scheduler="local_cwd", poll_interval=0, tail_lines=-1)
    opts.problems()
    # ['poll_interval must be a finite number of seconds > 0, got 0', 'tail_lines must be ...']
    opts.check("app lifecycle arguments")   # raises InvalidLaunchOptionsError listing both

An adapter adds only its engine's own checks to the list and raises its own error class;
``names`` maps a field to the parameter name the caller exposes (``unknown_timeout`` is
``unknown_state_timeout`` in every adapter). Stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchx_core.specs import Workspace
from torchx_core.specs.errors import TorchXError

__all__ = [
    "InvalidLaunchOptionsError",
    "InvalidTaskArgumentError",
    "LaunchOptions",
    "count_problem",
    "flag_problem",
    "seconds_problem",
]


class InvalidTaskArgumentError(TorchXError, ValueError):
    """An argument of a lifecycle (or of an engine task built on it) is wrong."""

    permanent = True


class InvalidLaunchOptionsError(InvalidTaskArgumentError):
    """Launch options with problems; ``problems`` lists every one (see :class:`LaunchOptions`).

    Args:
        what: what got the options (``"app lifecycle arguments"``)
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

    >>> given(0.5), given("30"), given(None)
    ('0.5', "'30' (str)", 'None (NoneType)')
    """
    if type(value) in (int, float):
        return repr(value)
    return f"{value!r} ({type(value).__name__})"


def seconds_problem(name: str, value: object, allow_zero: bool) -> str | None:
    """The problem with a duration ``value`` (a finite ``int``/``float`` > 0, or >= 0), or None.

    >>> seconds_problem("poll_interval", 0, allow_zero=False)
    'poll_interval must be a finite number of seconds > 0, got 0'
    >>> seconds_problem("poll_interval", 0.5, allow_zero=False) is None
    True
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and (value > 0 or (allow_zero and value == 0)):  # type: ignore[arg-type,operator]
        return None
    bound = ">= 0" if allow_zero else "> 0"
    return f"{name} must be a finite number of seconds {bound}, got {given(value)}"


def count_problem(name: str, value: object) -> str | None:
    """The problem with a count ``value`` (an ``int`` >= 0, not a bool), or None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return None
    return f"{name} must be an int >= 0, got {given(value)}"


def flag_problem(name: str, value: object) -> str | None:
    """The problem with an on/off switch ``value`` (``True`` or ``False``), or None."""
    return None if isinstance(value, bool) else f"{name} must be True or False, got {given(value)}"


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
            seconds_problem(name("poll_interval", "poll_interval"), self.poll_interval, False),
            seconds_problem(name("unknown_timeout", "unknown_timeout"), self.unknown_timeout, True),
            count_problem(name("tail_lines", "tail_lines"), self.tail_lines),
            count_problem(name("max_log_replicas", "max_log_replicas"), self.max_log_replicas),
        ]
        found += [flag_problem(flag, value) for flag, value in self.flags.items()]
        return [p for p in found if p is not None]

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
