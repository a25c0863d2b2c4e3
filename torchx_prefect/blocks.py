"""Prefect blocks: where TorchX apps run (:class:`TorchXScheduler`) and a whole job
(:class:`TorchXJob`, Prefect's ``JobBlock``/``JobRun`` shape).

Register them with the server once (``prefect block register -m torchx_prefect``), save one per
cluster, and name it in tasks::

    from torchx_prefect import TorchXScheduler, run_app_sync

    TorchXScheduler(
        scheduler="slurm",
        cfg={"partition": "gpu", "time": "1:00:00"},
        env={"SLURM_CONF": "/etc/slurm/slurm.conf"},
        secret_env={"AWS_SECRET_ACCESS_KEY": "..."},   # stored encrypted, shown masked
    ).save("gpu-cluster")

    run_app_sync("utils.echo", ["--msg", "hi"], scheduler="gpu-cluster")  # or the block itself

The block's environment is applied to this process while a task or job uses it (its scheduler
client, e.g. ``sbatch``, reads it), so replicas that inherit the submitting environment (local
processes; Slurm jobs, which sbatch exports it to) see it too, ``secret_env`` included; two
blocks that need different values for the same variable cannot run at the same time in one
process (a clear error says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import MissingDependencyError
from torchx_core.specs.errors import check_dependency_version, missing_dependency
from torchx_prefect import _prefect_io as pio
from torchx_prefect import _session
from torchx_prefect._launch import AppResult, LaunchSpec, call_digest
from torchx_prefect._session import Session, awatch
from torchx_prefect.errors import InvalidTaskArgumentError, JobTimeoutError, TorchXPrefectError

check_dependency_version("prefect", "prefect", "torchx_prefect")

try:
    from prefect.blocks.abstract import JobBlock, JobRun
    from prefect.blocks.core import Block
    from prefect.types import SecretDict
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_dependency(
        "prefect", "prefect", "torchx_prefect", distribution="prefect", cause=e
    ) from e


if TYPE_CHECKING:
    _JobBlockBase = JobBlock[AppResult]
    _JobRunBase = JobRun[AppResult]
else:  # JobBlock is a pydantic model: subscripting it at runtime would make another model class
    _JobBlockBase, _JobRunBase = JobBlock, JobRun

_T = TypeVar("_T")

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["BLOCK_PREFIX", "TorchXJob", "TorchXJobRun", "TorchXScheduler", "resolve_scheduler"]

BLOCK_PREFIX = "torchx-scheduler/"
"""``scheduler="torchx-scheduler/<name>"`` names a saved :class:`TorchXScheduler` explicitly."""


class TorchXScheduler(Block):
    """Where TorchX apps run: a TorchX scheduler, its run options, and the environment its
    client needs (e.g. ``SLURM_CONF``, ``KUBECONFIG``, ``AWS_PROFILE``); secret values in
    ``secret_env`` (stored encrypted by Prefect, shown masked)."""

    _block_type_name = "TorchX Scheduler"
    _block_type_slug = "torchx-scheduler"
    _description = (
        "A TorchX scheduler (local_cwd, slurm, kubernetes, aws_batch, ...), its run options and"
        " the environment of its client, for torchx_prefect tasks and jobs."
    )

    scheduler: str = Field(
        default="local_cwd",
        description="The TorchX scheduler name (`torchx runopts` lists them).",
        examples=["local_cwd", "slurm", "kubernetes", "aws_batch"],
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        title="Run options",
        description="The scheduler's run options (`torchx runopts <scheduler>`); a task's own"
        " `cfg` overrides them key by key.",
        examples=[{"partition": "gpu", "time": "1:00:00"}],
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        title="Environment",
        description="Environment variables of the scheduler's client, e.g. SLURM_CONF, KUBECONFIG.",
        examples=[{"SLURM_CONF": "/etc/slurm/slurm.conf"}],
    )
    secret_env: SecretDict | None = Field(
        default=None,
        title="Secret environment",
        description="Secret environment variables (e.g. AWS_SECRET_ACCESS_KEY); never shown.",
    )
    dashboard_url: str | None = Field(
        default=None,
        title="Dashboard URL",
        description="A `torchx dashboard` address: the task's link artifact opens the app's page"
        " there (default $TORCHX_DASHBOARD_URL; unset: the scheduler's UI URL).",
        examples=["http://ml-host:8288"],
    )

    # the run options are checked when a field is set after construction too
    model_config = ConfigDict(validate_assignment=True)

    # field validators, not a model validator: pydantic keeps an assigned value that a model
    # validator then refuses, while a field validator refuses it before it is set
    @field_validator("scheduler")
    @classmethod
    def _scheduler_named(cls, value: str, info: ValidationInfo) -> str:
        if not value or not value.strip():
            raise ValueError("scheduler must name a TorchX scheduler such as 'local_cwd'")
        if "cfg" in info.data:  # an assignment: the block's run options must suit it
            _check_cfg(value.strip(), info.data["cfg"])
        return value.strip()

    @field_validator("cfg")
    @classmethod
    def _cfg_known(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        scheduler = info.data.get("scheduler")
        if isinstance(scheduler, str):  # else the scheduler itself was refused
            _check_cfg(scheduler, value)
        return value

    @field_validator("dashboard_url")
    @classmethod
    def _dashboard_url_valid(cls, value: str | None) -> str | None:
        from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_base

        if not value or not value.strip():
            return None
        try:
            return dashboard_base(value)
        except InvalidDashboardUrlError as e:
            raise ValueError(str(e)) from None

    def environment(self) -> dict[str, str]:
        """The variables applied while the block is used (secret values revealed; the
        dashboard URL as ``$TORCHX_DASHBOARD_URL``, which the task's link reads)."""
        from torchx_core.runner.links import ENV_DASHBOARD_URL

        secret = self.secret_env.get_secret_value() if self.secret_env is not None else {}
        dashboard = {ENV_DASHBOARD_URL: self.dashboard_url} if self.dashboard_url else {}
        return {**self.env, **dashboard, **{k: str(v) for k, v in (secret or {}).items()}}

    def merged_cfg(self, cfg: Mapping[str, Any] | None) -> dict[str, Any]:
        """The block's run options overridden by ``cfg`` key by key."""
        return {**self.cfg, **dict(cfg or {})}

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Applies :meth:`environment` to this process for the duration (see module doc)."""
        with _ENV.lease(self.environment(), self._block_document_name or self.scheduler):
            yield


def _check_cfg(scheduler: str, cfg: Mapping[str, Any]) -> None:
    """Run options checked strictly when a block is made (unknown keys, with a close match, and
    wrong types are refused); a scheduler whose client library is not installed here is checked
    where the task runs."""
    from torchx_prefect._launch import check_run_options

    try:
        check_run_options(scheduler, cfg)
    except MissingDependencyError as e:
        logger.debug("cannot check the run options of %s here: %s", scheduler, e)


class _EnvLeases:
    """Process environment shared by concurrent users: a variable is set while any user holds
    it and restored when the last one leaves; a different value while held is refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, int, str | None, str]] = {}  # var: value, n, saved, who

    @contextmanager
    def lease(self, env: Mapping[str, str], who: str) -> Iterator[None]:
        with self._lock:
            clashes = [
                f"{k} (wanted {who!r}, held by {self._held[k][3]!r})"
                for k, v in env.items()
                if k in self._held and self._held[k][0] != v
            ]
            if clashes:
                raise TorchXPrefectError(
                    "Two TorchX scheduler blocks need different values of the same environment"
                    f" variable at the same time in one process: {', '.join(clashes)}. Run"
                    " their tasks in separate flow runs (processes), or give the blocks one value."
                )
            for k, v in env.items():
                value, n, saved, holder = self._held.get(k, (v, 0, os.environ.get(k), who))
                self._held[k] = (value, n + 1, saved, holder)
                os.environ[k] = v
        try:
            yield
        finally:
            with self._lock:
                for k in env:
                    value, n, saved, holder = self._held[k]
                    if n > 1:
                        self._held[k] = (value, n - 1, saved, holder)
                        continue
                    del self._held[k]
                    if saved is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = saved


