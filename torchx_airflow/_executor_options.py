"""The options of the ``[torchx_executor]`` section, as the provider registers them with Airflow
(stdlib only: Airflow's providers manager reads them without importing the executor).

Registered options make ``airflow config list`` show the section and make its
``AIRFLOW__TORCHX_EXECUTOR__<KEY>`` variables count without a ``[torchx_executor]`` section in
airflow.cfg (Airflow ignores variables of a section it does not know). Every default is ``None``
here: the executor applies its own (:class:`torchx_airflow.executors.config.ExecutorSettings`),
so that a connection's values still fill what the section left unset.
"""

from __future__ import annotations

from typing import Any

#: the Airflow configuration section
SECTION = "torchx_executor"
#: what a task may override (``executor_config={"torchx": {...}}``)
OVERRIDE_KEYS = ("scheduler", "cfg", "image", "resource", "cpu", "gpu", "memMB", "env")

#: key -> (Airflow option type, example, description with the executor's default)
_OPTIONS: dict[str, tuple[str, str, str]] = {
    "scheduler": (
        "string",
        "slurm",
        "The TorchX scheduler of every task's app (default local_cwd).",
    ),
    "cfg": ("string", '{"partition": "gpu"}', "The scheduler's run options, a JSON object."),
    "image": ("string", "/shared/project", "The app's image or directory (default: the cwd)."),
    "resource": ("string", "gpu.small", "A named TorchX resource (wins over cpu/gpu/memMB)."),
    "cpu": ("integer", "4", "CPUs of the app (default 1)."),
    "gpu": ("integer", "1", "GPUs of the app (default 0)."),
    "memMB": ("integer", "8192", "Memory of the app in MB (default 1024)."),
    "env": ("string", '{"HF_HOME": "/scratch/hf"}', "The app's extra environment, a JSON object."),
    "conn_id": ("string", "torchx_default", "A torchx connection completing these settings."),
    "session_name": (
        "string",
        "torchx",
        "The Runner's session name (default torchx, as the CLI's).",
    ),
    "python": (
        "string",
        "/opt/venv/bin/python",
        "The app's interpreter (default: the scheduler's).",
    ),
    "execution_api_server_url": (
        "string",
        "http://airflow-api:8080/execution/",
        "The Execution API URL the app reaches (default: [core] execution_api_server_url).",
    ),
    "poll_interval": ("float", "2", "Seconds between two batched status reads (default 2)."),
    "unknown_timeout": (
        "float",
        "300",
        "Seconds an app may stay unknown to its scheduler in a row (default 300).",
    ),
    "kill_grace": (
        "float",
        "60",
        "Seconds an app may run on after its task instance ended (default 60).",
    ),
    "tail_lines": ("integer", "50", "Log lines of a failed app reported (default 50)."),
    "submit_retries": (
        "integer",
        "2",
        "Retries of a failed submit, with back-off, before the task's try fails (default 2).",
    ),
    "cancel_on_end": (
        "boolean",
        "False",
        "Whether a clean scheduler stop cancels the running apps (default False: they run on"
        " and the next scheduler adopts them).",
    ),
    "warm_start": (
        "boolean",
        "True",
        "Whether apps on local_cwd/local fork from a warm interpreter that has imported the"
        " Task SDK (default True; without a reachable one an app starts a fresh interpreter).",
    ),
}

#: every key of the section
SETTING_KEYS: tuple[str, ...] = tuple(_OPTIONS)


def provider_config() -> dict[str, Any]:
    """The section as ``get_provider_info()["config"]`` declares it (Airflow's schema)."""
    options = {
        key: {
            "description": description,
            "version_added": None,
            "type": kind,
            "example": example,
            "default": None,
        }
        for key, (kind, example, description) in _OPTIONS.items()
    }
    return {
        SECTION: {
            "description": "TorchXExecutor (torchx_airflow.executors.TorchXExecutor): where and"
            " how each task runs as a TorchX app. Unknown keys stop the scheduler's start.",
            "options": options,
        }
    }
