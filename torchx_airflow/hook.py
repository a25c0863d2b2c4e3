"""``TorchXHook``: a TorchX Runner from an Airflow connection of type ``torchx``.

Users keep the scheduler, its run options, the session name and the scheduler client's
environment (and secrets) in one connection; operators, sensors and triggers name it with
``torchx_conn_id`` (default ``torchx_default``). Fields: :py:mod:`torchx_airflow._connection`.

The environment is applied to this process (``os.environ``) when a Runner is built, because
scheduler clients read it there (``sbatch`` inherits it, boto3 and the Kubernetes client read
it). Connections used in one process (a triggerer runs many triggers) should agree on the
values of the variables they set; a conflict is logged (names only, never values).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from torchx_airflow._airflow import BaseHook
from torchx_airflow._connection import (
    CONN_TYPE,
    DEFAULT_CONN_ID,
    EXTRA_KEYS,
    UI_FIELD_BEHAVIOUR,
)
from torchx_airflow.errors import InvalidConnectionError
from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_base

if TYPE_CHECKING:
    from torchx_core.runner import Runner

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["ConnectionSettings", "TorchXHook", "runner_for"]


@dataclass(frozen=True)
class ConnectionSettings:
    """What a ``torchx`` connection says (``secret_env`` is never logged or serialized)."""

    scheduler: str | None = None
    cfg: dict[str, Any] = field(default_factory=dict)
    session_name: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    dashboard_url: str | None = None

    @classmethod
    def parse(
        cls, conn_id: str, extra: Mapping[str, Any], password: str | None
    ) -> ConnectionSettings:
        """Reads a connection's extra and password; raises once, listing every problem.

        Extra keys may also carry the UI's prefix (``extra__torchx__scheduler``).
        """
        prefix = f"extra__{CONN_TYPE}__"
        values = {k.removeprefix(prefix): v for k, v in extra.items()}
        problems = [
            f"unknown extra key {k!r} (valid: {', '.join(EXTRA_KEYS)})"
            for k in values
            if k not in EXTRA_KEYS
        ]
        scheduler = values.get("scheduler") or None
        if scheduler is not None and not isinstance(scheduler, str):
            problems.append(f"scheduler must be a scheduler name, got {scheduler!r}")
        session = values.get("session_name") or None
        if session is not None and not isinstance(session, str):
            problems.append(f"session_name must be a string, got {session!r}")
        dashboard = values.get("dashboard_url") or None
        if dashboard is not None:
            try:
                dashboard_base(dashboard if isinstance(dashboard, str) else repr(dashboard))
            except InvalidDashboardUrlError as e:
                problems.append(f"dashboard_url: {e}")
        cfg = _json_object(problems, "cfg", values.get("cfg"))
        env = _json_object(problems, "env", values.get("env"), strings=True)
        secret = _json_object(
            problems, "password (secret environment)", password, strings=True, show=False
        )
        if problems:
            raise InvalidConnectionError(
                f"torchx connection {conn_id!r}: "
                + "; ".join(problems)
                + ". Fix it in Admin > Connections (or `airflow connections add`)"
            )
        return cls(scheduler, cfg, session, env, secret, dashboard)


def _json_object(
    problems: list[str], name: str, value: Any, *, strings: bool = False, show: bool = True
) -> dict[str, Any]:
    """A JSON object given as a dict or a JSON string (empty: ``{}``)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            shown = f": {e}" if show else " (value not shown: it is secret)"
            problems.append(f"{name} must be a JSON object{shown}")
            return {}
    if not isinstance(value, dict):
        problems.append(f"{name} must be a JSON object, got {type(value).__name__}")
        return {}
    if strings and not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problems.append(f"{name} must map variable names to string values")
        return {}
    return dict(value)


