"""The scheduler contract every backend implements.

A backend subclasses :class:`Scheduler` and fills in a few hooks. The public, final-by-convention
methods (``submit``, ``submit_dryrun``, ``cancel``, ``delete``) are template methods built on them:

* ``_submit_dryrun(app, cfg)`` - pure: builds the native request (no cluster access);
* ``schedule(dryrun_info)`` - the only call with side effects: submits the request, returns app id;
* ``describe(app_id)`` - status (``None`` when the app is unknown);
* ``list()`` - the apps this scheduler can see;
* ``_cancel_existing(app_id)`` - cancels an app known to exist;
* ``log_iter(...)`` - optional: the log lines of one replica.

A backend missing an abstract hook fails when instantiated, not when the hook is first called.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Generic, TypeVar

from torchx_core.specs import (
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    RoleStatus,
    runopts,
)
from torchx_core.specs.errors import TorchXError, UnknownAppException
from torchx_core.specs.limits import env_and_arg_problems, too_many_replicas
from torchx_core.specs.structured_opts import StructuredOpts

__all__ = [
    "AppValidationError",
    "CombinedLogsOnlyError",
    "DescribeAppResponse",
    "InvalidAppIdError",
    "InvalidLogQueryError",
    "ListAppResponse",
    "Scheduler",
    "SchedulerArgumentError",
    "SchedulerError",
    "Stream",
    "StructuredOpts",
    "UnsupportedFeatureError",
    "filter_regex",
    "lines_from_chunks",
    "require_combined_streams",
    "split_lines",
    "split_lines_iterator",
]

logger: logging.Logger = logging.getLogger(__name__)

T = TypeVar("T")  # the native request type


class Stream(str, Enum):
    """Which output stream(s) of a replica ``log_iter`` reads."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


class SchedulerError(TorchXError):
    """A scheduler backend failed (the native error is chained as ``__cause__``)."""


class UnsupportedFeatureError(SchedulerError, ValueError):
    """The app asks for something this scheduler cannot do (the message says what instead)."""

    permanent = True


class AppValidationError(SchedulerError, ValueError):
    """The AppDef cannot run on this scheduler as written (every problem is listed)."""

    permanent = True


class SchedulerArgumentError(SchedulerError, ValueError):
    """A scheduler factory was given an invalid keyword argument (e.g. ``cache_size=0``)."""

    permanent = True


class InvalidAppIdError(SchedulerError, UnknownAppException, ValueError):
    """An app id does not have the form this scheduler gives its app ids.

    The same rule in every scheduler: no app can have such an id, so looking it up
    (``describe``, ``describe_many``, ``Runner.status``) answers ``None``, and acting on it
    (logs, ...) raises this error, which says the expected form. It is an
    ``UnknownAppException`` too, so code that handles unknown apps handles it.

    Args:
        message: what was given and the form expected
        app_id: the id as given
    """

    def __init__(self, message: str, app_id: str = "") -> None:
        TorchXError.__init__(self, message)
        self.app_handle = app_id


class InvalidLogQueryError(SchedulerError, ValueError):
    """A log query (regex, time range, replica) is malformed."""


class CombinedLogsOnlyError(UnsupportedFeatureError, InvalidLogQueryError):
    """stdout or stderr alone was asked of a backend whose logs hold both together."""


def require_combined_streams(streams: Stream | None, logs: str) -> None:
    """Raises :class:`CombinedLogsOnlyError` unless ``streams`` is None or COMBINED.

    ``logs`` names the backend's logs in the message, e.g. ``"Ray job logs"``.
    """
    if streams not in (None, Stream.COMBINED):
        raise CombinedLogsOnlyError(
            f"{logs} hold stdout and stderr together; got streams={streams},"
            " use Stream.COMBINED (the default)"
        )


@dataclass
class DescribeAppResponse:
    """What ``Scheduler.describe`` returns: the state of one app as the scheduler sees it.

    ``roles_statuses`` holds the replica statuses of the most recent attempt; ``roles`` the roles
    as submitted, where the scheduler can recover them.
    """

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles_statuses: list[RoleStatus] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)


@dataclass
class ListAppResponse:
    """One row of ``Scheduler.list``: an app id, its state, and its handle once the runner sets it.

    Backends that learn more from the same list read fill the optional fields (``None`` when
    unknown): ``created`` (submit time, epoch seconds), ``owner`` (``Runner.set_owner``'s
    token), ``replicas`` (how many replicas are in each state, by ``AppState`` name) and
    ``ended`` (when the app ended, epoch seconds).
    """

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""
    created: float | None = None
    owner: str | None = None
    replicas: dict[str, int] | None = None
    ended: float | None = None


