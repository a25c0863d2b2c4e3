"""Airflow glue around the shared app lifecycle (no Airflow imports at run time).

* the identity of a task instance (names its app) and the owner token of a task try;
* opening and closing Runners;
* the JSON form of an app status carried in XCom and trigger events.

Submitting, reattaching, watching, log following and cancelling are
:py:class:`torchx_core.runner.lifecycle.AppLifecycle`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from torchx_core.specs import AppState, AppStatus, parse_app_handle

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

    from torchx_airflow.hook import ConnectionSettings
    from torchx_core.runner import Runner

#: Builds a Runner; the default is ``torchx_core.runner.get_runner()``.
RunnerFactory = Callable[[], "Runner"]


@contextmanager
def open_runner(factory: RunnerFactory) -> Iterator[Runner]:
    """Opens a Runner from ``factory`` and closes it afterwards."""
    runner = factory()
    try:
        yield runner
    finally:
        runner.close()


def task_identity(ti: RuntimeTaskInstanceProtocol) -> tuple[str, str, str, int]:
    """``(dag_id, task_id, run_id, map_index)``: the same on every try of a task instance."""
    map_index = ti.map_index if ti.map_index is not None else -1
    return (str(ti.dag_id), str(ti.task_id), str(ti.run_id), int(map_index))


def owner_token(ti: RuntimeTaskInstanceProtocol) -> str:
    """The owner token of one task try, recorded with the app it submits or adopts:
    ``airflow:<dag>/<task>/<run>/<map index>#try=<n>``."""
    dag_id, task_id, run_id, map_index = task_identity(ti)
    return f"airflow:{dag_id}/{task_id}/{run_id}/{map_index}#try={int(ti.try_number or 1)}"


def replica_of(key: str) -> tuple[str, int]:
    """A log position's key ``"role/k"`` (``LogFollower.positions()``) -> ``(role, k)``."""
    role, _, k = key.rpartition("/")
    return role, int(k)


def scheduler_of(app_handle: str) -> str:
    """The scheduler name in an app handle (``{scheduler}://{session}/{app_id}``)."""
    return parse_app_handle(app_handle).scheduler_backend


def status_payload(app_handle: str, status: AppStatus | None) -> dict[str, Any]:
    """The JSON-able dict form of a status (``state`` ``"VANISHED"`` when ``status`` is None).

    Keys: ``app_handle``, ``state``, ``num_restarts``, ``msg``, ``structured_error_msg``,
    ``ui_url``, ``roles``.
    """
    if status is None:
        return {
            "app_handle": app_handle,
            "state": "VANISHED",
            "num_restarts": 0,
            "msg": "the scheduler does not know this app (any more)",
            "structured_error_msg": "<NONE>",
            "ui_url": None,
            "roles": [],
        }
    data = status.to_json()  # TorchX's form: replica states by number, the UI URL as "url"
    for role in data["roles"]:
        for replica in role["replicas"]:
            replica["state"] = str(AppState(replica["state"]))
    data["ui_url"] = data.pop("url")
    return {"app_handle": app_handle, **data}


def status_from_payload(payload: Mapping[str, Any]) -> AppStatus | None:
    """Reverses :py:func:`status_payload` (None for a vanished app)."""
    if payload.get("state") == "VANISHED":
        return None
    data = {k: v for k, v in payload.items() if k != "app_handle"}
    return AppStatus.from_json(data)


def check_run_options(runner: Runner, scheduler: str, cfg: dict[str, Any]) -> None:
    """Checks run options as a task does before it submits: unknown keys and wrong types are
    errors (as in the scheduler's dry run, unless it declares free-form options); an unknown
    scheduler too.

    Raises:
        UnknownSchedulerException: no scheduler of that name
        InvalidRunConfigException: a key is unknown (the valid ones listed) or a value is wrong
    """
    opts = runner.scheduler_run_opts(scheduler)
    opts.resolve(cfg, strict=not opts.free_form)


def conn_id_to_look_up(conn_id: str, settings: ConnectionSettings, default_id: str) -> str | None:
    """The connection a trigger should build its Runner from: ``conn_id``, or None when it is
    the default id and that connection is absent or empty (nothing to look up: a lookup of an
    absent connection costs a triggerer seconds)."""
    empty = not (
        settings.scheduler
        or settings.cfg
        or settings.session_name
        or settings.env
        or settings.secret_env
    )
    return None if conn_id == default_id and empty else conn_id
