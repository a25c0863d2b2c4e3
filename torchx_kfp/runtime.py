"""What the launcher step does at run time: run an AppDef through the Runner and watch it.

This module is what the KFP launcher component calls inside its pod (see
:mod:`torchx_kfp.launcher`). It imports nothing from kfp, only the public
``torchx_core.specs`` and ``torchx_core.runner`` API, so it can be unit-tested with a fake
runner and run for real against any scheduler.

The step:

1. builds the AppDef (from JSON, or a component name plus arguments),
2. names it deterministically from the pipeline job id and task name, and reattaches to a
   running (or already succeeded) app of that name instead of submitting twice,
3. submits it, streams every replica's log to the step log (stdout),
4. polls the status and maps it with :data:`torchx_kfp.states.STEP_OUTCOMES`,
5. cancels the app when the step is terminated (SIGTERM/SIGINT) or gives up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any

from torchx_core.specs import AppDef, AppState, AppStatus, Resource, is_terminal
from torchx_kfp.errors import AppFailedError, AppVanishedError, InvalidKfpOptionsError
from torchx_kfp.states import StepOutcome, step_outcome

__all__ = [
    "LaunchResult",
    "Launcher",
    "app_name_for_step",
    "belongs_to_job",
    "build_app",
    "cancel_job_apps",
    "resource_from_task_config",
    "run_launcher",
    "step_app_name",
]

logger: logging.Logger = logging.getLogger(__name__)

_MAX_NAME_LEN = 48
_DIGEST_LEN = 14
_JOB_DIGEST_LEN = 6


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


def _job_digest(job_id: str) -> str:
    return hashlib.sha256(f"job/{job_id}".encode()).hexdigest()[:_JOB_DIGEST_LEN]


def app_name_for_step(
    base: str, job_id: str, task_name: str, spec: str = "", task_id: str = ""
) -> str:
    """Names an app deterministically from the pipeline job, the task and the app itself.

    The same job id, task name and ``spec`` always give the same name, so a retried step finds
    the app its previous attempt submitted. ``spec`` tells apart the iterations of a
    ``dsl.ParallelFor`` loop, which share the task name: the launcher passes the AppDef's JSON
    (after the step's ``env`` and resources are applied), so iterations that launch different
    apps get different names, while iterations launching the very same app share it. The name
    ends with ``-<job digest><task digest>``, so every app of one pipeline job can be found (see
    :func:`cancel_job_apps`). Without a job id (not running in a pipeline) ``base`` is returned
    unchanged.

    >>> app_name_for_step("Train", "1234-abcd", "torchx-launcher")
    'train-torchx-launcher-f83698ff3ef51d'

    Args:
        base: the AppDef's own name (kept as a readable prefix)
        job_id: ``dsl.PIPELINE_JOB_ID_PLACEHOLDER`` at run time
        task_name: ``dsl.PIPELINE_TASK_NAME_PLACEHOLDER`` at run time
        spec: what the step launches (see :func:`step_app_name`); "" for the task alone
    """
    if not job_id:
        return base
    key = f"{job_id}/{task_name}" + (f"#{task_id}" if task_id else "") + (
        f"/{spec}" if spec else ""
    )
    task_digest = hashlib.sha256(key.encode()).hexdigest()
    digest = _job_digest(job_id) + task_digest[: _DIGEST_LEN - _JOB_DIGEST_LEN]
    readable = re.sub(r"[^a-z0-9]+", "-", f"{base}-{task_name}".lower()).strip("-")
    readable = readable[: _MAX_NAME_LEN - _DIGEST_LEN - 1].strip("-") or "app"
    if not readable[0].isalpha():
        readable = "a" + readable[: _MAX_NAME_LEN - _DIGEST_LEN - 2]
    return f"{readable}-{digest}"


def step_app_name(app: AppDef, job_id: str, task_name: str, task_id: str = "") -> str:
    """The name the launcher step gives ``app`` in pipeline job ``job_id``, task ``task_name``.

    :func:`app_name_for_step` with the AppDef's canonical JSON as ``spec``.
    """
    spec = json.dumps(app.to_dict(), sort_keys=True, separators=(",", ":"))
    return app_name_for_step(app.name, job_id, task_name, spec, task_id)


def belongs_to_job(app_name: str, job_id: str) -> bool:
    """True if ``app_name`` was given by :func:`app_name_for_step` for pipeline job ``job_id``."""
    if not job_id:
        return False
    suffix = app_name.rsplit("-", 1)[-1]
    return len(suffix) == _DIGEST_LEN and suffix.startswith(_job_digest(job_id))


_QUANTITY_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]*)$")
_MEM_UNITS: Mapping[str, float] = {
    "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 1e-3,
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
        materialize: builds a component's AppDef (default: a Runner's
            ``materialize_component``, which applies ``.torchxconfig`` component defaults)

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
        with _default_runner_factory() as runner:
            return runner.materialize_component(component, list(component_args or []))
    return materialize(component, list(component_args or []))


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Ignore repeats first: a second SIGTERM must not interrupt the cancellation it triggers.
    for other in _STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise _Terminated(signum)


RunnerFactory = Callable[[], Any]


def _default_runner_factory() -> Any:
    from torchx_core.runner import get_runner

    return get_runner()


def _stdout_sink(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclass
class Launcher:
    """Runs one AppDef through the Runner, the way the launcher step does.

    Args:
        scheduler: the scheduler to run on (``local_cwd``, ``slurm``, ``kubernetes``, ...)
        cfg: the scheduler's run config
        wait_interval: seconds between status polls
        unknown_state_timeout: seconds an app may stay UNKNOWN before the step fails
        cancel_timeout: seconds to wait for a cancelled app to reach a terminal state
        stream_logs: stream every replica's log to the step log
        log_sink: where log lines go (default: stdout, the step log)
        runner_factory: returns a Runner (default: ``torchx_core.runner.get_runner()``)

    Raises:
        InvalidKfpOptionsError: an option has the wrong type or value
    """

    scheduler: str = "local_cwd"
    cfg: Mapping[str, Any] = field(default_factory=dict)
    wait_interval: float = 1.0
    unknown_state_timeout: float = 300.0
    cancel_timeout: float = 60.0
    stream_logs: bool = True
    log_sink: Callable[[str], None] = _stdout_sink
    runner_factory: RunnerFactory = _default_runner_factory

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.scheduler, str) or not self.scheduler:
            problems.append(f"scheduler must be a non-empty str, got {self.scheduler!r}")
        if not isinstance(self.cfg, Mapping):
            problems.append(f"cfg must be a dict, got {self.cfg!r}")
        for name in ("wait_interval", "unknown_state_timeout", "cancel_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{name} must be a number >= 0, got {value!r}")
        if problems:
            raise InvalidKfpOptionsError("Invalid launcher options: " + "; ".join(problems))
        self._handle: str | None = None
        self._app_name: str | None = None

    # -- submission --------------------------------------------------------------------------

    def _find_existing(self, runner: Any, name: str) -> tuple[str, AppState] | None:
        """A reusable app named ``name``: a running one first, else a succeeded one."""
        try:
            apps = runner.list(self.scheduler, dict(self.cfg) or None)
        except Exception:
            logger.warning("could not list apps on %s; submitting anew", self.scheduler,
                           exc_info=True)
            return None
        candidates = [a for a in apps if getattr(a, "name", None) == name]
        for wanted in (lambda s: not is_terminal(s), lambda s: s == AppState.SUCCEEDED):
            for resp in candidates:
                if wanted(AppState(resp.state)):
                    return resp.app_handle, AppState(resp.state)
        return None

    def _submit_or_reattach(self, runner: Any, app: AppDef) -> tuple[str, bool]:
        existing = self._find_existing(runner, app.name)
        if existing is not None:
            handle, state = existing
            logger.info("reattaching to %s (%s), submitted by an earlier attempt", handle, state)
            self._handle = handle
            return handle, True
        handle = runner.run(app, self.scheduler, cfg=dict(self.cfg))
        self._handle = handle
        logger.info("launched %s on %s", handle, self.scheduler)
        return handle, False

    # -- logs --------------------------------------------------------------------------------

    def _log_threads(self, runner: Any, handle: str, app: AppDef) -> list[threading.Thread]:
        threads = []
        for role in app.roles:
            for k in range(role.num_replicas):
                t = threading.Thread(
                    target=self._pump_logs,
                    args=(runner, handle, role.name, k),
                    name=f"torchx-kfp-logs-{role.name}-{k}",
                    daemon=True,
                )
                t.start()
                threads.append(t)
        return threads

    def _pump_logs(self, runner: Any, handle: str, role: str, k: int) -> None:
        prefix = f"[{role}/{k}] "
        try:
            lines: Iterator[str] = runner.log_lines(handle, role, k=k, should_tail=True)
            for line in lines:
                self.log_sink(prefix + line.rstrip("\n"))
        except Exception as e:  # noqa: BLE001 - logs are best effort; status decides the step
            logger.warning("log stream for %s %s/%d ended: %s", handle, role, k, e)

    # -- watching ----------------------------------------------------------------------------

    def _watch(self, runner: Any, handle: str) -> AppStatus:
        unknown_since: float | None = None
        while True:
            status = runner.status(handle)
            if status is None:
                raise AppVanishedError(handle)
            outcome = step_outcome(status.state)
            if outcome in (StepOutcome.SUCCEED, StepOutcome.FAIL):
                return status
            if outcome == StepOutcome.POLL_THEN_FAIL:
                unknown_since = unknown_since or time.monotonic()
                if time.monotonic() - unknown_since >= self.unknown_state_timeout:
                    return status
            else:
                unknown_since = None
            time.sleep(self.wait_interval)

    def _cancel(self, runner: Any, handle: str | None, name: str) -> None:
        """Cancels the app (best effort, bounded by ``cancel_timeout``)."""
        if handle is None:
            found = self._find_existing(runner, name)
            handle = found[0] if found else None
        if handle is None:
            logger.warning("no app named %s to cancel", name)
            return
        logger.info("cancelling %s", handle)
        done = threading.Event()

        def cancel_and_wait() -> None:
            try:
                runner.cancel(handle)
                deadline = time.monotonic() + self.cancel_timeout
                while time.monotonic() < deadline:
                    status = runner.status(handle)
                    if status is None or is_terminal(status.state):
                        break
                    time.sleep(min(self.wait_interval, 0.5) or 0.1)
            except Exception:
                logger.warning("cancelling %s failed", handle, exc_info=True)
            finally:
                done.set()

        worker = threading.Thread(target=cancel_and_wait, name="torchx-kfp-cancel", daemon=True)
        worker.start()
        if not done.wait(self.cancel_timeout + 5):
            logger.warning("cancelling %s did not finish within %ss", handle, self.cancel_timeout)

    # -- the step ----------------------------------------------------------------------------

    def run(
        self, app: AppDef, job_id: str = "", task_name: str = "", task_id: str = ""
    ) -> LaunchResult:
        """Runs ``app`` to completion and returns the step outputs.

        Args:
            app: the app to run (renamed from ``job_id``/``task_name`` when given)
            job_id: the pipeline job id, for the deterministic app name
            task_name: the pipeline task name, for the deterministic app name
            task_id: the pipeline task id, for the deterministic app name

        Raises:
            AppFailedError: the app ended FAILED or CANCELLED, or stayed UNKNOWN too long
            AppVanishedError: the scheduler no longer knows the app
            SystemExit: the step was terminated (SIGTERM/SIGINT); the app was cancelled
        """
        app = replace(app, name=step_app_name(app, job_id, task_name, task_id))
        self._app_name = app.name
        self._handle = None  # a reused Launcher must not cancel its previous run's app
        runner = self.runner_factory()
        previous = self._install_signal_handlers()
        outcome: StepOutcome | None = None
        threads: list[threading.Thread] = []
        try:
            handle, reattached = self._submit_or_reattach(runner, app)
            if self.stream_logs:
                threads = self._log_threads(runner, handle, app)
            status = self._watch(runner, handle)
            outcome = step_outcome(status.state)
            if outcome == StepOutcome.POLL_THEN_FAIL:
                self._cancel(runner, handle, app.name)
            self._join_logs(threads)
            return self._result(handle, status, outcome, reattached)
        except (_Terminated, KeyboardInterrupt) as e:
            signum = e.signum if isinstance(e, _Terminated) else signal.SIGINT
            logger.warning("step terminated by signal %d; cancelling the app", signum)
            self._ignore_signals(previous)  # after Ctrl-C too (it bypasses _raise_terminated)
            self._cancel(runner, self._handle, app.name)
            raise SystemExit(128 + int(signum)) from None
        finally:
            self._restore_signal_handlers(previous)
            close = getattr(runner, "close", None)
            if callable(close):
                close()

    def _result(
        self, handle: str, status: AppStatus, outcome: StepOutcome, reattached: bool
    ) -> LaunchResult:
        if outcome == StepOutcome.SUCCEED:
            return LaunchResult(
                app_handle=handle,
                state=AppState(status.state).name,
                status_json=json.dumps(status.to_json()),
                ui_url=status.ui_url or "",
                reattached=reattached,
            )
        what = (
            f"stayed UNKNOWN for {self.unknown_state_timeout}s and was cancelled"
            if outcome == StepOutcome.POLL_THEN_FAIL
            else f"ended {AppState(status.state).name}"
        )
        raise AppFailedError(
            f"App {handle} {what}. Structured error: {status.structured_error_msg}\n"
            f"{status.format()}",
            app_handle=handle,
            status=status,
        )

    def _join_logs(self, threads: list[threading.Thread]) -> None:
        deadline = time.monotonic() + 10.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for signum in _STOP_SIGNALS:
            previous[signum] = signal.signal(signum, _raise_terminated)
        return previous

    @staticmethod
    def _ignore_signals(previous: Mapping[int, Any]) -> None:
        for signum in previous:
            signal.signal(signum, signal.SIG_IGN)

    @staticmethod
    def _restore_signal_handlers(previous: Mapping[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
    stream_logs: bool = True,
    runner_factory: RunnerFactory | None = None,
) -> LaunchResult:
    """The launcher step's body: build the app, run it, return the outputs or raise.

    Args:
        app_json: the AppDef as JSON (``json.dumps(app.to_dict())``)
        component: or a component name (``utils.echo``) ...
        component_args: ... and its arguments
        scheduler: the scheduler to run on
        cfg_json: the scheduler's run config as a JSON object ("" for none)
        env: environment variables added to (or replacing those of) every role
        job_id: the pipeline job id (deterministic naming; empty outside a pipeline)
        task_name: the pipeline task name (deterministic naming)
        task_id: the pipeline task id (tells ParallelFor iterations apart)
        wait_interval: seconds between status polls
        unknown_state_timeout: seconds an UNKNOWN app is tolerated
        resources: resources asked on the launcher task (``TaskConfig.resources``), applied
            to every role of the app instead of being reserved by the launcher pod
        stream_logs: stream replica logs to the step log
        runner_factory: returns a Runner (tests inject a fake)

    Raises:
        AppFailedError: the app did not succeed
        AppVanishedError: the app disappeared
        InvalidKfpOptionsError: the arguments are invalid
    """
    factory = runner_factory or _default_runner_factory
    materialize = None
    if component:

        def materialize(name: str, args: list[str]) -> AppDef:
            runner = factory()
            try:
                return runner.materialize_component(name, args)
            finally:
                close = getattr(runner, "close", None)
                if callable(close):
                    close()

    app = build_app(app_json, component, component_args, materialize)
    if env:
        if not isinstance(env, Mapping):
            raise InvalidKfpOptionsError(f"env must be a dict, got {env!r}")
        extra = {str(k): str(v) for k, v in env.items()}
        app = replace(app, roles=[replace(r, env={**r.env, **extra}) for r in app.roles])
    if resources:
        app = replace(
            app,
            roles=[
                replace(r, resource=resource_from_task_config(resources, r.resource))
                for r in app.roles
            ],
        )
    launcher = Launcher(
        scheduler=scheduler,
        cfg=parse_cfg_json(cfg_json),
        wait_interval=wait_interval,
        unknown_state_timeout=unknown_state_timeout,
        stream_logs=stream_logs,
        runner_factory=factory,
    )
    return launcher.run(app, job_id=job_id, task_name=task_name, task_id=task_id)


def cancel_job_apps(
    *,
    job_id: str,
    scheduler: str = "local_cwd",
    cfg_json: str = "",
    runner_factory: RunnerFactory | None = None,
) -> list[str]:
    """Cancels every unfinished app that the launcher steps of pipeline job ``job_id`` started.

    The second line of defence behind the launcher's SIGTERM handler, for a ``dsl.ExitHandler``
    step (KFP may kill a step without a SIGTERM, e.g. when its node is lost). Apps are found by
    their deterministic names (:func:`app_name_for_step`). Cancelling is idempotent.

    Args:
        job_id: the pipeline job id (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``)
        scheduler: the scheduler the launcher steps ran on
        cfg_json: the scheduler's run config as a JSON object (for listing)
        runner_factory: returns a Runner (tests inject a fake)

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
    runner = (runner_factory or _default_runner_factory)()
    try:
        apps = runner.list(scheduler, parse_cfg_json(cfg_json) or None)
        handles = [
            a.app_handle
            for a in apps
            if belongs_to_job(a.name, job_id) and not is_terminal(AppState(a.state))
        ]
        for handle in handles:
            logger.info("cancelling %s, left running by pipeline job %s", handle, job_id)
            runner.cancel(handle)
        return handles
    finally:
        close = getattr(runner, "close", None)
        if callable(close):
            close()
