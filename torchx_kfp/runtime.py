"""What the launcher step does at run time: one app through the shared lifecycle.

This module is what the KFP launcher component calls inside its pod (see
:mod:`torchx_kfp.launcher`). The life of the app (submit or reattach, watch with one grace
clock, follow logs, cancel, report a failure) is :class:`torchx_core.runner.AppLifecycle`; this
module only adds the KFP glue:

* **identity**: the pipeline job id, the task name, the task id placeholder (one per
  ``dsl.ParallelFor`` iteration, the same for a retry of it) and a digest of the AppDef;
  outside a pipeline (no job id) every call is its own step and submits a new app;
* **owner**: ``kfp:<job>/<task>/<task id>@<host>/<pid>``, one per attempt (a retry is a new pod);
  the exit handler finds a job's apps by that prefix;
* **SIGTERM/SIGINT**: KFP terminates a step by signalling its pod; the handler cancels the app
  only if this attempt still owns it, then exits ``128 + signal``;
* **outputs**: :class:`LaunchResult` (``app_handle``, ``state``, ``status_json``, ``ui_url``);
  a failed app raises :class:`~torchx_core.runner.AppFailedError` (the step fails);
  what the app recorded through its tracker goes on the step's ``tracker_metrics`` and
  ``tracker_artifacts`` artifacts (:func:`publish_tracker_results`).

It imports nothing from kfp.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

from torchx_core.runner import (
    AppLifecycle,
    LogFollower,
    Observation,
    Runner,
    app_name,
    get_runner,
    tracker_results,
)
from torchx_core.specs import AppDef, AppState, Resource, is_terminal
from torchx_kfp.errors import InvalidKfpOptionsError
from torchx_kfp.states import step_outcome

__all__ = [
    "LaunchResult",
    "build_app",
    "cancel_job_apps",
    "parse_cfg_json",
    "publish_tracker_results",
    "resource_from_task_config",
    "run_launcher",
    "step_identity",
    "step_owner",
]

logger: logging.Logger = logging.getLogger(__name__)

RunnerFactory = Callable[[], Runner]
_OWNER_PREFIX = "kfp:"


@dataclass(frozen=True)
class LaunchResult:
    """The launcher step's outputs.

    Args:
        app_handle: the app's handle (``{scheduler}://{session}/{app_id}``)
        state: the final AppState name (``"SUCCEEDED"``)
        status_json: the final AppStatus as JSON
        ui_url: the scheduler's UI URL for the app ("" if none)
        reattached: True if the step found the app already submitted (a retried step)
    """

    app_handle: str
    state: str
    status_json: str
    ui_url: str
    reattached: bool = False


# -- identity and owner ------------------------------------------------------------------------


def step_identity(app: AppDef, job_id: str, task_name: str, task_id: str = "") -> tuple[str, ...]:
    """The identity the app of a launcher step is named from (``torchx_core.runner.app_name``).

    ``(job_id, task_name, task_id, <sha256 of the AppDef's canonical JSON>)``: the same for every
    attempt of one step, different for two tasks, two ParallelFor iterations (``task_id``) or
    two AppDefs. Without a job id (not in a pipeline) a random identity: a fresh app.
    """
    if not job_id:
        return (f"standalone-{uuid.uuid4().hex}",)
    spec = json.dumps(app.to_dict(), sort_keys=True, separators=(",", ":"))
    return (job_id, task_name, task_id, hashlib.sha256(spec.encode()).hexdigest())


def step_owner(job_id: str, task_name: str, task_id: str = "") -> str:
    """This attempt's owner token: ``kfp:<job>/<task>/<task id>@<host>/<pid>``."""
    return f"{_OWNER_PREFIX}{job_id}/{task_name}/{task_id}@{socket.gethostname()}/{os.getpid()}"


# -- inputs --------------------------------------------------------------------------------------


def parse_cfg_json(cfg_json: str) -> dict[str, Any]:
    """The run config carried as a JSON object string ("" for none).

    JSON keeps the value types the scheduler's runopts declare (an int stays an int; a KFP
    ``dict`` parameter would have made it a float).

    Raises:
        InvalidKfpOptionsError: not a JSON object
    """
    if not cfg_json:
        return {}
    try:
        cfg = json.loads(cfg_json)
    except (TypeError, ValueError) as e:
        raise InvalidKfpOptionsError(
            f"cfg_json {cfg_json!r} is not JSON ({e}); pass json.dumps(cfg)"
        ) from e
    if not isinstance(cfg, dict):
        raise InvalidKfpOptionsError(f"cfg_json must hold a JSON object, got {cfg_json!r}")
    return cfg


_QUANTITY_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]*)$")
_MEM_UNITS: Mapping[str, float] = {
    "": 1,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 1e-3,
}


