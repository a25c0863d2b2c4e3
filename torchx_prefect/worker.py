"""A Prefect worker that runs each flow run as a TorchX app, on any scheduler.

``prefect work-pool create my-pool --type torchx`` then ``prefect worker start --pool my-pool
--type torchx`` (found through the ``prefect.collections`` entry point of this package): every flow
run of a deployment in that pool becomes one app, on ``local_cwd``, ``slurm``, ``lsf``,
``kubernetes``, ``aws_batch``, ``ray``..., whose replica runs Prefect's own flow-run entry
(``python -m prefect.engine``) with ``PREFECT__FLOW_RUN_ID`` and the worker's API URL/key in its
environment (never logged). A deployment overrides the job variables (``scheduler``, ``cfg``,
``image``, ``h`` or ``cpu``/``gpu``/``memMB``, ``replicas``, ``env``, ``max_retries``,
``command``).

What the worker does for a flow run, through the shared app lifecycle
(:mod:`torchx_core.runner.lifecycle`):

* submits the app named after the flow run, or reattaches to it (a worker restarted while the app
  runs does not submit a second one), and records the app handle as the flow run's
  infrastructure id (``infrastructure_pid``);
* streams the replicas' output (``stream_output``) through the worker's flow-run logger, so it
  shows in the worker's log and in the flow run's logs on the server, at Prefect's default level;
* watches the app and the flow run: a flow run cancelled from the UI/API (``Cancelling``) cancels
  the app and ends ``Cancelled``; an app that ends FAILED, CANCELLED from outside (``torchx
  cancel``, ``scancel``) or vanishes while the flow run is not final ends the flow run
  ``Crashed``, with the app's error and log tail (a flow that failed by itself stays ``Failed``);
* job variables that can never make an app (a permanent error,
  :func:`torchx_core.specs.errors.is_permanent_error`: a wrong run option, an unknown scheduler)
  end the flow run ``Failed`` with the error; a transient submission error leaves it to Prefect
  (``Crashed``);
* ``kill_infrastructure`` (Prefect's cancel of a run still pending) cancels the app.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sys
from collections.abc import Iterable, Set
from typing import TYPE_CHECKING, Any, Optional
from uuid import UUID

import anyio
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
    WorkPoolFilter,
    WorkPoolFilterName,
)
from prefect.client.schemas.objects import StateType, WorkerStatus
from prefect.exceptions import InfrastructureNotFound
from prefect.states import Cancelled, Completed, Crashed, Failed
from prefect.workers.base import (
    BaseJobConfiguration,
    BaseVariables,
    BaseWorker,
    BaseWorkerResult,
)
from pydantic import Field

from torchx_core.runner import get_runner
from torchx_core.runner.lifecycle import AppLifecycle, Attachment, Phase
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import AppDef, AppState, Resource, RetryPolicy, Role, named_resources
from torchx_core.specs.errors import TorchXError, is_permanent_error

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

logger = logging.getLogger(__name__)

__all__ = [
    "InvalidWorkerConfigError",
    "TorchXWorker",
    "TorchXWorkerJobConfiguration",
    "TorchXWorkerResult",
    "TorchXWorkerVariables",
]

#: The flow-run entry every app runs unless a deployment sets ``command``.
ENGINE_COMMAND = "python -m prefect.engine"
#: Exit status reported for an app the flow run lost (cancelled from outside, vanished).
_LOST = 1
#: Flow-run states whose app a worker watches (and takes back after a worker restart).
_WATCHED_STATES = (StateType.PENDING, StateType.RUNNING, StateType.CANCELLING)
#: Flow runs read per request when looking for runs to take back.
_PAGE = 200
#: The flow-run label Prefect's base worker sets to the name of the worker that submitted it.
WORKER_NAME_LABEL = "prefect.worker.name"


class InvalidWorkerConfigError(TorchXError, ValueError):
    """The work pool's or deployment's job variables cannot make an app (says what to fix).
    Permanent: the flow run ends Failed, nothing is submitted."""

    permanent = True


class TorchXWorkerJobConfiguration(BaseJobConfiguration):
    """How one flow run becomes an app (filled from the work pool's base job template)."""

    scheduler: str = Field(default="local_cwd")
    cfg: dict[str, Any] = Field(default_factory=dict)
    image: Optional[str] = Field(default=None)  # noqa: UP045 - pydantic + Prefect templates
    h: Optional[str] = Field(default=None)  # noqa: UP045
    cpu: Optional[int] = Field(default=None)  # noqa: UP045
    gpu: Optional[int] = Field(default=None)  # noqa: UP045
    memMB: Optional[int] = Field(default=None)  # noqa: UP045 - TorchX's name
    replicas: int = Field(default=1)
    max_retries: int = Field(default=0)
    # read by the table of step settings in settings(), not coerced by pydantic first (which
    # would read True as 1.0): the same verdict as every other entry point, before any submit
    stream_output: Any = Field(default=True)
    poll_interval: Any = Field(default=2.0)

    def settings(self) -> tuple[float, bool]:
        """``poll_interval`` and ``stream_output`` as the table of step settings reads them.

        Raises:
            InvalidWorkerConfigError: either is invalid (0, -1, nan, ``True`` as a number...)
        """
        problems: list[str] = []
        poll = SETTINGS["poll_interval"].read(self.poll_interval, problems)
        stream = SETTINGS["flag"].read(self.stream_output, problems, "stream_output")
        if problems:
            raise InvalidWorkerConfigError(
                "the torchx work pool's job variables are invalid: " + "; ".join(problems)
            )
        return float(poll), bool(stream)  # type: ignore[arg-type]  # read as a number

    def prepare_for_flow_run(self, flow_run: FlowRun, *args: Any, **kwargs: Any) -> None:
        super().prepare_for_flow_run(flow_run, *args, **kwargs)
        if not self.command or self.command == self._base_flow_run_command():
            self.command = ENGINE_COMMAND

    def app(self, name: str) -> AppDef:
        """The AppDef of a flow run's app: one role ``flow`` running :attr:`command`."""
        problems = []
        if not isinstance(self.replicas, int) or self.replicas < 1:
            problems.append(f"replicas must be an int >= 1, got {self.replicas!r}")
        if self.max_retries < 0:
            problems.append(f"max_retries must be >= 0, got {self.max_retries!r}")
        if self.h and any(v is not None for v in (self.cpu, self.gpu, self.memMB)):
            problems.append(f"give either the named resource h={self.h!r} or cpu/gpu/memMB")
        argv = shlex.split(self.command or ENGINE_COMMAND)
        if not argv:
            problems.append("command is empty; leave it unset to run `python -m prefect.engine`")
        resource = self._resource(problems)
        if problems:
            raise InvalidWorkerConfigError(
                "the torchx work pool's job variables cannot make an app: " + "; ".join(problems)
            )
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the worker's interpreter (same venv on a login node)
        env = {k: v for k, v in self.env.items() if v is not None}
        return AppDef(
            name=name,
            roles=[
                Role(
                    name="flow",
                    image=self.image or os.getcwd(),
                    entrypoint=argv[0],
                    args=argv[1:],
                    env=env,
                    num_replicas=self.replicas,
                    max_retries=self.max_retries,
                    retry_policy=RetryPolicy.APPLICATION,
                    resource=resource,
                )
            ],
        )

    def _resource(self, problems: list[str]) -> Resource:
        if self.h:
            try:
                return named_resources[self.h]
            except KeyError as e:
                problems.append(str(e))
                return Resource(cpu=1, gpu=0, memMB=1024)
        return Resource(cpu=self.cpu or 1, gpu=self.gpu or 0, memMB=self.memMB or 1024)


class TorchXWorkerVariables(BaseVariables):
    """The job variables a deployment may override (shown in the work pool's UI form)."""

    scheduler: str = Field(
        default="local_cwd",
        description="The TorchX scheduler the flow run's app runs on"
        " (`torchx schedulers` lists them): local_cwd, slurm, kubernetes, aws_batch, ray...",
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        title="Run options",
        description="The scheduler's run options (`torchx runopts <scheduler>`), e.g."
        ' {"partition": "gpu", "time": "1:00:00"} for slurm.',
    )
    image: Optional[str] = Field(  # noqa: UP045
        default=None,
        description="Container image, or directory the flow runs in, as the"
        " scheduler reads it (default: the worker's working directory).",
    )
    h: Optional[str] = Field(  # noqa: UP045
        default=None,
        title="Named resource",
        description="A named resource (e.g. aws_p3.2xlarge); or set cpu/gpu/memMB.",
    )
    cpu: Optional[int] = Field(default=None, description="CPUs per replica (default 1).")  # noqa: UP045
    gpu: Optional[int] = Field(default=None, description="GPUs per replica (default 0).")  # noqa: UP045
    memMB: Optional[int] = Field(  # noqa: UP045
        default=None, description="Memory per replica in MiB (default 1024)."
    )
    replicas: int = Field(
        default=1,
        description="Replicas of the flow-run process. Keep 1 unless the flow itself"
        " is written for several ranks (each replica runs the whole flow run).",
    )
    max_retries: int = Field(
        default=0,
        description="Scheduler-level restarts of the app (Prefect retries apply on top of these).",
    )
    stream_output: bool = Field(
        default=True, description="Stream the replicas' output to the worker's log."
    )
    poll_interval: float = Field(
        default=2.0,
        description="Seconds between status checks of the app and the flow run (> 0; a"
        " numeric string is read as a number).",
    )


class TorchXWorkerResult(BaseWorkerResult):
    """The app's handle (``identifier``) and its exit status (0 when it SUCCEEDED)."""


if TYPE_CHECKING:
    _Worker = BaseWorker[TorchXWorkerJobConfiguration, TorchXWorkerVariables, TorchXWorkerResult]
else:
    try:
        _Worker = BaseWorker[
            TorchXWorkerJobConfiguration, TorchXWorkerVariables, TorchXWorkerResult
        ]
    except TypeError:  # Prefect < 3.1: BaseWorker is not generic
        _Worker = BaseWorker


class TorchXWorker(_Worker):
    """Runs flow runs as TorchX apps on any TorchX scheduler (see the module docstring)."""

    type = "torchx"
    job_configuration = TorchXWorkerJobConfiguration
    job_configuration_variables = TorchXWorkerVariables
    _description = (
        "Runs each flow run as a TorchX app on any TorchX scheduler: Slurm, LSF,"
        " Kubernetes, AWS Batch, Ray, local processes."
    )
    _display_name = "TorchX"
    _documentation_url = "https://github.com/torchx-suite/torchx-suite#prefect-worker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: flow runs this worker watches: submitted by :meth:`run` or taken back
        self._watching: set[UUID] = set()
        #: flow runs whose app this worker saw end while the run was not final yet (e.g. a
        #: ``command`` that does not report to Prefect): never taken back again
        self._ended: set[UUID] = set()

    async def run(
        self,
        flow_run: FlowRun,
        configuration: TorchXWorkerJobConfiguration,
        # Prefect types task_status as TaskStatus[int] (a process id); this worker reports the
        # app handle, a str, as the flow run's infrastructure id (Prefect stores it as a str)
        task_status: anyio.abc.TaskStatus[str] | None = None,  # type: ignore[override]
    ) -> TorchXWorkerResult:
        self._watching.add(flow_run.id)
        try:
            return await self._run(flow_run, configuration, task_status)
        finally:
            self._watching.discard(flow_run.id)

    async def _run(
        self,
        flow_run: FlowRun,
        configuration: TorchXWorkerJobConfiguration,
        task_status: anyio.abc.TaskStatus[str] | None,
    ) -> TorchXWorkerResult:
        run_logger = self.get_flow_run_logger(flow_run)
        try:
            lifecycle = _lifecycle(flow_run, configuration)
            attachment = await self._attach(flow_run, lifecycle, configuration)
        except Exception as e:
            if is_permanent_error(e):  # a configuration error: no submission can ever succeed
                await self._fail_permanently(flow_run, e)
            raise  # Prefect marks the flow run Crashed (a transient error), or keeps it Failed
        handle = attachment.app_handle
        run_logger.info(
            "flow run %s: %s app %s on %s",
            flow_run.name,
            attachment.how,
            handle,
            configuration.scheduler,
        )
        if task_status is not None:
            task_status.started(handle)
        if attachment.how == "reused":  # this execution's app ran already (see _attach)
            await self._end(flow_run, Completed(message=f"app {handle} already SUCCEEDED"))
            return TorchXWorkerResult(identifier=handle, status_code=0)
        code = await self._follow(flow_run, lifecycle, handle, configuration)
        return TorchXWorkerResult(identifier=handle, status_code=code)

    async def _attach(
        self,
        flow_run: FlowRun,
        lifecycle: AppLifecycle,
        configuration: TorchXWorkerJobConfiguration,
    ) -> Attachment:
        """Submits the flow run's app, or reattaches to the one still running. A flow run
        scheduled again after its app SUCCEEDED (a forced re-run) is run again: a new app, named
        after the flow run and its execution count (``run_count``), so that a worker restarted
        during this execution still finds it."""
        app = configuration.app(name=f"prefect-{flow_run.name}")
        identity: tuple[str, ...] = ("prefect-flow-run", str(flow_run.id))
        attachment = await asyncio.to_thread(
            lifecycle.attach, app, identity, known_handle=flow_run.infrastructure_pid or None
        )
        if attachment.how != "reused":
            return attachment
        self.get_flow_run_logger(flow_run).info(
            "flow run %s was scheduled again after its app %s SUCCEEDED: running it again",
            flow_run.name,
            attachment.app_handle,
        )
        return await asyncio.to_thread(
            lifecycle.attach, app, (*identity, "execution", str(flow_run.run_count))
        )

    async def _follow(
        self,
        flow_run: FlowRun,
        lifecycle: AppLifecycle,
        handle: str,
        configuration: TorchXWorkerJobConfiguration,
        *,
        skip_existing: bool = False,
    ) -> int:
        """Streams the app's output (if enabled) and watches it until it ends."""
        poll_interval, stream_output = configuration.settings()
        run_logger = self.get_flow_run_logger(flow_run)
        follower = None
        if stream_output:
            # the worker's flow-run logger (Prefect's ``prefect.flow_runs`` tree): INFO reaches
            # the worker's log and the server's logs of the flow run at Prefect's default level;
            # from the start, a reattached app's too (this run's log gets every line once)
            # started in a thread: it reads the app's status and logs (blocking I/O), and the
            # loop must go on (Prefect records the flow run's infrastructure id on it meanwhile)
            follower = await asyncio.to_thread(
                lifecycle.follow_logs,
                handle,
                lambda line: run_logger.info("%s", line),
                skip_existing=skip_existing,
            )
        try:
            code = await self._watch(flow_run, lifecycle, handle, poll_interval)
            self._ended.add(flow_run.id)
            return code
        except anyio.get_cancelled_exc_class():
            # the worker stops (SIGTERM, SIGINT): the app runs on and the next worker streams
            # what follows; closed at once, not after the streams' idle wait (up to 15 s), which
            # would hold the worker's exit (Kubernetes kills a pod 30 s after SIGTERM)
            if follower is not None:
                follower.stop(0.0)
                follower = None
            raise
        finally:
            if follower is not None:
                await asyncio.to_thread(follower.stop)

    # -- taking back the apps of a worker that stopped ---------------------------------------

    async def get_and_submit_flow_runs(self) -> list[FlowRun]:
        """Prefect's poll for scheduled flow runs, then :meth:`take_back_runs`."""
        submitted = await super().get_and_submit_flow_runs()
        await self.take_back_runs()
        return submitted

    async def take_back_runs(self) -> list[UUID]:
        """Watches the running apps of this pool's flow runs that no live worker watches.

        Prefect's base worker acts only on flow runs it submitted itself, and cancels only runs
        that never started: after a worker restart, the apps of running flow runs would be
        watched by nobody (a cancelled flow run stayed Cancelling and its app ran on). A flow run
        of this pool that is pending, running or cancelling, has an app handle as its
        infrastructure id, and was submitted by this worker's name or by a worker the server no
        longer sees online, is taken back: its app is watched as if this worker had submitted it
        (cancellation, an app that fails or vanishes; new output is streamed). Called on every
        poll; returns the ids of the flow runs taken back.
        """
        try:
            runs = await self._watched_runs()
            workers = await self.client.read_workers_for_work_pool(self.work_pool.name)
        except Exception as e:  # noqa: BLE001 - the API may blink; the next poll tries again
            logger.warning("cannot look for flow runs to take back: %s", e)
            return []
        online = {w.name for w in workers if w.status == WorkerStatus.ONLINE} - {self.name}
        self._ended &= {r.id for r in runs}  # forget the runs that became final
        orphans = runs_to_take_back(
            runs, online_workers=online, watching=self._watching | self._ended
        )
        for flow_run in orphans:
            self._watching.add(flow_run.id)
            self._start_soon(self._take_back, flow_run)
        return [r.id for r in orphans]

    async def _watched_runs(self) -> list[FlowRun]:
        """Every pending, running or cancelling flow run of this pool (read a page at a time)."""
        runs: list[FlowRun] = []
        while True:
            page = await self.client.read_flow_runs(
                work_pool_filter=WorkPoolFilter(
                    name=WorkPoolFilterName(any_=[self.work_pool.name])
                ),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=list(_WATCHED_STATES))
                    )
                ),
                limit=_PAGE,
                offset=len(runs),
            )
            runs.extend(page)
            if len(page) < _PAGE:
                return runs

    def _start_soon(self, fn: Any, *args: Any) -> None:
        group = self._runs_task_group  # Prefect's task group of this worker's flow runs
        if group is None:
            raise RuntimeError("the worker is not set up (use it as an async context manager)")
        group.start_soon(fn, *args)

    async def _take_back(self, flow_run: FlowRun) -> None:
        handle = flow_run.infrastructure_pid or ""
        run_logger = self.get_flow_run_logger(flow_run)
        try:
            configuration = await self._configuration(flow_run)
            lifecycle = _lifecycle(flow_run, configuration)
            run_logger.info(
                "flow run %s: took back app %s (its worker stopped)", flow_run.name, handle
            )
            try:
                await self._follow(flow_run, lifecycle, handle, configuration, skip_existing=True)
            finally:
                lifecycle.runner.close()
        except Exception as e:  # noqa: BLE001 - one run's failure must not stop the worker
            run_logger.error("cannot watch app %s of flow run %s: %s", handle, flow_run.name, e)
        finally:
            self._watching.discard(flow_run.id)

    async def _configuration(self, flow_run: FlowRun) -> TorchXWorkerJobConfiguration:
        """The job configuration of a flow run this worker did not submit."""
        resolve = getattr(self.job_configuration, "resolve_for_flow_run", None)
        if resolve is None:  # Prefect < 3.5: the base worker's own helper
            config: TorchXWorkerJobConfiguration = await self._get_configuration(flow_run)  # type: ignore[attr-defined]
            return config
        resolved: TorchXWorkerJobConfiguration = await resolve(
            flow_run,
            client=self.client,
            work_pool=self.work_pool,
            worker_name=self.name,
            worker_id=self.backend_id,
        )
        return resolved

    async def _watch(
        self, flow_run: FlowRun, lifecycle: AppLifecycle, handle: str, poll_interval: float
    ) -> int:
        """Watches the app and the flow run until the app ends; returns the exit status."""
        run_logger = self.get_flow_run_logger(flow_run)
        while True:
            obs = await lifecycle.apoll(handle, max_age=poll_interval)
            state = await self._flow_run_state(flow_run)
            if state is StateType.CANCELLING:
                run_logger.info(
                    "flow run %s is cancelling: cancelling app %s", flow_run.name, handle
                )
                await asyncio.to_thread(lifecycle.cancel, handle)
                await self._end(flow_run, Cancelled(message=f"app {handle} cancelled"))
                return 0
            if obs.done:
                break
            await anyio.sleep(poll_interval)
        if obs.phase == Phase.SUCCEEDED:
            return 0
        status = obs.status
        tail = await asyncio.to_thread(lifecycle.failure_tail, handle, status)
        what = (
            "vanished from the scheduler"
            if obs.phase == Phase.VANISHED
            else f"ended {AppState(status.state).name}"
            if status is not None
            else f"stayed {obs.phase}"
        )
        message = f"app {handle} {what}"
        if status is not None and status.msg and status.msg != "<NONE>":
            message += f": {status.msg}"
        if tail:
            message += "\nlog tail:\n" + "\n".join(tail[-20:])
        state = await self._flow_run_state(flow_run)
        if state in (StateType.CANCELLING, StateType.CANCELLED):
            await self._end(flow_run, Cancelled(message=message))
            return 0
        if state not in (StateType.COMPLETED, StateType.FAILED, StateType.CRASHED):
            run_logger.error("%s", message)
            await self._end(flow_run, Crashed(message=message))
        return _LOST

    async def _fail_permanently(self, flow_run: FlowRun, error: Exception) -> None:
        """Ends the flow run ``Failed`` (final, not ``Crashed``) for an error no retry can fix
        (:func:`torchx_core.specs.errors.is_permanent_error`): wrong job variables, run options,
        scheduler or image."""
        message = (
            f"the torchx work pool's job variables are invalid (a configuration error,"
            f" not retried): {type(error).__name__}: {error}"
        )
        self.get_flow_run_logger(flow_run).error("%s", message)
        await self._end(flow_run, Failed(message=message))

    async def _flow_run_state(self, flow_run: FlowRun) -> StateType | None:
        try:
            current = await self.client.read_flow_run(flow_run.id)
        except Exception as e:  # noqa: BLE001 - the API may blink; keep watching the app
            logger.warning("cannot read flow run %s: %s", flow_run.id, e)
            return None
        return current.state.type if current.state is not None else None

    async def _end(self, flow_run: FlowRun, state: Any) -> None:
        try:
            await self.client.set_flow_run_state(flow_run.id, state, force=True)
        except Exception as e:  # noqa: BLE001 - reported, the app is handled already
            logger.warning("cannot set flow run %s %s: %s", flow_run.id, state.type, e)

    async def kill_infrastructure(
        self,
        infrastructure_pid: str,
        configuration: TorchXWorkerJobConfiguration,
        grace_seconds: int = 30,
    ) -> None:
        """Cancels the app whose handle Prefect recorded as the flow run's infrastructure."""
        with get_runner() as runner:
            status = await asyncio.to_thread(runner.status, infrastructure_pid)
            if status is None:
                raise InfrastructureNotFound(f"app {infrastructure_pid} not found")
            await asyncio.to_thread(runner.cancel, infrastructure_pid)


