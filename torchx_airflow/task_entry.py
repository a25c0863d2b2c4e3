"""The app's entry point: runs one Airflow workload with the Task SDK, as Airflow's own workers do.

``python -m torchx_airflow.task_entry '<workload JSON without its token>'``

A module outside :mod:`torchx_airflow.executors`: ``python -m`` of it imports neither the
executor nor its package first (no ``RuntimeWarning``, a lighter start).

The workload's token arrives in the environment (:data:`TOKEN_ENV`), never on the command line
(which ``ps``, ``squeue`` and the scheduler's UI show); it is removed from the environment before
the task starts. When Airflow has a ``[core] fernet_key`` the token is sealed with it
(:func:`seal`; ``fernet:<ciphertext>``), so a scheduler that keeps a copy of the app's
environment on disk (a Slurm batch script, a local app's plan) keeps no usable token; the app's
Airflow configuration then needs the same key. The rest is Airflow's ``execute_workload``: the
Task SDK's supervisor talks to the Execution API (``AIRFLOW__CORE__EXECUTION_API_SERVER_URL``),
runs the task in a child process and writes its log where Airflow reads it (the log is also
copied to stdout, the app's log).

When the app's environment names a warm fork server (:data:`SERVER_ENV`; ``TorchXExecutor``
starts one for its apps on the local schedulers), this process is only a stdlib client: the
server forks the task from an interpreter that has already imported the Task SDK
(:mod:`torchx_airflow._fork_server`), and the client relays signals and exits with the task's
exit code. Without a reachable server, it runs the task itself, as below.

The app's exit code is the task's outcome (:func:`exit_code`): Airflow's supervisor exits 0
whatever the task did, so a failed, timed-out or externally stopped task would leave its app
SUCCEEDED (``sacct`` COMPLETED); here it ends FAILED.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: the warm-start client's start
if TYPE_CHECKING:
    from typing import Any

    from airflow.executors import workloads

#: the environment variable naming the warm fork server's socket (``_fork_client``)
SERVER_ENV = "TORCHX_AIRFLOW_FORK_SERVER"
#: the environment variable holding the workload's Execution API token
TOKEN_ENV = "TORCHX_AIRFLOW_WORKLOAD_TOKEN"
_SEALED = "fernet:"
#: the task's final states (as the supervisor reports them) after which the workload did its
#: part: the task succeeded, skipped, or handed over to the triggerer or a later reschedule
_DONE = frozenset({"success", "skipped", "deferred", "up_for_reschedule"})
#: the exit code of an app whose task failed (failed, up_for_retry, timed out...)
EXIT_TASK_FAILED = 1
#: the exit code of an app whose task the server stopped (marked failed or success, cleared)
EXIT_TASK_STOPPED = 3


def exit_code(final_state: str | None) -> int:
    """The app's exit code for the task's final state (``None``: not seen, Airflow's own 0)."""
    if final_state is None or final_state.lower() in _DONE:
        return 0
    if final_state == "SERVER_TERMINATED":
        return EXIT_TASK_STOPPED
    return EXIT_TASK_FAILED


def seal(token: str) -> str:
    """The token as put in the app's environment: sealed with Airflow's fernet key if it has one."""
    from airflow.models.crypto import get_fernet

    fernet = get_fernet()
    if not fernet.is_encrypted:
        return token
    return _SEALED + fernet.encrypt(token.encode()).decode()


def unseal(value: str) -> str:
    """Reverses :func:`seal` (in the app, with the Task SDK's configuration)."""
    if not value.startswith(_SEALED):
        return value
    from airflow.sdk.crypto import get_fernet

    return get_fernet().decrypt(value[len(_SEALED) :].encode()).decode()


def main(argv: list[str] | None = None) -> int:
    """Runs the workload given as the only argument; returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    server = os.environ.get(SERVER_ENV)
    if server:  # a warm interpreter forks the task (stdlib only until it declines)
        from torchx_airflow._fork_client import run_forked

        code = run_forked(args, server)
        if code is not None:
            return code
        del os.environ[SERVER_ENV]
    token = os.environ.pop(TOKEN_ENV, None)
    if len(args) != 1 or not token:
        print(
            "usage: python -m torchx_airflow.task_entry '<workload JSON>' with the workload's"
            f" token in ${TOKEN_ENV} (started by torchx_airflow.executors.TorchXExecutor)",
            file=sys.stderr,
        )
        return 2
    from airflow.executors import workloads
    from airflow.sdk.execution_time.execute_workload import execute_workload
    from pydantic import TypeAdapter

    data = json.loads(args[0])
    data["token"] = unseal(token)
    workload = TypeAdapter(workloads.All).validate_python(data)
    if not isinstance(workload, workloads.ExecuteTask):
        print(
            f"torchx_airflow.task_entry runs ExecuteTask workloads only, got"
            f" {type(workload).__name__}",
            file=sys.stderr,
        )
        return 2
    with _FinalState(workload) as seen:
        execute_workload(workload)
    state = seen[0] if seen else None
    code = exit_code(state)
    if code:
        print(f"torchx_airflow: the task ended {state}: exit {code}", file=sys.stderr)
    return code


class _FinalState:
    """A list that receives the task's final state when the supervisor's run of it returns.

    Airflow's ``supervise_task`` returns only the task process's exit code (0 when the task
    reported its own failure); the final state is in the result of the coordinator of the task's
    queue, the same (cached) instance ``supervise_task`` uses, whose ``execute_task`` is wrapped
    while the context lasts. (A class, not ``contextlib``: this module's imports are the
    warm-start client's.)
    """

    def __init__(self, workload: workloads.ExecuteTask) -> None:
        from airflow.sdk.execution_time.coordinator import get_coordinator_manager

        self.seen: list[str] = []
        self._coordinator = get_coordinator_manager().for_queue(workload.ti.queue or "default")
        self._wrapped = False

    def __enter__(self) -> list[str]:
        inner = self._coordinator.execute_task
        seen = self.seen

        def execute_task(**kwargs: Any) -> Any:
            result = inner(**kwargs)
            seen.append(str(getattr(result, "final_state", "") or "") or "failed")
            return result

        try:
            self._coordinator.execute_task = execute_task  # type: ignore[method-assign]
            self._wrapped = True
        except AttributeError:  # a coordinator with slots: Airflow's exit code only
            pass
        return seen

    def __exit__(self, *exc: object) -> None:
        if self._wrapped:  # the coordinator is cached per process: leave it as it was
            del self._coordinator.execute_task


if __name__ == "__main__":
    sys.exit(main())
