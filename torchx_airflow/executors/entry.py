"""The app's entry point: runs one Airflow workload with the Task SDK, as Airflow's own workers do.

``python -m torchx_airflow.executors.entry '<workload JSON without its token>'``

The workload's token arrives in the environment (:data:`TOKEN_ENV`), never on the command line
(which ``ps``, ``squeue`` and the scheduler's UI show); it is removed from the environment before
the task starts. When Airflow has a ``[core] fernet_key`` the token is sealed with it
(:func:`seal`; ``fernet:<ciphertext>``), so a scheduler that keeps a copy of the app's
environment on disk (a Slurm batch script, a local app's plan) keeps no usable token; the app's
Airflow configuration then needs the same key. The rest is Airflow's ``execute_workload``: the
Task SDK's supervisor talks to the Execution API (``AIRFLOW__CORE__EXECUTION_API_SERVER_URL``),
runs the task in a child process and writes its log where Airflow reads it (the log is also
copied to stdout, the app's log).
"""

from __future__ import annotations

import json
import os
import sys

#: the environment variable holding the workload's Execution API token
TOKEN_ENV = "TORCHX_AIRFLOW_WORKLOAD_TOKEN"
_SEALED = "fernet:"


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
    token = os.environ.pop(TOKEN_ENV, None)
    if len(args) != 1 or not token:
        print(
            "usage: python -m torchx_airflow.executors.entry '<workload JSON>' with the workload's"
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
            f"torchx_airflow.executors.entry runs ExecuteTask workloads only, got"
            f" {type(workload).__name__}",
            file=sys.stderr,
        )
        return 2
    execute_workload(workload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