_ENV = _EnvLeases()


def resolve_scheduler(scheduler: object) -> TorchXScheduler | None:
    """The scheduler block meant by a task's ``scheduler`` argument (``None``: a plain name).

    A :class:`TorchXScheduler` is used as is; ``"torchx-scheduler/<name>"`` loads that saved
    block; a registered TorchX scheduler name is a plain name; any other string is loaded as a
    saved block's name.

    Raises:
        InvalidTaskArgumentError: the string is neither a scheduler nor a saved block
    """
    if isinstance(scheduler, TorchXScheduler):
        return scheduler
    if not isinstance(scheduler, str) or not scheduler:
        return None  # validate_args reports it
    if scheduler.startswith(BLOCK_PREFIX):
        return _load(scheduler[len(BLOCK_PREFIX) :], scheduler)
    known = _scheduler_names()
    if scheduler in known:
        return None
    return _load(scheduler, scheduler, known)


def _scheduler_names() -> list[str]:
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        return runner.scheduler_backends()


def _load(name: str, given: str, known: list[str] | None = None) -> TorchXScheduler:
    try:
        block = TorchXScheduler.load(name, _sync=True)  # type: ignore[call-arg]  # async_dispatch accepts _sync
    except ValueError as e:
        valid = f" Valid scheduler names: {', '.join(sorted(known))}." if known else ""
        raise InvalidTaskArgumentError(
            f"scheduler {given!r} is neither a TorchX scheduler nor a saved TorchXScheduler block"
            f" ({e}).{valid} Save a block with TorchXScheduler(scheduler='slurm', ...)"
            f".save({name!r}) after `prefect block register -m torchx_prefect`."
        ) from e
    return cast(TorchXScheduler, block)  # _sync=True: the block itself, not a coroutine


