"""The app's entry point: runs one Airflow workload with the Task SDK, as Airflow's own workers do.

``python -m torchx_airflow.executors.entry '<workload JSON without its token>'``

The workload's token arrives in the environment (:data:`TOKEN_ENV`), never on the command line
(which ``ps``, ``squeue`` and the scheduler's UI show); it is removed from the environment before
the task starts. The rest is Airflow's ``execute_workload``: the Task SDK's supervisor talks to the
Execution API (``AIRFLOW__CORE__EXECUTION_API_SERVER_URL``), runs the task in a child process and
writes its log where Airflow reads it (the log is also copied to stdout, the app's log).
"""

from __future__ import annotations

import json
import os
import sys

#: the environment variable holding the workload's Execution API token
TOKEN_ENV = "TORCHX_AIRFLOW_WORKLOAD_TOKEN"


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
    data["token"] = token
    workload = TypeAdapter(workloads.All).validate_python(data)
    execute_workload(workload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