def _quantity(value: object, what: str) -> float:
    m = _QUANTITY_RE.match(str(value).strip())
    if not m or m.group(2) not in _MEM_UNITS:
        raise InvalidKfpOptionsError(
            f"{what}: {value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi', '512Mi')"
        )
    return float(m.group(1)) * _MEM_UNITS[m.group(2)]


def resource_from_task_config(resources: Mapping[str, Any] | None, base: Resource) -> Resource:
    """Applies the resources asked on the launcher task (``TaskConfig.resources``) to ``base``.

    ``resources`` is a Kubernetes ``ResourceRequirements`` dict (``{"limits": {...},
    "requests": {...}}``); limits win over requests. cpu rounds up to whole cores, memory is
    converted to MiB, and any ``*/gpu`` key sets the gpu count (its name becomes the
    ``accelerator_type`` capability). Unset values keep ``base``'s.

    >>> resource_from_task_config({"limits": {"cpu": "1500m", "memory": "2Gi"}},
    ...                           Resource(cpu=1, gpu=0, memMB=512))
    Resource(cpu=2, gpu=0, memMB=2048, capabilities={}, devices={}, tags={})

    Raises:
        InvalidKfpOptionsError: a value is not a valid quantity
    """
    if not resources:
        return base
    if not isinstance(resources, Mapping):
        raise InvalidKfpOptionsError(f"task_config.resources must be a dict, got {resources!r}")
    merged: dict[str, Any] = {}
    for section in ("requests", "limits"):
        part = resources.get(section) or {}
        if not isinstance(part, Mapping):
            raise InvalidKfpOptionsError(f"task_config.resources.{section} must be a dict")
        merged.update(part)
    cpu, mem, gpu = base.cpu, base.memMB, base.gpu
    capabilities = dict(base.capabilities)
    for key, value in merged.items():
        if key == "cpu":
            cpu = max(1, math.ceil(_quantity(value, "cpu") - 1e-9))
        elif key == "memory":
            mem = max(1, math.ceil(_quantity(value, "memory") / 2**20))
        elif key.endswith("/gpu"):
            gpu = int(_quantity(value, key))
            capabilities["accelerator_type"] = key
    return Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem,
        capabilities=capabilities,
        devices=dict(base.devices),
        tags=dict(base.tags),
    )


def build_app(
    app_json: str = "",
    component: str = "",
    component_args: Sequence[str] | None = None,
    materialize: Callable[[str, list[str]], AppDef] | None = None,
) -> AppDef:
    """Builds the AppDef from its JSON form, or from a component name and its arguments.

    Args:
        app_json: ``json.dumps(app.to_dict())``
        component: a component name (``utils.echo``, ``dist.ddp``, ``path/to/file.py:fn``)
        component_args: the component's arguments, as on the command line
        materialize: builds a component's AppDef (a Runner's ``materialize_component``, which
            applies ``.torchxconfig`` component defaults)

    Raises:
        InvalidKfpOptionsError: neither or both of app_json and component are given, or the
            JSON is malformed
    """
    if bool(app_json) == bool(component):
        raise InvalidKfpOptionsError(
            "Give exactly one of app_json (an AppDef as JSON) or component (a component name);"
            f" got app_json={'set' if app_json else 'empty'},"
            f" component={component or 'empty'!r}."
        )
    if app_json:
        try:
            data = json.loads(app_json)
        except json.JSONDecodeError as e:
            raise InvalidKfpOptionsError(
                f"app_json is not valid JSON ({e}); pass json.dumps(app.to_dict())"
            ) from e
        if not isinstance(data, dict):
            raise InvalidKfpOptionsError(f"app_json must hold a JSON object, got {type(data)}")
        return AppDef.from_dict(data)
    if materialize is None:
        with get_runner() as runner:
            return runner.materialize_component(component, list(component_args or []))
    return materialize(component, list(component_args or []))


