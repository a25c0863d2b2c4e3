"""The Runner's checks and copies of what it is given (private to :mod:`torchx_core.runner.api`).

Pure helpers with no Runner state: rejecting apps no scheduler can run, copying an app for a dry
run, checking workspace paths, reading log-stream names and resolving builtin components.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from torchx_core.specs import MISSING, AppDef, InvalidWorkspaceError, Workspace
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from torchx_core.schedulers.api import Stream


class RunnerError(TorchXError, ValueError):
    """The Runner was used wrongly (e.g. an app with no roles, a closed runner)."""


RunnerError.__module__ = "torchx_core.runner.api"  # its public home


def check_app(app: AppDef) -> None:
    """Rejects apps no scheduler can run (every problem listed)."""
    if not isinstance(app, AppDef):
        raise RunnerError(
            f"expected a `specs.AppDef`, got {type(app).__name__} {app!r:.80}; build one with"
            " `specs.AppDef(name=..., roles=[...])` or run a component with `run_component`"
        )
    if not app.roles:
        raise RunnerError(
            f"app `{app.name}` has no roles; add at least one `specs.Role` to `app.roles`"
        )
    problems = []
    for role in app.roles:
        if not role.entrypoint or role.entrypoint == MISSING:
            problems.append(f"role `{role.name}` has no entrypoint (set `Role(entrypoint=...)`)")
        if role.num_replicas < 1:
            problems.append(f"role `{role.name}` has num_replicas={role.num_replicas}; use >= 1")
    if problems:
        raise RunnerError(f"app `{app.name}` cannot run: " + "; ".join(problems))


def copy_app(app: AppDef) -> AppDef:
    """A deep copy of ``app`` whose roles share their ``overrides`` dict with ``app``'s roles
    (producers may not be copyable; a resolution through either role then serves both)."""
    import copy

    detached = [role.overrides for role in app.roles]
    for role in app.roles:
        role.overrides = {}
    try:
        copied = copy.deepcopy(app)
    finally:
        for role, overrides in zip(app.roles, detached, strict=True):
            role.overrides = overrides
    for role, overrides in zip(copied.roles, detached, strict=True):
        role.overrides = overrides
    return copied


def check_workspace(workspace: Workspace | None) -> None:
    """Rejects a workspace whose local project paths do not exist (URLs are left alone)."""
    import os

    if not workspace:
        return
    missing = [
        src
        for src in workspace.projects
        if "://" not in src and not os.path.exists(os.path.expanduser(src))
    ]
    if missing:
        raise InvalidWorkspaceError(
            f"workspace project(s) {', '.join(repr(m) for m in missing)} do not exist (working"
            f" directory: {os.getcwd()}); pass an existing local directory, e.g."
            ' `--workspace .` or `workspace="path/to/project"`'
        )


def as_stream(streams: Stream | str | None) -> Stream | None:
    """``streams`` as a :class:`Stream` (strings like ``"stdout"`` accepted)."""
    if streams is None:
        return None
    from torchx_core.schedulers.api import InvalidLogQueryError, Stream

    if isinstance(streams, Stream):
        return streams
    try:
        return Stream(streams)
    except ValueError:
        valid = ", ".join(repr(s.value) for s in Stream)
        raise InvalidLogQueryError(
            f"streams={streams!r} is not a log stream; use one of {valid}"
            " (or `schedulers.api.Stream`)"
        ) from None


BUILTIN_COMPONENTS = "torchx_core.components"


def builtin_component(name: str) -> Callable[..., AppDef] | None:
    """Resolves a builtin component (``dist.ddp``) by direct import, without the finder's scan.

    Builtins take precedence over ``torchx.components`` plugins of the same name (plugins add
    components, they do not replace builtins), so the common path needs no entry point scan.
    The builtins are checked by the component linter in the test suite.
    """
    module_name, sep, fn_name = name.rpartition(".")
    if not sep or ":" in name or fn_name.startswith("_") or module_name.startswith("_"):
        return None
    import importlib
    import inspect

    try:
        module = importlib.import_module(f"{BUILTIN_COMPONENTS}.{module_name}")
    except ImportError:
        return None
    fn = getattr(module, fn_name, None)
    if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
        return None
    ret = fn.__annotations__.get("return")
    if ret is not AppDef and not (isinstance(ret, str) and ret.rpartition(".")[2] == "AppDef"):
        return None
    return fn  # checked above: a component function
