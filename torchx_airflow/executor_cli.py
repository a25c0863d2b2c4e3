"""``airflow torchx-executor list|cleanup``: the executor's apps, and the ones whose task is gone.

Listed in the provider info (``"cli"``) and vended by :meth:`TorchXExecutor.get_cli_commands`;
outside the executor's package, so that building Airflow's CLI does not import the executor.
An app belongs to the executor when its recorded owner starts with ``airflow-executor:``; its
task instance is the ``ti=<id>`` the owner names (a task instance gets a new id when it is
retried or cleared, so an id that is no longer a queued or running task instance means the
app's try is over). ``cleanup`` cancels the live apps of such tries (with
``--yes``; without it, prints what it would cancel).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from torchx_core.specs import AppState, is_terminal

if TYPE_CHECKING:
    from torchx_core.runner import Runner


class _Row(Protocol):
    """What the executor's CLI reads of a ``Runner.list`` row."""

    app_handle: str
    state: AppState
    owner: str | None


__all__ = ["ExecutorApp", "cleanup", "executor_apps", "get_cli_commands", "list_apps"]

OWNER_PREFIX = "airflow-executor:"
_LIVE_TI = frozenset({"queued", "running"})


@dataclass(frozen=True)
class ExecutorApp:
    """One app of the executor, with its task instance's state (None: no such task instance)."""

    handle: str
    state: AppState
    ti_id: str
    ti_state: str | None

    @property
    def orphaned(self) -> bool:
        """Live while its task try is over (retried, cleared, deleted, ended)."""
        return not is_terminal(self.state) and self.ti_state not in _LIVE_TI


def executor_apps(
    rows: Iterable[_Row], ti_states: Callable[[list[str]], Mapping[str, str | None]]
) -> list[ExecutorApp]:
    """The listed apps the executor owns, with their task instance's state (one read)."""
    mine = [
        (r, (r.owner or "").rpartition("/ti=")[2])
        for r in rows
        if (r.owner or "").startswith(OWNER_PREFIX)
    ]
    states = ti_states([ti for _, ti in mine if ti])
    return [ExecutorApp(r.app_handle, r.state, ti, states.get(ti)) for r, ti in mine]


def _ti_states(ids: list[str]) -> dict[str, str | None]:
    """``{task instance id: state}`` of the ids that are current task instances (one query)."""
    if not ids:
        return {}
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.id, TaskInstance.state).where(TaskInstance.id.in_(ids))
        ).all()
    return {str(i): (None if s is None else str(s)) for i, s in rows}


def _runner_and_scheduler(args: argparse.Namespace) -> tuple[Runner, str]:
    from airflow.configuration import conf

    from torchx_airflow.executors.config import SECTION, ExecutorSettings
    from torchx_core.runner import get_runner

    settings = ExecutorSettings.from_section(conf.getsection(SECTION))
    return get_runner(settings.session_name), args.scheduler or settings.task.scheduler


def list_apps(
    args: argparse.Namespace,
    *,
    runner: Runner | None = None,
    ti_states: Callable[[list[str]], Mapping[str, str | None]] = _ti_states,
) -> list[ExecutorApp]:
    """Prints the executor's apps on the scheduler (one line each); returns them."""
    own, scheduler = _runner_and_scheduler(args) if runner is None else (runner, args.scheduler)
    apps = executor_apps(own.list(scheduler), ti_states)
    for app in apps:
        mark = "  <- its task try is over" if app.orphaned else ""
        print(f"{app.handle}\t{app.state.name}\tti={app.ti_id} ({app.ti_state or 'gone'}){mark}")
    return apps


def cleanup(
    args: argparse.Namespace,
    *,
    runner: Runner | None = None,
    ti_states: Callable[[list[str]], Mapping[str, str | None]] = _ti_states,
) -> list[str]:
    """Cancels (``--yes``) the live apps whose task try is over; returns their handles."""
    own, scheduler = _runner_and_scheduler(args) if runner is None else (runner, args.scheduler)
    orphans = [a for a in executor_apps(own.list(scheduler), ti_states) if a.orphaned]
    for app in orphans:
        if args.yes:
            own.cancel(app.handle)
        verb = "cancelled" if args.yes else "would cancel (add --yes)"
        print(f"{verb} {app.handle}: task instance {app.ti_id} is {app.ti_state or 'gone'}")
    if not orphans:
        print(f"no live app of TorchXExecutor on {scheduler} outlived its task")
    return [a.handle for a in orphans]


def get_cli_commands() -> list[Any]:
    """The ``torchx-executor`` command group (Airflow's CLI classes, imported here only)."""
    from airflow.cli.cli_config import ActionCommand, Arg, GroupCommand, lazy_load_command

    scheduler = Arg(("--scheduler",), help="the TorchX scheduler (default: the section's)")  # type: ignore[no-untyped-call]
    yes = Arg(("--yes",), help="cancel (default: only print)", action="store_true")  # type: ignore[no-untyped-call]
    return [
        GroupCommand(
            name="torchx-executor",
            help="Apps of TorchXExecutor",
            subcommands=(
                ActionCommand(
                    name="list",
                    help="List the executor's apps and their task instances",
                    func=lazy_load_command("torchx_airflow.executor_cli.list_apps"),
                    args=(scheduler,),
                ),
                ActionCommand(
                    name="cleanup",
                    help="Cancel the live apps whose task try is over",
                    func=lazy_load_command("torchx_airflow.executor_cli.cleanup"),
                    args=(scheduler, yes),
                ),
            ),
        )
    ]
