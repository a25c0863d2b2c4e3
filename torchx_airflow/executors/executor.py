"""``TorchXExecutor``: an Airflow 3 executor that runs every task as an app on a TorchX scheduler.

Each ``ExecuteTask`` workload becomes one app (one role, one replica) that runs the Task SDK's
own entry point for the workload (:mod:`torchx_airflow.task_entry`, Airflow's
``execute_workload``) on the configured scheduler: ``local_cwd``, ``slurm``, ``lsf``,
``kubernetes``, ``aws_batch``, ``ray``... The app reaches the Execution API with the workload's
token, passed in its environment only. Built on the app lifecycle of ``torchx_core.runner``:

* the app is named from the task instance's identity (:func:`app_name`) and its handle is
  reported to Airflow as the task's ``external_executor_id``;
* the executor records itself as the app's owner (``Runner.set_owner``): after a scheduler
  restart :meth:`TorchXExecutor.try_adopt_task_instances` takes over the apps that still exist
  (and records the new owner) instead of letting Airflow start a second try; :meth:`terminate`,
  :meth:`end` and :meth:`revoke_task` cancel only apps this executor still owns;
* :meth:`sync` reads the state of every app in one batched call per scheduler
  (``Runner.status_many``: one ``squeue``, one ``DescribeJobs`` per 100 jobs...) at most every
  ``poll_interval`` seconds, and reports success, failure and vanished apps (with the app's error
  and log tail) to Airflow; UNKNOWN and vanished apps get ``unknown_timeout`` seconds
  (:class:`GraceClock`);
* a task instance that moved on while its app runs (marked failed or success, cleared) has its app
  cancelled (one database read per ``poll_interval`` for all of them).

Configuration: :mod:`torchx_airflow.executors.config` (``[torchx_executor]``, a ``torchx``
connection, ``executor_config={"torchx": {...}}`` per task).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.executors.base_executor import BaseExecutor, get_execution_api_server_url
from airflow.sdk.observability import stats
from airflow.utils.state import TaskInstanceState

from torchx_airflow.executors._decisions import Outcome, Verdict, outcome, try_over, verdict
from torchx_airflow.executors._fork import LOCAL_SCHEDULERS, ForkServer
from torchx_airflow.executors._task_log import TaskLog, log_path_of
from torchx_airflow.executors.config import ExecutorSettings, TaskSettings
from torchx_airflow.task_entry import SERVER_ENV, TOKEN_ENV, seal
from torchx_core.runner.lifecycle import AppLifecycle, GraceClock, Phase, app_name, phase_of
from torchx_core.specs import AppDef, AppStatus, Role, parse_app_handle
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from airflow.executors import workloads
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancekey import TaskInstanceKey

    from torchx_core.runner import Runner

__all__ = ["ROLE", "TorchXExecutor"]

logger: logging.Logger = logging.getLogger(__name__)

#: the name of the app's one role
ROLE = "airflow-task"
#: at most this many log lines are returned to the UI by :meth:`TorchXExecutor.get_task_log`
_UI_LOG_LINES = 5000
#: apps submitted at the same time, off the scheduler loop
_SUBMIT_THREADS = 4
#: a warm fork server that dies sooner than this after its start, this many times in a row,
#: is not started again (a server that cannot live would cost every app a failed connect)
_FORK_MIN_LIFE = 30.0
_FORK_QUICK_DEATHS = 3


@dataclass
class _App:
    """One task instance's app, as this executor tracks it."""

    key: TaskInstanceKey
    ti_id: str
    handle: str
    owner: str
    clock: GraceClock
    log_path: str | None = None  # the task try's log file, relative to the log folder
    ended_since: float | None = None  # when its task instance was first seen ended
    cancelled: str = ""  # why this executor cancelled it


