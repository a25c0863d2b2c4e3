"""Engine-neutral pieces of the Prefect tasks: arguments, the call's identity, results, reports.

Nothing here imports Prefect. The app's life (submit or reattach, watch, logs, cancel, errors)
is :class:`torchx_core.runner.lifecycle.AppLifecycle`; this module only checks the task's own
arguments, digests a call's parameters for its identity, and shapes the task's result and the
markdown status report.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchx_core.runner.lifecycle import InvalidTaskArgumentError
from torchx_core.specs import NONE, AppDef, AppState, AppStatus

__all__ = ["AppResult", "LaunchSpec", "call_digest", "check_run_options", "validate_args"]


@dataclass(frozen=True)
class LaunchSpec:
    """The validated arguments of a launcher task (see ``torchx_prefect.run_app``)."""

    app: AppDef | None
    component: str | None
    component_args: list[str] | dict[str, Any]
    scheduler: str
    cfg: dict[str, Any]
    workspace: str | None
    poll_interval: float
    unknown_state_timeout: float
    stream_logs: bool
    log_tail_lines: int
    create_artifacts: bool
    reattach: bool
    cancel_timeout: float

    @property
    def base_name(self) -> str:
        """The app's own name (the AppDef name, or the component name's last part)."""
        if self.app is not None:
            return self.app.name
        assert self.component is not None  # invariant of validate_args, not user input
        return re.split(r"[.:/]", self.component)[-1] or "app"


def _positive(name: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidTaskArgumentError(
            f"{name} must be a finite number of seconds, got {value!r} ({type(value).__name__})."
        )
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidTaskArgumentError(f"{name} must be {bound}, got {value!r}.")
    return float(value)


def validate_args(
    app: AppDef | str,
    app_args: list[str] | Mapping[str, Any] | None,
    scheduler: str,
    cfg: Mapping[str, Any] | None,
    workspace: str | None,
    poll_interval: float,
    unknown_state_timeout: float,
    stream_logs: bool,
    log_tail_lines: int,
    create_artifacts: bool,
    reattach: bool,
    cancel_timeout: float,
) -> LaunchSpec:
    """Checks every task argument, collecting all problems before raising once.

    Raises:
        InvalidTaskArgumentError: an argument has the wrong type or value, or two contradict
    """
    problems: list[str] = []
    appdef: AppDef | None = None
    component: str | None = None
    args: list[str] | dict[str, Any] = []
    if isinstance(app, AppDef):
        appdef = app
        if app_args:
            problems.append(
                "app_args is only used with a component name, but app is an AppDef; put the"
                " arguments into the AppDef's roles or pass a component name such as"
                " 'utils.echo' instead"
            )
        if not app.roles:
            problems.append(f"the AppDef {app.name!r} has no roles; add at least one Role")
    elif isinstance(app, str) and app.strip():
        component = app.strip()
        if app_args is None:
            args = []
        elif isinstance(app_args, Mapping):
            args = dict(app_args)
        elif isinstance(app_args, (list, tuple)) and all(isinstance(a, str) for a in app_args):
            args = list(app_args)
        else:
            problems.append(
                f"app_args must be a list of strings (CLI style, e.g. ['--msg', 'hi']) or a dict"
                f" of component arguments, got {app_args!r}"
            )
    else:
        problems.append(
            f"app must be an AppDef or a component name such as 'utils.echo', got {app!r}"
            f" ({type(app).__name__})"
        )
    if not isinstance(scheduler, str) or not scheduler:
        problems.append(
            f"scheduler must be a scheduler name such as 'local_cwd', got {scheduler!r}"
        )
    if cfg is not None and not isinstance(cfg, Mapping):
        problems.append(f"cfg must be a mapping of run options, got {type(cfg).__name__}")
    if workspace is not None and not isinstance(workspace, str):
        problems.append(f"workspace must be a path string or None, got {type(workspace).__name__}")
    if (
        isinstance(log_tail_lines, bool)
        or not isinstance(log_tail_lines, int)
        or log_tail_lines < 0
    ):
        problems.append(f"log_tail_lines must be an int >= 0, got {log_tail_lines!r}")
    for flag_name, flag in (
        ("stream_logs", stream_logs),
        ("create_artifacts", create_artifacts),
        ("reattach", reattach),
    ):
        if not isinstance(flag, bool):
            problems.append(f"{flag_name} must be True or False, got {flag!r}")
    numbers: dict[str, float] = {}
    for num_name, value, zero_ok in (
        ("poll_interval", poll_interval, False),
        ("unknown_state_timeout", unknown_state_timeout, True),
        ("cancel_timeout", cancel_timeout, False),
    ):
        try:
            numbers[num_name] = _positive(num_name, value, allow_zero=zero_ok)
        except InvalidTaskArgumentError as e:
            problems.append(str(e).rstrip("."))
    if problems:
        raise InvalidTaskArgumentError(
            "Invalid arguments for the torchx_prefect task: " + "; ".join(problems) + "."
        )
    return LaunchSpec(
        app=appdef,
        component=component,
        component_args=args,
        scheduler=scheduler,
        cfg=dict(cfg or {}),
        workspace=workspace,
        poll_interval=numbers["poll_interval"],
        unknown_state_timeout=numbers["unknown_state_timeout"],
        stream_logs=stream_logs,
        log_tail_lines=log_tail_lines,
        create_artifacts=create_artifacts,
        reattach=reattach,
        cancel_timeout=numbers["cancel_timeout"],
    )


def check_run_options(scheduler: str, cfg: Mapping[str, Any], runner: Any = None) -> None:
    """Checks ``cfg`` strictly against the scheduler's run options, before anything is submitted:
    an unknown key (with a close match suggested), a wrong type, a missing required option.

    Args:
        scheduler: the TorchX scheduler name
        cfg: its run options
        runner: the Runner to ask (default: a new one)

    Raises:
        InvalidRunConfigException: a run option is unknown, has the wrong type or is missing
        UnknownSchedulerException: the scheduler does not exist
        MissingDependencyError: the scheduler's client library is not installed
    """
    if runner is None:
        from torchx_core.runner import get_runner

        with get_runner() as own:
            opts = own.scheduler_run_opts(scheduler)
    else:
        opts = runner.scheduler_run_opts(scheduler)
    opts.resolve(cfg, strict=True)


def call_digest(spec: LaunchSpec) -> str:
    """A digest of what a task call launches: the AppDef (or component name and arguments), the
    scheduler, its run options and the workspace. Equal for equal calls, in any process.

    >>> def spec(msg):
    ...     return validate_args("utils.echo", ["--msg", msg], "local_cwd", None, None, 5, 0,
    ...                          True, 50, True, True, 30)
    >>> call_digest(spec("hi")) == call_digest(spec("hi")) != call_digest(spec("ho"))
    True
    """
    app = spec.app.to_dict() if spec.app is not None else None
    form = [app, spec.component, spec.component_args, spec.scheduler, spec.cfg, spec.workspace]
    text = json.dumps(form, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# results


def artifact_key(app_name: str, suffix: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for an app.

    >>> artifact_key("echo-0123456789", "status")
    'torchx-echo-0123456789-status'
    """
    return re.sub(r"[^a-z0-9-]+", "-", f"torchx-{app_name}-{suffix}".lower())


