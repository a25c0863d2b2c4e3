"""Engine-neutral pieces of the Prefect tasks: arguments, the call's identity, results, reports.

Nothing here imports Prefect. The app's life (submit or reattach, watch, logs, cancel, errors)
is :class:`torchx_core.runner.lifecycle.AppLifecycle`; this module only checks the task's own
arguments, digests a call's parameters for its identity, and shapes the task's result and the
markdown status report.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchx_core.runner.launch_options import LaunchOptions, given
from torchx_core.runner.lifecycle import InvalidTaskArgumentError
from torchx_core.runner.step_settings import SETTINGS
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


def _app_problems(
    app: object, app_args: object
) -> tuple[AppDef | None, str | None, list[str] | dict[str, Any], list[str]]:
    """The AppDef or component name (and its arguments) of a call, and what is wrong with them."""
    if isinstance(app, AppDef):
        problems = []
        if app_args:
            problems.append(
                "app_args is only used with a component name, but app is an AppDef; put the"
                " arguments into the AppDef's roles or pass a component name such as"
                " 'utils.echo' instead"
            )
        if not app.roles:
            problems.append(f"the AppDef {app.name!r} has no roles; add at least one Role")
        return app, None, [], problems
    if not isinstance(app, str) or not app.strip():
        return (
            None,
            None,
            [],
            [
                f"app must be an AppDef or a component name such as 'utils.echo', got {app!r}"
                f" ({type(app).__name__})"
            ],
        )
    if app_args is None:
        return None, app.strip(), [], []
    if isinstance(app_args, Mapping):
        return None, app.strip(), dict(app_args), []
    if isinstance(app_args, (list, tuple)) and all(isinstance(a, str) for a in app_args):
        return None, app.strip(), list(app_args), []
    return (
        None,
        app.strip(),
        [],
        [
            f"app_args must be a list of strings (CLI style, e.g. ['--msg', 'hi']) or a dict"
            f" of component arguments, got {app_args!r}"
        ],
    )


_NAMES = {"unknown_timeout": "unknown_state_timeout", "tail_lines": "log_tail_lines"}


def validate_args(
    app: AppDef | str,
    app_args: list[str] | Mapping[str, Any] | None = None,
    *,
    scheduler: str = "local_cwd",
    cfg: Mapping[str, Any] | None = None,
    workspace: str | None = None,
    poll_interval: float = 5.0,
    unknown_state_timeout: float = 120.0,
    stream_logs: bool = True,
    log_tail_lines: int = 50,
    create_artifacts: bool = True,
    reattach: bool = True,
    cancel_timeout: float = 30.0,
) -> LaunchSpec:
    """Checks every task argument, collecting all problems before raising once.

    The options every engine shares are :class:`~torchx_core.runner.launch_options.LaunchOptions`'
    checks; this adds the task's own (the app or component and its arguments, the workspace as
    a path string, ``cancel_timeout``). Defaults are ``run_app``'s.

    Raises:
        InvalidTaskArgumentError: an argument has the wrong type or value, or two contradict
    """
    appdef, component, args, problems = _app_problems(app, app_args)
    options = LaunchOptions(
        scheduler=scheduler,
        cfg=cfg,
        poll_interval=poll_interval,
        unknown_timeout=unknown_state_timeout,
        tail_lines=log_tail_lines,
        flags={
            "stream_logs": stream_logs,
            "create_artifacts": create_artifacts,
            "reattach": reattach,
        },
    )
    problems += options.problems(_NAMES)
    if workspace is not None and not isinstance(workspace, str):
        problems.append(f"workspace must be a path string or None, got {given(workspace)}")
    cancel = SETTINGS["cancel_timeout"].read(cancel_timeout, problems)
    if problems:
        raise InvalidTaskArgumentError(
            "Invalid arguments for the torchx_prefect task: " + "; ".join(problems) + "."
        )
    options = options.parsed()
    return LaunchSpec(
        app=appdef,
        component=component,
        component_args=args,
        scheduler=scheduler,
        cfg=dict(cfg or {}),
        workspace=workspace,
        poll_interval=options.poll_interval,
        unknown_state_timeout=options.unknown_timeout,
        stream_logs=options.flags["stream_logs"],
        log_tail_lines=options.tail_lines,
        create_artifacts=options.flags["create_artifacts"],
        reattach=options.flags["reattach"],
        cancel_timeout=float(cancel),  # type: ignore[arg-type]  # read as a number
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
    opts.resolve(cfg, strict=not opts.free_form)


def call_digest(spec: LaunchSpec) -> str:
    """A digest of what a task call launches: the AppDef (or component name and arguments), the
    scheduler, its run options and the workspace. Equal for equal calls, in any process.

    >>> def spec(msg):
    ...     return validate_args("utils.echo", ["--msg", msg], scheduler="local_cwd")
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


def status_markdown(app_handle: str, status: AppStatus | None, *, ui_url: str | None = None) -> str:
    """A markdown report of an app: state, message, error and a table per role/replica.

    ``ui_url`` (e.g. the app's dashboard page) replaces the scheduler's ``status.ui_url`` in the
    "UI:" line."""
    if status is None:
        return f"### TorchX app `{app_handle}`\n\nThe scheduler no longer knows this app.\n"
    lines = [
        f"### TorchX app `{app_handle}`",
        "",
        f"**State:** {AppState(status.state).name} &nbsp; **Restarts:** {status.num_restarts}",
    ]
    ui_url = ui_url or status.ui_url
    if ui_url:
        lines.append(f"**UI:** [{_md_cell(ui_url)}]({ui_url})")
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