class TorchXExecutor(BaseExecutor):
    """Runs each Airflow task as a TorchX app; see the module docstring.

    Use alone (``[core] executor = torchx_airflow.executors.TorchXExecutor``) or beside others
    (``LocalExecutor,torchx_airflow.executors.TorchXExecutor`` and ``executor="TorchXExecutor"``
    on the tasks that should run as apps).
    """

    supports_ad_hoc_ti_run: bool = True
    is_local: bool = False
    serve_logs: bool = False

    def __init__(
        self,
        *args: Any,
        runner: Runner | None = None,
        ti_reader: Callable[[list[TaskInstanceKey]], dict[tuple[Any, ...], tuple[str | None, int]]]
        | None = None,
        submitter: Executor | None = None,
        **kwargs: Any,
    ) -> None:
        """``runner``, ``ti_reader`` (task instance keys -> ``{key.primary: (state, try
        number)}``) and ``submitter`` (where submits run; a thread pool by default) are injected
        by tests; Airflow passes only the base class's arguments."""
        super().__init__(*args, **kwargs)
        self._runner = runner
        self._ti_reader = ti_reader or _ti_rows
        self._settings: ExecutorSettings | None = None
        self._apps: dict[TaskInstanceKey, _App] = {}
        self._last_read = float("-inf")
        self._instance = uuid.uuid4().hex[:8]
        self._task_log: TaskLog | None = None
        #: submits that failed for a reason a retry may fix: workload, failed attempts, due time
        self._retries: dict[TaskInstanceKey, tuple[workloads.ExecuteTask, int, float]] = {}
        self.reads = 0  # batched status reads made (benchmarks, tests)
        self._fork: ForkServer | None = None
        self._fork_failed = False
        self._fork_quick_deaths = 0
        self._fork_lock = threading.Lock()
        self._submitter = submitter
        #: submits under way off the scheduler loop: workload, failed attempts before, result
        self._pending: dict[TaskInstanceKey, tuple[workloads.ExecuteTask, int, Future[_App]]] = {}
        #: submits of revoked tasks still under way: their apps are cancelled when they exist
        self._orphans: list[Future[_App]] = []

    # -- settings and runner -------------------------------------------------------------------

    @property
    def settings(self) -> ExecutorSettings:
        """The ``[torchx_executor]`` settings (completed by its connection), read once."""
        if self._settings is None:
            settings = ExecutorSettings.from_section(self.conf.getsection("torchx_executor"))
            if settings.conn_id:
                from torchx_airflow.hook import TorchXHook

                hook = TorchXHook(settings.conn_id)
                conn = hook.settings()
                hook.apply_env(conn)
                settings = settings.with_connection(conn.scheduler, conn.cfg, conn.session_name)
            self._settings = settings
        return self._settings

    @property
    def runner(self) -> Runner:
        """The Runner every call goes through (created on first use)."""
        if self._runner is None:
            from torchx_core.runner import get_runner

            self._runner = get_runner(self.settings.session_name)
        return self._runner

    @property
    def task_log(self) -> TaskLog:
        """Writes the executor's reasons into the task's log (``[logging] base_log_folder``)."""
        if self._task_log is None:
            self._task_log = TaskLog(self.conf.get("logging", "base_log_folder") or ".")
        return self._task_log

    def _owner(self, ti_id: object) -> str:
        """The owner token recorded with a task's app: this executor instance and the task."""
        return (
            f"airflow-executor:{socket.gethostname()}/job={self.job_id}/{self._instance}/ti={ti_id}"
        )

    def _life(self, app: _App) -> AppLifecycle:
        backend = parse_app_handle(app.handle).scheduler_backend
        return AppLifecycle(
            self.runner, backend, owner=app.owner, tail_lines=self.settings.tail_lines
        )

    def start(self) -> None:
        """Reads the settings and checks the default scheduler (:meth:`check_health`): a wrong
        setting, an unknown scheduler or a missing extra fails the scheduler's start."""
        s = self.settings
        self.check_health()
        self._fork_env(s.task.scheduler)  # warm from the start: the first tasks fork too
        self.log.info(
            "TorchXExecutor: tasks run on %s (session %s), status read every %g s",
            s.task.scheduler,
            s.session_name,
            s.poll_interval,
        )

    def check_health(self) -> None:
        """Raises when the section's scheduler cannot be used: unknown, its extra missing, or its
        run options (``cfg``) wrong (the scheduler's own error, naming the fix)."""
        task = self.settings.task
        self.runner.scheduler_run_opts(task.scheduler).resolve(task.cfg)

    # -- submit -----------------------------------------------------------------------------------

    def _process_workloads(self, workload_items: Sequence[workloads.All]) -> None:
        from airflow.executors.workloads import ExecuteTask

        for workload in workload_items:
            if not isinstance(workload, ExecuteTask):
                raise TypeError(
                    f"TorchXExecutor runs task workloads only, got {type(workload).__name__}"
                )
            self.queued_tasks.pop(workload.ti.key, None)
            self._start(workload, 0)

    def _start(self, workload: workloads.ExecuteTask, failed_before: int) -> None:
        """Submits the workload's app, off the scheduler loop unless it runs on a local scheduler
        (its slot taken meanwhile); the result is taken by :meth:`sync` (:meth:`_started`).

        A local submit forks the app's supervisor (tens of ms) and stays in the loop: the
        local scheduler forks only from a single-threaded process and otherwise starts a fresh
        interpreter per app, which costs more CPU than the loop waits.
        """
        key = workload.ti.key
        self.running.add(key)
        if self._local(workload):
            future: Future[_App] = Future()
            try:
                future.set_result(self._submit(workload))
            except Exception as e:  # noqa: BLE001 - taken by _started, as a pool's result
                future.set_exception(e)
        else:
            if self._submitter is None:
                self._submitter = ThreadPoolExecutor(_SUBMIT_THREADS, "torchx-submit")
            future = self._submitter.submit(self._submit, workload)
        self._pending[key] = (workload, failed_before, future)

    def _local(self, workload: workloads.ExecuteTask) -> bool:
        try:
            scheduler = self.settings.task.override(workload.ti.executor_config).scheduler
        except Exception:  # noqa: BLE001 - the submit reports the configuration error
            return True
        return scheduler in LOCAL_SCHEDULERS

    def _collect(self) -> None:
        """Takes the results of the submits that are done, in the scheduler loop."""
        for key, (workload, failed_before, future) in list(self._pending.items()):
            if future.done():
                del self._pending[key]
                self._started(workload, failed_before, future)
        for future in [f for f in self._orphans if f.done()]:
            self._orphans.remove(future)
            if future.exception() is None:
                self._cancel(future.result(), "revoked by the scheduler (stuck in queued)")

    def wait_submits(self) -> None:
        """Waits for the submits under way and takes their results (shutdown, tests)."""
        wait_futures([f for _, _, f in self._pending.values()] + self._orphans)
        self._collect()

    def _started(
        self, workload: workloads.ExecuteTask, failed_before: int, future: Future[_App]
    ) -> None:
        """A submit's result: the app is watched; a failed submit is retried with back-off
        (``submit_retries``) unless it is a configuration error, then fails the try."""
        key = workload.ti.key
        try:
            app = future.result()
        except Exception as e:  # noqa: BLE001 - reported to Airflow as the task's failure
            permanent = isinstance(e, TorchXError) and e.permanent
            if not permanent and failed_before < self.settings.submit_retries:
                delay = 2.0 ** (failed_before + 1)
                self.log.warning("cannot start %s as an app (attempt %d of %d), retrying in %g s:"
                                 " %s", key, failed_before + 1, self.settings.submit_retries + 1,
                                 delay, e)  # fmt: skip
                self._retries[key] = (workload, failed_before + 1, time.monotonic() + delay)
                self.running.add(key)  # its slot stays taken while it waits
                _incr("submit_retried")
                return
            self.running.discard(key)
            self.log.error("cannot start %s as an app: %s", key, e)
            attempts = f" after {failed_before + 1} attempts" * (failed_before > 0)
            why = (
                f"TorchXExecutor could not start the app{' (configuration)' * permanent}"
                f"{attempts}: {e}"
            )
            self.task_log.append(workload.log_path, why)
            _incr("submit_failed")
            self.fail(key, info=why)
            return
        self._apps[key] = app
        self.running.add(key)
        _incr("submitted", scheduler=parse_app_handle(app.handle).scheduler_backend)
        # Airflow keeps the handle as the task instance's external_executor_id (adoption)
        self.event_buffer[key] = (TaskInstanceState.QUEUED, app.handle)

    def _retry_due(self) -> None:
        now = time.monotonic()
        for key, (workload, failed_before, due) in list(self._retries.items()):
            if due <= now:
                del self._retries[key]
                self._start(workload, failed_before)

    def _submit(self, workload: workloads.ExecuteTask) -> _App:
        ti = workload.ti
        task = self.settings.task.override(ti.executor_config)
        name = app_name(
            f"af-{ti.task_id}", (ti.dag_id, ti.task_id, ti.run_id, ti.map_index, ti.try_number)
        )
        app = self._app(workload, task, name)
        handle = self.runner.run(app, task.scheduler, cfg=task.cfg)
        owner = self._owner(ti.id)
        try:
            self.runner.set_owner(handle, owner)
        except Exception as e:  # noqa: BLE001 - without an owner, kill paths still cancel
            self.log.warning("cannot record the owner of %s: %s", handle, e)
        self.log.info("task %s runs as %s", ti.key, handle)
        clock = GraceClock(self.settings.unknown_timeout)
        return _App(ti.key, str(ti.id), handle, owner, clock, log_path=workload.log_path)

    def _app(self, workload: workloads.ExecuteTask, task: TaskSettings, name: str) -> AppDef:
        """The app that runs ``workload``: the token in its environment (sealed with Airflow's
        fernet key when it has one), nowhere else."""
        server = self.settings.execution_api_server_url or get_execution_api_server_url(self.conf)
        env = {
            **task.env,
            **self._fork_env(task.scheduler),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": server,
            TOKEN_ENV: seal(workload.token),
        }
        role = Role(
            name=ROLE,
            image=task.image,
            entrypoint=self.settings.python,
            args=[
                "-m",
                "torchx_airflow.task_entry",
                workload.model_dump_json(exclude={"token"}),
            ],
            env=env,
            resource=task.role_resource(),
        )
        return AppDef(name=name, roles=[role])

    def _fork_env(self, scheduler: str) -> dict[str, str]:
        """The warm fork server's socket for an app on a local scheduler (``warm_start``);
        the server starts with the first such app (one, whichever submit thread asks first)."""
        if scheduler not in LOCAL_SCHEDULERS or not self.settings.warm_start:
            return {}
        with self._fork_lock:
            if self._fork_failed:
                return {}
            if self._fork is not None and not self._fork.alive():
                self._replace_dead_fork(self._fork)
            if self._fork is None and not self._fork_failed:
                try:
                    self._fork = ForkServer(self.settings.python)
                except OSError as e:
                    self.log.warning("cannot start the warm fork server (apps start cold): %s", e)
                    self._fork_failed = True
            return {SERVER_ENV: self._fork.path} if self._fork is not None else {}

    def _replace_dead_fork(self, dead: ForkServer) -> None:
        """A server found dead (killed, crashed) is cleaned up so that another starts; one that
        died within ``_FORK_MIN_LIFE`` seconds of its start, ``_FORK_QUICK_DEATHS`` times in a
        row, is not replaced again (apps start cold, as without a server)."""
        lived = time.monotonic() - dead.started
        self._fork_quick_deaths = self._fork_quick_deaths + 1 if lived < _FORK_MIN_LIFE else 0
        dead.stop()
        self._fork = None
        if self._fork_quick_deaths >= _FORK_QUICK_DEATHS:
            self._fork_failed = True
            self.log.warning(
                "the warm fork server (pid %d) died %.0f s after its start (exit %s), "
                "%d times in a row: apps start cold from now on",
                dead.pid, lived, dead.returncode, self._fork_quick_deaths,
            )  # fmt: skip
        else:
            self.log.warning(
                "the warm fork server (pid %d) died (exit %s) after %.0f s: starting another",
                dead.pid, dead.returncode, lived,
            )  # fmt: skip

    def _stop_fork(self) -> None:
        if isinstance(self._submitter, ThreadPoolExecutor):
            self._submitter.shutdown(wait=False)  # waited for: nothing under way
            self._submitter = None
        if self._fork is not None:
            self._fork.stop()
            self._fork = None

    # -- watch ------------------------------------------------------------------------------------

    def sync(self) -> None:
        """Retries the failed submits that are due; reads every app's state (one batched call per
        scheduler) and reports the ended ones."""
        if self._retries:
            self._retry_due()
        if self._pending or self._orphans:
            self._collect()
        if not self._apps or time.monotonic() - self._last_read < self.settings.poll_interval:
            return
        self._last_read = time.monotonic()
        apps = list(self._apps.values())
        statuses = self._read([a.handle for a in apps])
        for app in apps:
            status = statuses.get(app.handle, _UNREADABLE)
            self._report(app, status)
        self._reconcile()

    def _read(self, handles: list[str]) -> dict[str, AppStatus | Exception | None]:
        """``{handle: status}``; a scheduler whose read failed gives its exception for its apps."""
        by_backend: dict[str, list[str]] = {}
        for handle in handles:
            by_backend.setdefault(parse_app_handle(handle).scheduler_backend, []).append(handle)
        out: dict[str, AppStatus | Exception | None] = {}
        for backend, group in by_backend.items():
            self.reads += 1
            began = time.monotonic()
            try:
                out.update(self.runner.status_many(group))
            except Exception as e:  # noqa: BLE001 - UNKNOWN for its apps, under the grace clock
                self.log.warning("cannot read the apps on %s: %s", backend, e)
                out.update(dict.fromkeys(group, e))
                _incr("status_read_failed", scheduler=backend)
            stats.timing(
                "torchx_executor.status_read",
                (time.monotonic() - began) * 1000.0,
                tags={"scheduler": backend},
            )
        return out

    def _report(self, app: _App, status: AppStatus | Exception | None) -> None:
        if isinstance(status, Exception):
            phase_, status = Phase.UNKNOWN, None
        else:
            phase_ = phase_of(status)
        decision = outcome(phase_, app.clock.observe(phase_))
        if decision == Outcome.WAIT:
            return
        del self._apps[app.key]
        self._keep_log(app)
        if app.cancelled:
            # stopped because its task instance moved on: done as Airflow asked (a cleared task
            # "successfully terminated" is scheduled again; a failed report would retry it)
            self.success(app.key, info=f"torchx app {app.handle} cancelled: {app.cancelled}")
        elif decision == Outcome.SUCCESS:
            self.success(app.key, info=app.handle)
        else:
            info = self._failure_info(app, status, decision)
            head, *tail = info.split("\n")
            self.task_log.append(app.log_path, head, tail)
            _incr("vanished" if decision == Outcome.VANISHED else "failed")
            self.fail(app.key, info=info)

    def _keep_log(self, app: _App) -> None:
        """Copies the app's log to the task's log when the task wrote none on this host."""
        if not app.log_path or self.task_log.exists(app.log_path):
            return
        try:
            lines = deque(self.runner.log_lines(app.handle, ROLE, 0), maxlen=_UI_LOG_LINES)
        except Exception as e:  # noqa: BLE001 - the log is a convenience; the outcome is reported
            self.log.info("cannot read the log of %s to keep it: %s", app.handle, e)
            return
        self.task_log.copy(app.log_path, list(lines))

    def _failure_info(self, app: _App, status: AppStatus | None, decision: Outcome) -> str:
        if decision == Outcome.VANISHED:
            head = (
                f"torchx app {app.handle} vanished: its scheduler has not known it (or its state)"
                f" for {self.settings.unknown_timeout:g} s (unknown_timeout)"
            )
        else:
            state = status.state.name if status is not None else "?"
            err = (status.structured_error_msg or status.msg) if status is not None else ""
            head = f"torchx app {app.handle} ended {state}" + (
                f": {err}" if err and err != "<NONE>" else ""
            )
        tail = (
            self._life(app).failure_tail(app.handle, status) if decision != Outcome.VANISHED else []
        )
        return "\n".join([head, *(["last log lines:", *tail] if tail else [])])

    # -- task instances that moved on -------------------------------------------------------------

    def _reconcile(self) -> None:
        """Cancels the apps whose task instance no longer waits for them (one database read)."""
        if not self._apps:
            return
        try:
            rows = self._ti_reader([a.key for a in self._apps.values()])
        except Exception as e:  # noqa: BLE001 - the next sync tries again
            self.log.warning("cannot read the task instances of the running apps: %s", e)
            return
        now = time.monotonic()
        for app in list(self._apps.values()):
            if app.cancelled:
                continue
            row = rows.get(app.key.primary)
            state, try_number = row or (None, None)
            decision = verdict(state, try_number, app.key.try_number, exists=row is not None)
            if try_over(state, try_number, app.key.try_number, exists=row is not None):
                # its task ended: the slot is free while its app exits (reported when it ends)
                self.running.discard(app.key)
            if decision == Verdict.KEEP:
                app.ended_since = None
                continue
            if decision == Verdict.GRACE:
                app.ended_since = app.ended_since or now
                if now - app.ended_since < self.settings.kill_grace:
                    continue
            state = row[0] if row else "deleted"
            self._cancel(app, f"its task instance is {state} (try {row[1] if row else '?'})")

    def _cancel(self, app: _App, why: str) -> bool:
        cancelled = self._life(app).cancel(app.handle)
        if cancelled:
            _incr("cancelled")
            app.cancelled = why
            self.log.info("cancelled %s of %s: %s", app.handle, app.key, why)
        return cancelled

    # -- adoption, revoke, shutdown ---------------------------------------------------------------

    def try_adopt_task_instances(self, tis: Sequence[TaskInstance]) -> Sequence[TaskInstance]:
        """Adopts the task instances whose app (their ``external_executor_id``) still exists.

        The app's recorded owner must name the same task instance (so a stale or foreign id is
        never adopted); the adopting executor then records itself as the owner. The others are
        returned: Airflow resets them (their app, if any, is unknown to its scheduler).
        """
        handles: dict[str, TaskInstance] = {}
        for ti in tis:
            handle = ti.external_executor_id or ""
            try:
                parse_app_handle(handle)
            except TorchXError:
                continue
            handles[handle] = ti
        if not handles:
            return list(tis)
        statuses = self._read(list(handles))
        adopted: set[str] = set()
        for handle, ti in handles.items():
            status = statuses.get(handle)
            if status is None or isinstance(status, Exception):
                self.log.info("not adopting %s: its app %s is unknown (%s)", ti.key, handle, status)
                continue
            if not self._adopt(ti, handle):
                continue
            adopted.add(handle)
        return [ti for ti in tis if (ti.external_executor_id or "") not in adopted]

    def _adopt(self, ti: TaskInstance, handle: str) -> bool:
        try:
            recorded = self.runner.owner(handle)
        except Exception as e:  # noqa: BLE001 - unreadable: not adopted, Airflow resets the task
            self.log.warning("not adopting %s: cannot read the owner of %s: %s", ti.key, handle, e)
            return False
        if recorded is not None and not recorded.endswith(f"/ti={ti.id}"):
            self.log.warning("not adopting %s: app %s belongs to %s", ti.key, handle, recorded)
            return False
        owner = self._owner(ti.id)
        try:
            self.runner.set_owner(handle, owner)
        except Exception as e:  # noqa: BLE001 - adopted all the same; kill paths still cancel
            self.log.warning("cannot record the owner of %s: %s", handle, e)
        key = ti.key
        clock = GraceClock(self.settings.unknown_timeout)
        self._apps[key] = _App(key, str(ti.id), handle, owner, clock, log_path=_log_path(ti))
        self.running.add(key)
        _incr("adopted")
        self.log.info("adopted %s running as %s (was owned by %s)", key, handle, recorded)
        return True

    def revoke_task(self, *, ti: TaskInstance) -> None:
        """Cancels the task's app (if still owned) and forgets it; reports nothing."""
        app = self._apps.pop(ti.key, None)
        self.queued_tasks.pop(ti.key, None)
        self._retries.pop(ti.key, None)
        pending = self._pending.pop(ti.key, None)
        if pending is not None:  # its app is cancelled once its submit is done
            self._orphans.append(pending[2])
        self.running.discard(ti.key)
        if app is not None:
            self._cancel(app, "revoked by the scheduler (stuck in queued)")

    def terminate(self) -> None:
        """The scheduler was told to stop: as :meth:`end`, without the last status read."""
        self.wait_submits()
        self._leave_or_cancel("the scheduler is terminating")
        self._stop_fork()

    def end(self) -> None:
        """Reads the apps' states a last time, then leaves the running apps for the next
        scheduler to adopt (default) or cancels the ones still owned (``cancel_on_end``)."""
        self.wait_submits()
        self._last_read = float("-inf")
        self.sync()
        self._leave_or_cancel("the scheduler is shutting down")
        self._stop_fork()
        if self._runner is not None:
            self._runner.close()

    def _leave_or_cancel(self, why: str) -> None:
        if self.settings.cancel_on_end:
            self._cancel_all(why)
            return
        live = [a.handle for a in self._apps.values() if not a.cancelled]
        if live:
            self.log.info(
                "%s: leaving %d running apps for the next scheduler to adopt (cancel_on_end is"
                " false): %s",
                why,
                len(live),
                ", ".join(live),
            )

    def _cancel_all(self, why: str) -> None:
        """Cancels every app still owned, in parallel (each cancel is bounded in time)."""
        from concurrent.futures import ThreadPoolExecutor

        apps = [a for a in self._apps.values() if not a.cancelled]
        if not apps:
            return
        with ThreadPoolExecutor(
            max_workers=min(16, len(apps)), thread_name_prefix="torchx-end"
        ) as pool:
            list(pool.map(lambda a: self._cancel(a, why), apps))

    @staticmethod
    def get_cli_commands() -> list[Any]:
        """``airflow torchx-executor list|cleanup`` (:mod:`torchx_airflow.executor_cli`)."""
        from torchx_airflow.executor_cli import get_cli_commands

        return get_cli_commands()

    # -- logs -------------------------------------------------------------------------------------

    def get_task_log(self, ti: TaskInstance, try_number: int) -> tuple[list[str], list[str]]:
        """The app's log while the task runs, when Airflow has no log file of its own for it
        (the app runs where the log folder is not shared); Airflow reads its file otherwise."""
        handle = ti.external_executor_id or ""
        if not handle or self.task_log.exists(_log_path(ti, try_number)):
            return [], []
        try:
            parse_app_handle(handle)
            lines = deque(self.runner.log_lines(handle, ROLE, 0), maxlen=_UI_LOG_LINES)
        except Exception as e:  # noqa: BLE001 - shown in the UI instead of the log
            return [f"torchx app {handle}"], [f"cannot read the log of {handle}: {e}"]
        return [f"torchx app {handle} (replica log, last {_UI_LOG_LINES} lines)"], [
            line.rstrip("\n") for line in lines
        ]