# -- the job block ----------------------------------------------------------------------------


#: TorchXJob field -> the step setting it is (:mod:`torchx_core.runner.step_settings`)
_JOB_SETTINGS = {
    "poll_interval": "poll_interval",
    "unknown_state_timeout": "unknown_timeout",
    "timeout_seconds": "timeout",
    "cancel_timeout": "cancel_timeout",
    "log_tail_lines": "tail_lines",
    "stream_logs": "flag",
}


class TorchXJob(_JobBlockBase):
    """A TorchX app as a Prefect job: an AppDef (``AppDef.to_dict()`` form) or a component
    name with arguments, and the :class:`TorchXScheduler` it runs on.

    ``await job.trigger()`` submits the app (or reattaches to the one an earlier attempt or
    execution of the same flow run started, exactly like ``run_app``) and returns a
    :class:`TorchXJobRun`; ``await run.wait_for_completion()`` streams its logs until it ends
    (raising ``AppFailedError``/``AppCancelledError``/``AppVanishedError`` if it did not
    succeed, and cancelling the app if the wait is cancelled or exceeds ``timeout_seconds``);
    ``await run.fetch_result()`` returns the :class:`~torchx_prefect.AppResult`.
    """

    _block_type_name = "TorchX Job"
    _block_type_slug = "torchx-job"
    _description = "Runs a TorchX app (AppDef or component) on a TorchX Scheduler block."

    scheduler: TorchXScheduler = Field(description="Where the app runs.")
    app: dict[str, Any] | None = Field(
        default=None, title="AppDef", description="The AppDef as `AppDef.to_dict()`."
    )
    component: str | None = Field(
        default=None, description="A component name such as `utils.echo` (instead of an AppDef)."
    )
    component_args: list[str] = Field(
        default_factory=list, description="The component's CLI-style arguments."
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict, title="Run options", description="Overrides of the block's cfg."
    )
    poll_interval: float = Field(default=5.0, description="Seconds between status reads.")
    unknown_state_timeout: float = Field(
        default=300.0, description="Seconds the app may be UNKNOWN or unknown to the scheduler."
    )
    timeout_seconds: float | None = Field(
        default=None, description="Cancel the app and fail when it runs longer than this."
    )
    stream_logs: bool = Field(default=True, description="Stream replica logs to the run logger.")
    log_tail_lines: int = Field(default=50, description="Log lines per replica in a failure.")
    cancel_timeout: float = Field(default=30.0, description="Bound of the app's cancellation.")

    # checked on construction and on assignment (``job.timeout_seconds = -1`` raises), before
    # pydantic's own coercion (which would read True as 1.0), by the table of step settings
    model_config = ConfigDict(validate_assignment=True)

    @field_validator(*_JOB_SETTINGS, mode="before")
    @classmethod
    def _setting(cls, value: object, info: ValidationInfo) -> object:
        name = str(info.field_name)
        problem = SETTINGS[_JOB_SETTINGS[name]].problem(value, name)
        if problem is not None:
            raise InvalidTaskArgumentError(f"TorchXJob {problem}")
        return SETTINGS[_JOB_SETTINGS[name]].parse(value)

    def _spec(self) -> LaunchSpec:
        from torchx_core.specs import AppDef
        from torchx_prefect._launch import validate_args

        if (self.app is None) == (self.component is None):
            raise InvalidTaskArgumentError(
                "TorchXJob needs exactly one of app (an AppDef dict, AppDef.to_dict()) and"
                f" component (e.g. 'utils.echo'); got app={self.app is not None},"
                f" component={self.component!r}"
            )
        app: AppDef | str = AppDef.from_dict(self.app) if self.app is not None else self.component  # type: ignore[assignment]
        _check_cfg(self.scheduler.scheduler, self.scheduler.merged_cfg(self.cfg))
        return validate_args(
            app,
            self.component_args or None,
            scheduler=self.scheduler.scheduler,
            cfg=self.scheduler.merged_cfg(self.cfg),
            poll_interval=self.poll_interval,
            unknown_state_timeout=self.unknown_state_timeout,
            stream_logs=self.stream_logs,
            log_tail_lines=self.log_tail_lines,
            cancel_timeout=self.cancel_timeout,
        )

    async def trigger(self) -> TorchXJobRun:
        """Submits (or reattaches to) the app; returns its run."""
        spec = self._spec()
        identity = pio.current_identity(call_digest(spec))
        with contextlib.ExitStack() as stack:  # handed to the run, which closes it at its end
            stack.enter_context(self.scheduler.applied())
            runner = await asyncio.to_thread(_session.new_runner)
            stack.callback(_session.close_runner, runner)
            store = pio.FlowRunHandleStore(identity.flow_run_id)
            session = Session(runner, spec, identity, self.logger, store, kind="job")
            run = TorchXJobRun(self, session, stack.pop_all())
        try:
            await asyncio.to_thread(session.start)
        except BaseException as exc:
            run._close(exc)
            raise
        return run


