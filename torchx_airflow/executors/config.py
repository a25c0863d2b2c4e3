"""The settings of :class:`~torchx_airflow.executors.TorchXExecutor` and their per-task overrides.

Read from the ``[torchx_executor]`` section of the Airflow configuration (or its
``AIRFLOW__TORCHX_EXECUTOR__<KEY>`` variables), optionally completed by a ``torchx`` connection
(``conn_id``: its scheduler, run options, session name and client environment), and overridden
per task by ``executor_config={"torchx": {...}}``. Every value is checked before anything runs;
a wrong one raises :class:`InvalidExecutorConfigError` naming every problem and the valid keys.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torchx_airflow._executor_options import OVERRIDE_KEYS, SECTION, SETTING_KEYS
from torchx_core.runner.step_settings import (
    COUNT,
    SETTINGS,
    TEXT,
    Setting,
    unknown_key_problem,
)
from torchx_core.specs import Resource, resource
from torchx_core.specs.errors import TorchXError

__all__ = [
    "OVERRIDE_KEYS",
    "SECTION",
    "SETTING_KEYS",
    "ExecutorSettings",
    "InvalidExecutorConfigError",
    "TaskSettings",
]

#: the key of ``executor_config`` this executor reads
EXECUTOR_CONFIG_KEY = "torchx"
#: the section's keys as Airflow gives them (its parser lowers option names: ``memmb``)
_BY_LOWER = {k.lower(): k for k in SETTING_KEYS}


class InvalidExecutorConfigError(TorchXError, ValueError):
    """The executor's configuration or a task's ``executor_config`` is wrong (a retry cannot fix
    it); the message lists every problem and the valid keys."""

    permanent = True


@dataclass(frozen=True)
class TaskSettings:
    """How one task's app is built and where it runs (the section plus the task's overrides)."""

    scheduler: str = "local_cwd"
    cfg: dict[str, Any] = field(default_factory=dict)
    image: str = ""
    resource: str | None = None
    cpu: int = 1
    gpu: int = 0
    memMB: int = 1024
    env: dict[str, str] = field(default_factory=dict)

    def role_resource(self) -> Resource:
        """The named resource if set, else cpu/gpu/memMB."""
        return resource(cpu=self.cpu, gpu=self.gpu, memMB=self.memMB, h=self.resource)

    def override(self, executor_config: Mapping[str, Any] | None) -> TaskSettings:
        """These settings with a task's ``executor_config["torchx"]`` applied.

        ``cfg`` and ``env`` are merged over the section's (the section's ``cfg`` is dropped when
        the task names another scheduler).

        Raises:
            InvalidExecutorConfigError: unknown keys or wrong values
        """
        raw = (executor_config or {}).get(EXECUTOR_CONFIG_KEY)
        if raw is None:
            return self
        if not isinstance(raw, Mapping):
            raise InvalidExecutorConfigError(
                f'executor_config["{EXECUTOR_CONFIG_KEY}"] must be a dict with keys among'
                f" {', '.join(OVERRIDE_KEYS)}; got {type(raw).__name__}"
            )
        problems = _unknown(raw, OVERRIDE_KEYS, f'executor_config["{EXECUTOR_CONFIG_KEY}"]')
        values = _checked({k: v for k, v in raw.items() if k in OVERRIDE_KEYS}, problems)
        if problems:
            raise InvalidExecutorConfigError("invalid executor_config: " + "; ".join(problems))
        base_cfg = self.cfg if values.get("scheduler", self.scheduler) == self.scheduler else {}
        values["cfg"] = {**base_cfg, **values.get("cfg", {})}
        values["env"] = {**self.env, **values.get("env", {})}
        if "resource" not in values and {"cpu", "gpu", "memMB"} & set(values):
            values["resource"] = None  # raw numbers given: they win over the section's name
        return dataclasses.replace(self, **values)


@dataclass(frozen=True)
class ExecutorSettings:
    """The whole ``[torchx_executor]`` section.

    Args:
        task: the defaults of every task's app
        conn_id: a ``torchx`` connection (scheduler, cfg, session name, client environment)
        session_name: the Runner's session name (part of every app handle)
        python: the interpreter that runs the task in the app (must have Airflow's task SDK and
            this package installed); default: the scheduler's own
        execution_api_server_url: the Execution API URL the app reaches (default: Airflow's
            ``[core] execution_api_server_url``); from compute nodes, not ``localhost``
        poll_interval: seconds between two batched status reads (``sync``)
        unknown_timeout: seconds an app may stay UNKNOWN or unknown to its scheduler in a row
        kill_grace: seconds an app may run on after its task instance ended (marked failed...)
        tail_lines: log lines of a failed app reported to Airflow
        submit_retries: retries of a submit that failed for a reason a retry may fix (not a
            configuration error), 2 s, 4 s, 8 s... apart, before the task's try fails
        cancel_on_end: whether ``end()`` (a scheduler's clean shutdown) cancels the apps it owns
            (default False: they run on and the next scheduler adopts them, as Airflow's
            Celery and Kubernetes executors leave their work)
        warm_start: whether apps on the local schedulers are forked from a warm interpreter
            (default True; ``torchx_airflow._fork_server``): a start as cheap as
            LocalExecutor's, falling back to a fresh interpreter when the server is unreachable
    """

    task: TaskSettings = field(default_factory=TaskSettings)
    conn_id: str | None = None
    session_name: str = "torchx"
    python: str = field(default_factory=lambda: sys.executable)
    execution_api_server_url: str | None = None
    poll_interval: float = 2.0
    unknown_timeout: float = 300.0
    kill_grace: float = 60.0
    tail_lines: int = 50
    submit_retries: int = 2
    cancel_on_end: bool = False
    warm_start: bool = True
    #: the keys the section set (a value equal to the default is still the section's choice)
    explicit: frozenset[str] = field(default=frozenset(), compare=False)

    @staticmethod
    def from_section(section: Mapping[str, Any] | None) -> ExecutorSettings:
        """Parses the section's values (strings from the config, or typed values).

        Raises:
            InvalidExecutorConfigError: unknown keys or wrong values (all listed)
        """
        raw = {
            _BY_LOWER.get(k.lower(), k): v
            for k, v in (section or {}).items()
            if v not in (None, "")
        }
        where = f"[{SECTION}] (airflow.cfg, or AIRFLOW__{SECTION.upper()}__<KEY>)"
        problems = _unknown(raw, SETTING_KEYS, where)
        values = _checked({k: v for k, v in raw.items() if k in SETTING_KEYS}, problems)
        if problems:
            raise InvalidExecutorConfigError(
                f"invalid [{SECTION}] settings: " + "; ".join(problems)
            )
        task = TaskSettings(**{k: v for k, v in values.items() if k in OVERRIDE_KEYS})
        if not task.image:
            task = dataclasses.replace(task, image=os.getcwd())
        rest = {k: v for k, v in values.items() if k not in OVERRIDE_KEYS}
        return ExecutorSettings(task=task, explicit=frozenset(values), **rest)

    def with_connection(
        self, scheduler: str | None, cfg: Mapping[str, Any], session_name: str | None
    ) -> ExecutorSettings:
        """These settings completed by a connection's values (the section wins where it set a
        key, even to the default's value)."""
        task = self.task
        if scheduler and "scheduler" not in self.explicit:
            task = dataclasses.replace(task, scheduler=scheduler)
        task = dataclasses.replace(task, cfg={**dict(cfg), **task.cfg})
        session = (
            session_name
            if session_name and "session_name" not in self.explicit
            else self.session_name
        )
        return dataclasses.replace(self, task=task, session_name=session)


# -- parsing ------------------------------------------------------------------------------------

_STR = (
    "scheduler",
    "image",
    "resource",
    "conn_id",
    "session_name",
    "python",
    "execution_api_server_url",
)
#: the section's numbers and switches, read by the table of step settings (one verdict and one
#: wording with every other entry point; strings from the config file are trimmed)
_SETTINGS: dict[str, Setting] = {
    **{k: Setting(k, TEXT, example="'...'") for k in _STR},
    "cpu": Setting("cpu", COUNT, 1, example="1"),
    "gpu": Setting("gpu", COUNT, 0, example="0"),
    "memMB": Setting("memMB", COUNT, 1024, example="1024"),
    "tail_lines": SETTINGS["tail_lines"],
    "poll_interval": SETTINGS["poll_interval"],
    "unknown_timeout": SETTINGS["unknown_timeout"],
    "kill_grace": SETTINGS["kill_grace"],
    "submit_retries": SETTINGS["retries"],
    "cancel_on_end": SETTINGS["flag"],
    "warm_start": SETTINGS["flag"],
}


def _unknown(raw: Mapping[str, Any], valid: tuple[str, ...], where: str) -> list[str]:
    return [unknown_key_problem(key, valid, where) for key in raw if key not in valid]


def _checked(values: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """Typed values; appends one problem per wrong value."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        setting = _SETTINGS.get(key)
        if setting is not None:
            before = len(problems)
            parsed = setting.read(value, problems, key)
            if len(problems) == before:
                out[key] = parsed
            continue
        try:
            out[key] = _object(key, value)
        except (TypeError, ValueError) as e:
            problems.append(f"{key}: {e}")
    return out


def _object(key: str, value: Any) -> dict[str, Any]:
    """cfg, env: JSON objects (a string in the config file)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise ValueError(f"must be a JSON object, got {value!r:.80} ({e})") from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"must be an object with string keys, got {value!r:.80}")
    if key == "env":
        bad = [k for k, v in value.items() if not isinstance(v, str)]
        if bad:
            raise TypeError(f"values must be strings, not for {bad}")
    return dict(value)