def runs_to_take_back(
    runs: Iterable[FlowRun], *, online_workers: Set[str], watching: Set[UUID]
) -> list[FlowRun]:
    """The flow runs whose app nobody watches: pending, running or cancelling, with an app
    handle as infrastructure id, not watched by this worker, and submitted by no worker in
    ``online_workers`` (the other workers of the pool the server sees online)."""
    return [
        run
        for run in runs
        if run.state is not None
        and run.state.type in _WATCHED_STATES
        and "://" in (run.infrastructure_pid or "")
        and run.id not in watching
        and (run.labels or {}).get(WORKER_NAME_LABEL) not in online_workers
    ]


def _lifecycle(flow_run: FlowRun, configuration: TorchXWorkerJobConfiguration) -> AppLifecycle:
    """The flow run's app lifecycle; the run options are checked strictly first (an unknown
    key, with a close match suggested, or a wrong type raises ``InvalidRunConfigException``)."""
    poll_interval, _ = configuration.settings()  # refused before anything is submitted
    runner = get_runner(component_defaults={})
    try:
        opts = runner.scheduler_run_opts(configuration.scheduler)
        opts.resolve(configuration.cfg, strict=not opts.free_form)
    except BaseException:
        runner.close()
        raise
    return AppLifecycle(
        runner,
        configuration.scheduler,
        owner=f"prefect-worker:{flow_run.id}",
        cfg=configuration.cfg,
        poll_interval=poll_interval,
    )