class TorchXJobRun(_JobRunBase):
    """One run of a :class:`TorchXJob` (see there).

    Args:
        job: the job
        session: the attempt over the app lifecycle, started
        resources: what the run holds until it ends (the block's environment lease, the
            runner), closed once by :meth:`wait_for_completion` or a failed trigger
    """

    def __init__(self, job: TorchXJob, session: Session, resources: contextlib.ExitStack) -> None:
        self.job = job
        self._session = session
        self._resources = resources
        self._result: AppResult | None = None
        self._closed = False

    @property
    def app_handle(self) -> str:
        """The app's handle."""
        return str(self._session.handle)

    async def wait_for_completion(self) -> None:  # type: ignore[override]  # Prefect's stub says Logger; nothing is returned
        """Waits until the app ends; streams its logs.

        Raises:
            AppFailedError, AppCancelledError, AppVanishedError: the app did not succeed
            JobTimeoutError: it ran longer than ``timeout_seconds`` (the app was cancelled); a
                ``TimeoutError`` naming the app handle and the limit
        """
        session = self._session
        limit = self.job.timeout_seconds
        started = time.monotonic()

        async def watch_and_finish() -> AppResult:
            obs = await awatch(session)
            return await asyncio.to_thread(session.finish, obs)

        try:
            self._result = await _within(
                watch_and_finish(), limit, f"{session.handle} ran longer than {limit} seconds"
            )
        except BaseException as exc:
            self._close(exc)
            if (
                isinstance(exc, TimeoutError)
                and limit is not None
                and time.monotonic() - started >= limit
            ):
                raise JobTimeoutError(self.app_handle, limit) from exc
            raise
        self._close(None)

    async def fetch_result(self) -> AppResult:
        """The :class:`~torchx_prefect.AppResult` of a SUCCEEDED app.

        Raises:
            TorchXPrefectError: :meth:`wait_for_completion` has not completed successfully
        """
        if self._result is None:
            raise TorchXPrefectError(
                f"TorchX app {self.app_handle} has no result yet: await wait_for_completion()"
                " first (it raises if the app did not succeed)"
            )
        return self._result

    def _close(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        with self._resources:  # the runner closed, then the lease left, whatever abort() does
            if exc is not None:
                self._session.abort(exc)


async def _within(aw: Awaitable[_T], seconds: float | None, message: str) -> _T:
    """``aw``'s result, or the builtin ``TimeoutError(message)`` after ``seconds`` (None: no
    limit). ``asyncio.timeout`` is Python 3.11+, and 3.10's ``wait_for`` raises asyncio's own
    ``TimeoutError`` class: this raises the builtin one on every supported version."""
    try:
        return await asyncio.wait_for(aw, seconds)
    except asyncio.TimeoutError as e:
        if isinstance(e, TimeoutError):  # 3.11+: asyncio's is the builtin
            raise
        raise TimeoutError(message) from e