class TorchXHook(BaseHook):
    """Builds TorchX Runners from a ``torchx`` connection.

    Args:
        torchx_conn_id: the connection (type ``torchx``)

    Example::

        hook = TorchXHook("slurm_cluster")
        with hook.get_conn() as runner:
            runner.run(app, hook.settings().scheduler, cfg=hook.settings().cfg)
    """

    conn_name_attr = "torchx_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "TorchX"

    def __init__(self, torchx_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(torchx_conn_id, str) or not torchx_conn_id.strip():
            raise InvalidConnectionError(
                f"torchx_conn_id must name a connection of type torchx, got {torchx_conn_id!r}"
            )
        self.torchx_conn_id = torchx_conn_id
        self._settings: ConnectionSettings | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hidden, relabelled and placeholder fields of the connection form."""
        return {
            k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in UI_FIELD_BEHAVIOUR.items()
        }

    def settings(self, *, missing_ok: bool = False) -> ConnectionSettings:
        """The connection's settings (read once).

        Args:
            missing_ok: a missing connection gives empty settings instead of an error (the
                operators' default ``torchx_default`` need not exist)

        Raises:
            InvalidConnectionError: the connection is missing (unless ``missing_ok``) or wrong
        """
        if self._settings is None:
            self._settings = self._read(missing_ok)
        return self._settings

    def _read(self, missing_ok: bool) -> ConnectionSettings:
        try:
            conn = self.get_connection(self.torchx_conn_id)
        except Exception as e:  # noqa: BLE001 - AirflowNotFoundException and lookup errors
            if missing_ok:
                return ConnectionSettings()
            raise InvalidConnectionError(
                f"no connection {self.torchx_conn_id!r} ({type(e).__name__}: {e}); define one of"
                f" type {CONN_TYPE!r} (Admin > Connections, `airflow connections add`, or an"
                f" AIRFLOW_CONN_{self.torchx_conn_id.upper()} variable)"
            ) from None
        if conn.conn_type not in (CONN_TYPE, None, ""):
            raise InvalidConnectionError(
                f"connection {self.torchx_conn_id!r} has type {conn.conn_type!r}; TorchX needs"
                f" type {CONN_TYPE!r}"
            )
        settings = ConnectionSettings.parse(
            self.torchx_conn_id, conn.extra_dejson or {}, conn.password
        )
        self._mask(settings)
        return settings

    @staticmethod
    def _mask(settings: ConnectionSettings) -> None:
        from torchx_airflow._airflow import mask_secret

        for value in settings.secret_env.values():
            mask_secret(value)

    def apply_env(self, settings: ConnectionSettings | None = None) -> None:
        """Sets the connection's environment (and secrets) in this process."""
        s = settings or self.settings()
        for name, value in {**s.env, **s.secret_env}.items():
            old = os.environ.get(name)
            if old is not None and old != value:
                self.log.warning(
                    "connection %s changes %s for this process", self.torchx_conn_id, name
                )
            os.environ[name] = value
        if s.env or s.secret_env:
            self.log.info(
                "scheduler client environment from connection %s: %s",
                self.torchx_conn_id,
                ", ".join(sorted({*s.env, *s.secret_env})),
            )

    def get_conn(self, *, missing_ok: bool = False) -> Runner:
        """A new Runner with the connection's session name and environment (close it after)."""
        from torchx_core.runner import get_runner

        settings = self.settings(missing_ok=missing_ok)
        self.apply_env(settings)
        return get_runner(settings.session_name)

    def test_connection(self) -> tuple[bool, str]:
        """Checks the connection as a task would use it: its fields, the scheduler name and the
        run options (strictly: unknown keys and wrong types fail, as in a task), then lists the
        apps on the scheduler; says what is wrong.

        The UI's Test button (``POST /api/v2/connections/test``) has Airflow test a copy of the
        edited connection under a throw-away id: the message names the edited connection's id
        instead where the API's request can be found on the call stack."""
        ok, message = self._test()
        edited = _edited_conn_id(self.torchx_conn_id)
        if edited is not None:
            message = message.replace(repr(self.torchx_conn_id), repr(edited))
        return ok, message

    def _test(self) -> tuple[bool, str]:
        from torchx_airflow._runtime import check_run_options

        try:
            settings = self.settings()
        except InvalidConnectionError as e:
            return False, str(e)
        if not settings.scheduler:
            return False, (
                f"connection {self.torchx_conn_id!r} names no scheduler: set the Scheduler field"
                " (e.g. slurm, kubernetes, local_cwd)"
            )
        try:
            with self.get_conn() as runner:
                try:
                    check_run_options(runner, settings.scheduler, settings.cfg)
                except Exception as e:  # noqa: BLE001 - reported to the user, not raised
                    return False, (
                        f"connection {self.torchx_conn_id!r}: scheduler {settings.scheduler!r}"
                        f" with run options {sorted(settings.cfg)}: {e}"
                    )
                apps = runner.list(settings.scheduler, settings.cfg or None)
        except Exception as e:  # noqa: BLE001 - reported to the user, not raised
            return False, (
                f"cannot list apps on scheduler {settings.scheduler!r}: {type(e).__name__}: {e}"
            )
        return True, (
            f"scheduler {settings.scheduler!r} and its run options are valid; it is reachable"
            f" and lists {len(apps)} app(s)"
        )


def _edited_conn_id(conn_id: str) -> str | None:
    """The id of the connection the user edits, when ``conn_id`` is the throw-away id Airflow's
    connection-test API gives its copy (its request handler holds both as ``transient_conn_id``
    and ``test_body.connection_id``); None elsewhere, or if Airflow's handler changed."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        local = frame.f_locals
        if local.get("transient_conn_id") == conn_id and "test_body" in local:
            edited = getattr(local["test_body"], "connection_id", None)
            return edited if isinstance(edited, str) and edited else None
        frame = frame.f_back
    return None


def runner_for(torchx_conn_id: str | None, factory: Callable[[], Runner] | None = None) -> Runner:
    """A new Runner: ``factory()`` if given (tests), else from the connection (the default
    ``torchx_default`` may be absent), else ``get_runner()``."""
    if factory is not None:
        return factory()
    if torchx_conn_id is None:
        from torchx_core.runner import get_runner

        return get_runner()
    return TorchXHook(torchx_conn_id).get_conn(missing_ok=torchx_conn_id == DEFAULT_CONN_ID)