class ReplicaUsage(tuple[float, int, int]):
    """What one replica (its process and descendants) uses at one moment: CPU time consumed
    so far (seconds), resident memory (bytes) and how many processes it has.

    An immutable value (a tuple: a plain class costs no dataclass set-up on every CLI start).

    >>> ReplicaUsage(cpu_seconds=1.5, rss_bytes=2048, processes=1).rss_bytes
    2048
    """

    __slots__ = ()

    def __new__(cls, cpu_seconds: float, rss_bytes: int, processes: int) -> ReplicaUsage:
        return super().__new__(cls, (cpu_seconds, rss_bytes, processes))

    @property
    def cpu_seconds(self) -> float:
        return self[0]

    @property
    def rss_bytes(self) -> int:
        return self[1]

    @property
    def processes(self) -> int:
        return self[2]

    def __repr__(self) -> str:
        return (
            f"ReplicaUsage(cpu_seconds={self[0]!r}, rss_bytes={self[1]!r}, processes={self[2]!r})"
        )


class Scheduler(abc.ABC, Generic[T]):
    """Base class of every scheduler backend.

    Args:
        backend: the registered scheduler name (``"local_cwd"``, ``"slurm"``...).
        session_name: the runner session this scheduler belongs to (part of the app handle).
    """

    #: Whether ``cancel`` of an app that already ended still has work to do (the local
    #: scheduler kills replicas a dead supervisor left behind); the runner then forwards it.
    cancels_finished_apps: bool = False

    #: Whether ``submit_dryrun`` itself builds the roles' workspaces and runs :meth:`_validate`
    #: (every built-in backend sets it: a direct call cannot build a request for an app that
    #: cannot run). False, the default for a scheduler defined elsewhere, is TorchX's contract:
    #: ``submit`` and ``Runner.dryrun`` build the workspaces, ``Runner.dryrun`` calls
    #: ``_validate``, and ``submit_dryrun`` checks only what no process can start with.
    checks_in_dryrun: bool = False

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    def close(self) -> None:
        """Releases local resources (clients, connections). Safe to call more than once."""

    # -- submission -------------------------------------------------------------------------

    def submit(
        self,
        app: AppDef,
        cfg: Mapping[str, CfgVal],
        workspace: str | None = None,
    ) -> str:
        """Submits ``app`` and returns its app id (not the handle; the runner builds that).

        ``workspace`` (a path or a ``Workspace`` string) overrides ``app.roles[0].workspace``.
        """
        if workspace:
            from torchx_core.specs import Workspace

            app.roles[0].workspace = Workspace.from_str(workspace)
        if not self.checks_in_dryrun:  # TorchX's contract: submit builds, submit_dryrun does not
            opts = self.run_opts()
            self._build_workspaces(app, opts.resolve(cfg, strict=not opts.free_form))
        dryrun_info = self.submit_dryrun(app, cfg)
        return self.schedule(dryrun_info)

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Builds the native request for ``app`` without submitting it.

        Resolves ``cfg`` against :meth:`run_opts` (defaults filled, types checked, unknown keys
        refused unless ``run_opts().free_form``); with :attr:`checks_in_dryrun` (the built-in
        backends) builds the workspaces of roles that have one and validates the app
        (:meth:`_validate`), otherwise (TorchX's contract) checks only what no process can start
        with; then calls ``_submit_dryrun`` and each role's ``pre_proc`` hook in order.
        """
        opts = self.run_opts()
        # the one check of run options for every entry point: an unknown key is refused (with
        # a close match) unless the scheduler declares free-form options
        resolved_cfg = opts.resolve(cfg, strict=not opts.free_form)
        if self.checks_in_dryrun:
            self._build_workspaces(app, resolved_cfg)
            self._validate(app, self.backend, resolved_cfg)
        else:
            _raise_problems(app, self.backend, _start_problems(app))
        dryrun_info = self._submit_dryrun(app, resolved_cfg)
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info._app = app
        dryrun_info._cfg = resolved_cfg
        dryrun_info._scheduler = self.backend
        return dryrun_info

    def _build_workspaces(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> None:
        from torchx_core.workspace.api import WorkspaceMixin

        roles_with_workspace = [(r, r.workspace) for r in app.roles if r.workspace]
        if not roles_with_workspace:
            return
        if not isinstance(self, WorkspaceMixin):
            raise UnsupportedFeatureError(
                f"scheduler `{self.backend}` does not support workspaces, but role(s)"
                f" {[r.name for r, _ in roles_with_workspace]} set one. Remove the workspace"
                " or use a scheduler that supports workspaces."
            )
        self.build_workspaces([r for r, _ in roles_with_workspace], cfg)

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[T]) -> str:
        """Submits the request built by :meth:`submit_dryrun`; returns the app id."""

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Builds the native request. Must be pure: no cluster access, no side effects."""

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Checks the app before the request is built. Backends may extend it.

        Shared by every scheduler: roles, resources, the replica limit (``$TORCHX_MAX_REPLICAS``,
        checked before one request per replica is built) and arguments/environment no process
        can start with (NUL bytes, environment names that are empty or hold ``=``).
        """
        problems = [
            f"role `{role.name}` has no resource; set `resource=specs.resource(cpu=...,"
            " memMB=...)` or a named resource (`h=...`)"
            for role in app.roles
            if role.resource == NULL_RESOURCE and self._requires_resource()
        ]
        _raise_problems(app, scheduler, problems + _start_problems(app))

    def _requires_resource(self) -> bool:
        """Whether roles must carry a resource on this scheduler (local ones do not)."""
        return True

    # -- options ----------------------------------------------------------------------------

    def run_opts(self) -> runopts:
        """The run options (``cfg`` keys) this scheduler accepts, including workspace options."""
        from torchx_core.workspace.api import WorkspaceMixin

        opts = self._run_opts()
        if isinstance(self, WorkspaceMixin):
            opts.update(self.workspace_opts())
        return opts

    def _run_opts(self) -> runopts:
        return runopts()

    # -- inspection -------------------------------------------------------------------------

    @abc.abstractmethod
    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Returns the app's status, or ``None`` if the scheduler does not know the app."""

    @abc.abstractmethod
    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Lists the apps this scheduler can see (one batched call where the backend allows)."""

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps: ``{app_id: describe(app_id)}``.

        Watchers of many apps (a triggerer, a flow with many tasks, ``torchx status h1 h2``) call
        this once per poll instead of :meth:`describe` per app. The default loops over
        :meth:`describe`; backends whose service answers for many jobs in one request override it
        (one ``squeue``, one ``DescribeJobs`` per 100 jobs, one list by label...).
        """
        return {app_id: self.describe(app_id) for app_id in dict.fromkeys(app_ids)}

    def exists(self, app_id: str) -> bool:
        """Whether the scheduler knows ``app_id``."""
        return self.describe(app_id) is not None

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Returns the log lines of replica ``k`` of ``role_name``.

        With ``should_tail`` the iterator follows the log until the app ends. Lines keep their
        trailing newline where the backend has one.
        """
        raise NotImplementedError(
            f"scheduler `{self.backend}` does not support fetching logs; read them where the"
            " scheduler stores them"
        )

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[str] | None:
        """The files holding replica ``k``'s log, in the order :meth:`log_iter` reads them
        without following (for a byte-exact copy); None where the log is not in local files.

        Raises: as :meth:`log_iter` for an unknown app, role, replica or stream.
        """
        return None

    # -- lifecycle --------------------------------------------------------------------------

    def cancel(self, app_id: str) -> None:
        """Cancels the app. Idempotent: cancelling an unknown or finished app is a no-op."""
        if self.exists(app_id):
            self._cancel_existing(app_id)
        else:
            logger.warning("app %s does not exist on %s; nothing to cancel", app_id, self.backend)

    def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Optional hook: blocks until the app ends (or ``timeout`` seconds pass) and returns its
        description (None: unknown app).

        Backends that can block on an app's end (the local scheduler) implement it and
        ``Runner.wait`` uses it; the default raises ``NotImplementedError``, and ``Runner.wait``
        polls :meth:`describe` instead.
        """
        raise NotImplementedError(f"scheduler `{self.backend}` has no blocking wait")

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Cancels an app known to exist."""

    def delete(self, app_id: str) -> None:
        """Cancels the app if it runs and removes what the scheduler keeps of it."""
        if self.exists(app_id):
            self._delete_existing(app_id)

    def _delete_existing(self, app_id: str) -> None:
        self._cancel_existing(app_id)

    # -- ownership --------------------------------------------------------------------------

    def set_owner(self, app_id: str, owner: str) -> bool:
        """Records ``owner`` (an opaque token naming the attempt that runs the app) with the app.

        Kept by the scheduler, so every process on every host reads the same owner with
        :meth:`get_owner`. Returns False when the backend cannot record an owner (the default)
        or the app is unknown.
        """
        return False

    def get_owner(self, app_id: str) -> str | None:
        """The owner last recorded with :meth:`set_owner`, or None (none, or unsupported)."""
        return None

    def lookup_scope(self) -> str:
        """Where this scheduler looks for apps, for "does not exist" messages ("" by default;
        the local scheduler names its root)."""
        return ""

    # -- one app per name (``AppLifecycle.attach``) -------------------------------------------

    def name_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """Held while a process looks up and submits the app named ``name``.

        Yields True when the backend serializes that across processes (a second attempt then
        finds the first one's app instead of submitting another), False (the default) when it
        cannot: the lifecycle then reconciles right after its submit (:meth:`submit_order`).
        """
        return contextlib.nullcontext(False)

    def list_named(
        self, name: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> builtins.list[ListAppResponse] | None:
        """The apps submitted under ``name`` when the backend can find them without listing
        every app (an index by name); None (the default): callers filter :meth:`list`."""
        return None

    def submit_order(self, app_ids: Sequence[str]) -> builtins.list[str] | None:
        """``app_ids`` earliest submitted first, or None when the backend cannot tell (default).

        When two attempts submitted an app of the same name, the earliest keeps running and the
        later attempts cancel their own. Called with ``[]`` to ask whether it is supported.
        """
        return None

    def run_options(self, app_id: str) -> dict[str, CfgVal] | None:
        """The run options the app was submitted with (resolved: defaults filled), where the
        scheduler keeps them; None when it does not (the default) or the app is unknown."""
        return None

    def resource_usage(self, app_id: str) -> dict[tuple[str, int], ReplicaUsage] | None:
        """``{(role, replica index): usage}`` of the app's running replicas now, where the
        scheduler can measure it (local: from ``/proc``); None when it cannot (the default)."""
        return None

    def __enter__(self) -> Scheduler[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_problems(app: AppDef) -> list[str]:
    """What no process can start with: no roles, fewer than one replica, more replicas than
    ``$TORCHX_MAX_REPLICAS``, NUL bytes in arguments or environment, bad environment names.

    A role stand-in (an object that is not a ``Role``, such as a test double) is skipped.
    """
    problems = [] if app.roles else ["the app has no roles"]
    roles = [r for r in app.roles if isinstance(r, Role)]
    for role in roles:
        if role.num_replicas < 1:
            problems.append(f"role `{role.name}` has num_replicas={role.num_replicas}; use >= 1")
        problems += env_and_arg_problems(role.name, role.entrypoint, role.args, role.env)
    too_many = too_many_replicas(sum(max(r.num_replicas, 0) for r in roles), f"app `{app.name}`")
    return [*problems, too_many] if too_many else problems


def _raise_problems(app: AppDef, scheduler: str, problems: list[str]) -> None:
    if problems:
        raise AppValidationError(
            f"app `{app.name}` cannot run on `{scheduler}`: " + "; ".join(problems)
        )


def filter_regex(regex: str, data: Iterable[str]) -> Iterator[str]:
    """Yields the lines of ``data`` that match ``regex`` (``re.search``)."""
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise InvalidLogQueryError(
            f"invalid log regex {regex!r}: {e}; pass a Python regular expression"
        ) from e
    return (line for line in data if pattern.search(line))


def split_lines(text: str) -> list[str]:
    """Splits ``text`` at ``\\n`` only (as TorchX: a ``\\r`` stays inside its line), keeping
    each line's ``\\n``.

    >>> split_lines("a\\rb\\nc")
    ['a\\rb\\n', 'c']
    """
    *lines, rest = text.split("\n")
    return [line + "\n" for line in lines] + ([rest] if rest else [])


def split_lines_iterator(chunks: Iterable[str]) -> Iterator[str]:
    """Splits each chunk into lines (keeping ``\\n``), as TorchX: a line split across two chunks
    comes out as two pieces (``["foo\\nbar", "baz"]`` gives ``"foo\\n", "bar", "baz"``).

    To re-join lines that a stream split across chunks, use :func:`lines_from_chunks`.
    """
    for chunk in chunks:
        yield from split_lines(chunk)


def lines_from_chunks(chunks: Iterable[str]) -> Iterator[str]:
    """Re-chunks a stream of text pieces into whole lines (keeping ``\\n``): a line split
    across chunks is joined (``["foo\\nbar", "baz"]`` gives ``"foo\\n", "barbaz"``)."""
    buf = ""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split("\n")
        for line in lines:
            yield line + "\n"
    if buf:
        yield buf