@dataclass
class AppResult:
    """What a launcher task returns when the app SUCCEEDED.

    Args:
        app_handle: the app's handle (``{scheduler}://{session}/{app_id}``)
        status: the final status
        app_name: the deterministic name the app was submitted under
        reattached: True if this task attempt reattached to an app an earlier attempt submitted
    """

    app_handle: str
    status: AppStatus
    app_name: str = ""
    reattached: bool = False

    @property
    def state(self) -> AppState:
        """The final app state."""
        return self.status.state

    @property
    def ui_url(self) -> str | None:
        """The scheduler UI URL of the app, if the scheduler has one."""
        return self.status.ui_url

    def __repr__(self) -> str:
        return (
            f"AppResult(app_handle={self.app_handle!r}, state={AppState(self.state).name},"
            f" app_name={self.app_name!r}, reattached={self.reattached})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible form."""
        return {
            "app_handle": self.app_handle,
            "app_name": self.app_name,
            "reattached": self.reattached,
            "status": self.status.to_json(),
        }


def _md_cell(value: object) -> str:
    text = str(value).replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= 300 else text[:297] + "..."


def status_markdown(app_handle: str, status: AppStatus | None) -> str:
    """A markdown report of an app: state, message, error and a table per role/replica."""
    if status is None:
        return f"### TorchX app `{app_handle}`\n\nThe scheduler no longer knows this app.\n"
    lines = [
        f"### TorchX app `{app_handle}`",
        "",
        f"**State:** {AppState(status.state).name} &nbsp; **Restarts:** {status.num_restarts}",
    ]
    if status.ui_url:
        lines.append(f"**UI:** [{_md_cell(status.ui_url)}]({status.ui_url})")
    if status.msg:
        lines.append(f"**Message:** {_md_cell(status.msg)}")
    if status.structured_error_msg and status.structured_error_msg != NONE:
        lines.append(f"**Error:** `{_md_cell(status.structured_error_msg)}`")
    lines += ["", "| role | replica | state | hostname | error |", "|---|---|---|---|---|"]
    for role in status.roles:
        for rep in role.replicas:
            err = rep.structured_error_msg if rep.structured_error_msg != NONE else ""
            lines.append(
                f"| {_md_cell(role.role)} | {rep.id} | {AppState(rep.state).name}"
                f" | {_md_cell(rep.hostname or '')} | {_md_cell(err)} |"
            )
    if not status.roles:
        lines.append("| - | - | - | - | - |")
    return "\n".join(lines) + "\n"