def _with_env_and_resources(
    app: AppDef, env: Mapping[str, Any] | None, resources: Mapping[str, Any] | None
) -> AppDef:
    if env and not isinstance(env, Mapping):
        raise InvalidKfpOptionsError(f"env must be a dict, got {env!r}")
    extra = {str(k): str(v) for k, v in (env or {}).items()}
    return replace(
        app,
        roles=[
            replace(
                r, env={**r.env, **extra}, resource=resource_from_task_config(resources, r.resource)
            )
            for r in app.roles
        ],
    )


# -- stop signals --------------------------------------------------------------------------------


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _ignore_stop_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    _ignore_stop_signals()  # first: a second SIGTERM must not interrupt the cancel it triggers
    raise _Terminated(signum)


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """SIGTERM/SIGINT raise :class:`_Terminated` inside the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_terminated) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stdout_sink(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# -- the step ------------------------------------------------------------------------------------


def run_launcher(
    *,
    app_json: str = "",
    component: str = "",
    component_args: Sequence[str] | None = None,
    scheduler: str = "local_cwd",
    cfg_json: str = "",
    env: Mapping[str, Any] | None = None,
    job_id: str = "",
    task_name: str = "",
    task_id: str = "",
    wait_interval: float = 1.0,
    unknown_state_timeout: float = 300.0,
    resources: Mapping[str, Any] | None = None,
    dashboard_url: str = "",
    stream_logs: bool = True,
    log_sink: Callable[[str], None] = _stdout_sink,
    runner_factory: RunnerFactory | None = None,
) -> LaunchResult:
    """The launcher step's body: build the app, run it to the end, return the outputs or raise.

    Args:
        app_json: the AppDef as JSON (``json.dumps(app.to_dict())``)
        component: or a component name (``utils.echo``) ...
        component_args: ... and its arguments
        scheduler: the scheduler to run on
        cfg_json: the scheduler's run config as a JSON object ("" for none)
        env: environment variables added to (or replacing those of) every role
        job_id: the pipeline job id (empty outside a pipeline: a fresh app every call)
        task_name: the pipeline task name
        task_id: the pipeline task id (tells ParallelFor iterations apart)
        wait_interval: the longest pause between two status polls (seconds)
        unknown_state_timeout: seconds an UNKNOWN, unreadable or vanished app is tolerated
        resources: resources asked on the launcher task (``TaskConfig.resources``), applied
            to every role of the app instead of being reserved by the launcher pod
        dashboard_url: a ``torchx dashboard`` address: ``ui_url`` is then the app's page there
            ("" : ``$TORCHX_DASHBOARD_URL``, else the scheduler's UI URL)
        stream_logs: stream replica logs to the step log
        log_sink: where streamed log lines go (default: stdout, the step log)
        runner_factory: returns a Runner (default ``get_runner()``; tests pass a fake's)

    Raises:
        AppFailedError: the app ended FAILED (AppCancelledError: CANCELLED; AppVanishedError:
            vanished or UNKNOWN past ``unknown_state_timeout``)
        InvalidKfpOptionsError: the arguments are invalid
        SystemExit: the step was terminated (SIGTERM/SIGINT); the app was cancelled if owned
    """
    cfg = parse_cfg_json(cfg_json)
    with (runner_factory or get_runner)() as runner:
        app = build_app(app_json, component, component_args, runner.materialize_component)
        app = _with_env_and_resources(app, env, resources)
        life = AppLifecycle(
            runner,
            scheduler,
            owner=step_owner(job_id, task_name, task_id),
            cfg=cfg,
            unknown_timeout=unknown_state_timeout,
            poll_interval=max(wait_interval, 0.01),
        )
        result = _run(
            life, app, step_identity(app, job_id, task_name, task_id), stream_logs, log_sink
        )
    link = _dashboard_link(result.app_handle, dashboard_url)
    return replace(result, ui_url=link) if link else result


def _dashboard_link(app_handle: str, dashboard_url: str) -> str | None:
    """The app's dashboard page when one is configured (a malformed ``$TORCHX_DASHBOARD_URL``
    is logged and ignored: a link never fails the step)."""
    from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_app_url

    try:
        link = dashboard_app_url(app_handle, dashboard_url)
    except InvalidDashboardUrlError as e:
        logger.warning("%s; the ui_url output stays the scheduler's UI URL", e)
        return None
    if link:
        logger.info("app %s on the dashboard: %s", app_handle, link)
    return link


def _run(
    life: AppLifecycle,
    app: AppDef,
    identity: tuple[str, ...],
    stream_logs: bool,
    log_sink: Callable[[str], None],
) -> LaunchResult:
    handle: str | None = None
    follower: LogFollower | None = None
    drain = 15.0  # seconds the log streams get to drain once the app ended
    with _stop_signals_raise():
        try:
            attached = life.attach(app, identity)
            handle = attached.app_handle
            if stream_logs:
                # from each replica's first line, also for an app an earlier attempt started:
                # that attempt's step log is gone with its pod (every line reaches this log once)
                follower = life.follow_logs(handle, log_sink)
            status = life.wait(handle, on_change=lambda obs: _log_phase(attached.app_handle, obs))
        except (_Terminated, KeyboardInterrupt) as e:
            _ignore_stop_signals()  # a repeated signal must not interrupt the cancel
            signum = e.signum if isinstance(e, _Terminated) else int(signal.SIGINT)
            logger.warning("step terminated by signal %d; cancelling the app", signum)
            if handle is None:
                life.cancel_by_name(app_name(app.name, identity))
            else:
                life.cancel(handle)  # only if this attempt still owns it
            drain = 2.0  # a superseded app keeps running: do not wait for its streams
            raise SystemExit(128 + signum) from None
        finally:
            if follower is not None:
                follower.stop(drain)
    return LaunchResult(
        app_handle=attached.app_handle,
        state=AppState(status.state).name,
        status_json=json.dumps(status.to_json()),
        ui_url=status.ui_url or "",
        reattached=attached.how != "submitted",
    )


def _log_phase(handle: str, obs: Observation) -> None:
    logger.info("app %s is %s: the step will %s", handle, obs.phase, step_outcome(obs.phase))


def cancel_job_apps(
    *,
    job_id: str,
    scheduler: str = "local_cwd",
    cfg_json: str = "",
    runner_factory: RunnerFactory | None = None,
) -> list[str]:
    """Cancels every unfinished app that the launcher steps of pipeline job ``job_id`` own.

    The second line of defence behind the launcher's SIGTERM handler, for a ``dsl.ExitHandler``
    step (KFP may kill a step without a SIGTERM, e.g. when its node is lost). Apps are found by
    the owner recorded with them (:func:`step_owner`), so only schedulers that keep owners
    (``local``, ``local_cwd``, ``slurm``, ``kubernetes``) are covered. Cancelling is idempotent.

    Args:
        job_id: the pipeline job id (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``)
        scheduler: the scheduler the launcher steps ran on
        cfg_json: the scheduler's run config as a JSON object (for listing)
        runner_factory: returns a Runner (default ``get_runner()``)

    Returns:
        The handles of the apps that were cancelled.

    Raises:
        InvalidKfpOptionsError: ``job_id`` is empty
    """
    if not job_id:
        raise InvalidKfpOptionsError(
            "job_id is empty; pass dsl.PIPELINE_JOB_ID_PLACEHOLDER (torchx_kfp.cancel_apps_on_exit"
            " does)"
        )
    prefix = f"{_OWNER_PREFIX}{job_id}/"
    with (runner_factory or get_runner)() as runner:
        live = [
            a.app_handle
            for a in runner.list(scheduler, parse_cfg_json(cfg_json) or None)
            if not is_terminal(AppState(a.state))
        ]
        handles = [h for h in live if (runner.owner(h) or "").startswith(prefix)]
        for handle in handles:
            logger.info("cancelling %s, left running by pipeline job %s", handle, job_id)
            runner.cancel(handle)
        return handles


def publish_tracker_results(app_handle: str, metrics: Any | None, artifacts: Any | None) -> None:
    """Puts what ``app_handle`` recorded through its tracker on the step's output artifacts.

    Numeric metadata become metrics of ``metrics`` (a ``dsl.Metrics``); the tracker artifacts
    (name -> path, metadata) go in the metadata and the file of ``artifacts`` (a
    ``dsl.Artifact``). Nothing happens without a configured tracker or recorded results.
    """
    results = tracker_results(app_handle)
    if results is None:
        return
    logger.info(
        "tracker results of %s (%s): %s",
        app_handle,
        results.tracker,
        json.dumps(results.to_json()["metadata"]),
    )
    if metrics is not None:
        for name, value in results.metrics().items():
            metrics.log_metric(name, value)
    if artifacts is not None:
        listing = results.to_json()["artifacts"]
        artifacts.metadata.update({"app_handle": app_handle, "artifacts": listing})
        with open(artifacts.path, "w", encoding="utf-8") as f:
            json.dump(listing, f)