# -- helpers --------------------------------------------------------------------------------------

#: a status missing from a batched read (never expected) counts as unreadable
_UNREADABLE = TorchXError("no status returned")


def _incr(event: str, **tags: str) -> None:
    """Counts an executor event in Airflow's metrics (``torchx_executor.<event>``)."""
    stats.incr(f"torchx_executor.{event}", tags=tags or None)


def _ti_rows(keys: list[TaskInstanceKey]) -> dict[tuple[Any, ...], tuple[str | None, int]]:
    """``{key.primary: (state, try_number)}`` of the task instances that still exist (one query).

    By key, not by id: Airflow gives a task instance a new id when it is cleared or retried.
    """
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    ti = TaskInstance
    matching = ti.filter_for_tis(keys)
    if matching is None:  # no keys
        return {}
    with create_session() as session:
        cols = (ti.dag_id, ti.task_id, ti.run_id, ti.map_index, ti.state, ti.try_number)
        rows = session.execute(select(*cols).where(matching)).all()
    return {(d, t, r, m): (None if s is None else str(s), int(n)) for d, t, r, m, s, n in rows}


def _log_path(ti: TaskInstance, try_number: int | None = None) -> str | None:
    """The task try's log path, or None (logged) when the template cannot be rendered for it."""
    from jinja2 import TemplateError

    try:
        return log_path_of(ti, try_number)
    except (TemplateError, AttributeError, KeyError, TypeError, ValueError) as e:
        logger.warning("cannot name the log file of %s: %s", ti, e)  # a field it does not have
        return None
