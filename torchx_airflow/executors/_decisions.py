"""The executor's two decisions, as pure functions over plain values (tested as tables).

* :func:`outcome`: what a status read of a task's app means for Airflow;
* :func:`verdict`: whether a task's app must stop because its task instance moved on (a user
  marked it failed or success, cleared it, or the scheduler reset it);
* :func:`try_over`: whether the try an app runs is over for Airflow (its executor slot is free
  while the app exits).
"""

from __future__ import annotations

from enum import Enum

from torchx_core.runner.lifecycle import Phase


class Outcome(str, Enum):
    """What :meth:`TorchXExecutor.sync` reports for one app."""

    WAIT = "wait"  # still queued or running (or UNKNOWN/VANISHED within the grace period)
    SUCCESS = "success"  # the workload ran to its end (the task reported its own state)
    FAILED = "failed"  # the app failed or was cancelled: the task may not have reported
    VANISHED = "vanished"  # unknown to its scheduler (or UNKNOWN) past the grace period


def outcome(phase: Phase, expired: bool) -> Outcome:
    """The outcome of one observation of an app (``expired``: its grace clock ran out)."""
    if phase == Phase.SUCCEEDED:
        return Outcome.SUCCESS
    if phase in (Phase.FAILED, Phase.CANCELLED):
        return Outcome.FAILED
    if phase in (Phase.UNKNOWN, Phase.VANISHED) and expired:
        return Outcome.VANISHED
    return Outcome.WAIT


class Verdict(str, Enum):
    """What to do with a running app given its task instance's row."""

    KEEP = "keep"  # the task instance still waits for this app
    GRACE = "grace"  # the task ended itself: its app exits on its own, cancel only if it lingers
    CANCEL = "cancel"  # the task instance was cleared or reset while its app runs: stop it now


#: states a task instance reaches only while this app's workload runs it
_LIVE = frozenset({"queued", "running"})
#: states the task itself reports as it ends (its app then exits within seconds), and the states
#: a user sets in the UI (marked failed/success), which the Task SDK also notices and stops on
_ENDED = frozenset(
    {"success", "failed", "up_for_retry", "up_for_reschedule", "skipped", "deferred"}
)


def verdict(
    state: str | None, try_number: int | None, my_try: int, *, exists: bool = True
) -> Verdict:
    """Whether the app of try ``my_try`` may go on, given the task instance's current row.

    Args:
        state: the task instance's state (``None``: no state, e.g. cleared)
        try_number: its current try number
        my_try: the try this app runs
        exists: False when the task instance is gone (its DAG run deleted)
    """
    if not exists or try_number != my_try:
        # the task ended and Airflow moved its row to the history for the next try (or the DAG
        # run was deleted): its app exits on its own unless it lingers
        return Verdict.GRACE
    if state in _LIVE:
        return Verdict.KEEP
    if state in _ENDED:
        return Verdict.GRACE
    return Verdict.CANCEL  # restarting (cleared while running), scheduled, removed, None...


#: ended states after which the same try never runs again (a deferred or rescheduled task
#: resumes as the same try, so it keeps its slot)
_TRY_OVER = frozenset({"success", "failed", "up_for_retry", "skipped"})


def try_over(
    state: str | None, try_number: int | None, my_try: int, *, exists: bool = True
) -> bool:
    """Whether the try ``my_try`` is over for Airflow, given its task instance's current row.

    Its app may still run for a while (Airflow's supervisor exits up to a heartbeat after its
    task); the executor's slot is then free, as LocalExecutor's queue is, so the next tasks are
    queued without waiting for that exit. Same arguments as :func:`verdict`.
    """
    if not exists or try_number != my_try:
        return True
    return state in _TRY_OVER
