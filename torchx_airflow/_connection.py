"""The ``torchx`` connection type: its fields, as the provider info declares them for the UI
(stdlib only: Airflow's providers manager reads it without importing the hook).

A ``torchx`` connection holds, in its ``extra`` (JSON):

* ``scheduler`` - the TorchX scheduler (``"slurm"``, ``"kubernetes"``, ``"aws_batch"``...)
* ``cfg`` - the scheduler's run options (a JSON object)
* ``session_name`` - the Runner's session name (default ``"torchx"``)
* ``env`` - environment for the scheduler client (a JSON object: ``SLURM_CONF``, ``KUBECONFIG``,
  ``AWS_PROFILE``, ``AWS_DEFAULT_REGION``...)
* ``dashboard_url`` - a ``torchx dashboard``'s address: the task's "TorchX app" link opens the
  app's page there (default ``$TORCHX_DASHBOARD_URL``; unset: the scheduler's UI URL)

and in its ``password``: secret environment variables (a JSON object, e.g.
``{"AWS_SECRET_ACCESS_KEY": "..."}``), masked in logs and never serialized into a trigger.
"""

from __future__ import annotations

from typing import Any

CONN_TYPE = "torchx"
DEFAULT_CONN_ID = "torchx_default"
HOOK_CLASS = "torchx_airflow.hook.TorchXHook"
#: the keys of a connection's extra
EXTRA_KEYS = ("scheduler", "cfg", "session_name", "env", "dashboard_url")

#: The form fields (Airflow 3 ``conn-fields``: JSON schema per field).
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "scheduler": {
        "label": "Scheduler",
        "description": "The TorchX scheduler: local_cwd, slurm, kubernetes, aws_batch, ray...",
        "schema": {"type": ["string", "null"]},
    },
    "cfg": {
        "label": "Run options (JSON)",
        "description": 'The scheduler\'s run options, e.g. {"partition": "gpu"};'
        " `torchx runopts <scheduler>` lists them",
        "schema": {"type": ["string", "null"]},
    },
    "session_name": {
        "label": "Session name",
        "description": "The TorchX session name (default torchx)",
        "schema": {"type": ["string", "null"]},
    },
    "env": {
        "label": "Scheduler client environment (JSON)",
        "description": 'Environment for the scheduler client, e.g. {"SLURM_CONF":'
        ' "/etc/slurm/slurm.conf", "KUBECONFIG": "/path", "AWS_PROFILE": "ml",'
        ' "AWS_DEFAULT_REGION": "us-east-1"}',
        "schema": {"type": ["string", "null"]},
    },
    "dashboard_url": {
        "label": "Dashboard URL",
        "description": "A `torchx dashboard` address, e.g. http://ml-host:8288: the task's"
        ' "TorchX app" link opens the app\'s page there (default $TORCHX_DASHBOARD_URL)',
        "schema": {"type": ["string", "null"]},
    },
}

#: Hidden, relabelled and placeholder fields of the connection form.
UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden_fields": ["host", "schema", "port", "login"],
    "relabeling": {"password": "Secret environment (JSON)"},
    "placeholders": {
        "password": '{"AWS_SECRET_ACCESS_KEY": "..."}',
        "scheduler": "slurm",
        "cfg": '{"partition": "gpu", "time": "2:00:00"}',
        "session_name": "torchx",
        "env": '{"SLURM_CONF": "/etc/slurm/slurm.conf"}',
        "dashboard_url": "http://ml-host:8288",
    },
}


def provider_connection_type() -> dict[str, Any]:
    """The ``connection-types`` entry of the provider info."""
    return {
        "connection-type": CONN_TYPE,
        "hook-class-name": HOOK_CLASS,
        "hook-name": "TorchX",
        "conn-fields": CONN_FIELDS,
        "ui-field-behaviour": {
            "hidden-fields": UI_FIELD_BEHAVIOUR["hidden_fields"],
            "relabeling": UI_FIELD_BEHAVIOUR["relabeling"],
            "placeholders": UI_FIELD_BEHAVIOUR["placeholders"],
        },
    }
