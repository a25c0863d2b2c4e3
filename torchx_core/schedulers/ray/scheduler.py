"""``ray``: runs an app as one Ray job through the Ray Jobs API (``JobSubmissionClient``).

The job's entrypoint is a small driver (:mod:`torchx_core.schedulers.ray._driver`) that reserves a
placement group with one bundle per replica (``cpu``, ``gpu``, ``memMB`` of the role's resource),
starts one actor per replica on its bundle and runs the replica's command there. Replica output is
relayed with a ``[role/k]`` prefix, so ``log_iter`` returns the lines of one replica.

* Cluster: the dashboard address comes from the ``dashboard_address`` run option, else
  ``RAY_ADDRESS`` (when it is an ``http(s)://`` URL), else ``127.0.0.1:8265``.
* App id: ``{dashboard_address}-{submission_id}`` (the address is needed to find the job again).
* ``working_dir`` (run option, else the first role's workspace, else - as in TorchX - the first
  role's image when it is a local directory) is uploaded with the job; ``requirements`` (a local
  requirements file, default ``requirements.txt`` of a plain-directory working dir) becomes the
  job's ``pip`` runtime env.
* The rank-0 address is exported as ``TORCHX_RANK0_HOST`` (``macros.rank0_env``).
* ``cancel`` stops the job (``STOPPED`` -> ``CANCELLED``); ``list`` shows the jobs submitted by
  torchx (tagged in the job metadata).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from torchx_core import __version__
from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import (
    DescribeAppResponse,
    InvalidAppIdError,
    InvalidLogQueryError,
    ListAppResponse,
    Scheduler,
    SchedulerError,
    Stream,
    StructuredOpts,
    filter_regex,
    require_combined_streams,
)
from torchx_core.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    UnknownAppException,
    Workspace,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.specs.errors import InvalidRunConfigException, TorchXError, import_optional
from torchx_core.workspace.api import WorkspaceMixin, copy_workspace

__all__ = [
    "JOB_STATES",
    "RayActor",
    "RayJob",
    "RayOpts",
    "RayScheduler",
    "create_scheduler",
]

logger: logging.Logger = logging.getLogger(__name__)

DEFAULT_DASHBOARD = "127.0.0.1:8265"
RANK0_ENV = "TORCHX_RANK0_HOST"
META_VERSION = "torchx.pytorch.org/version"
META_APP_NAME = "torchx.pytorch.org/app-name"
META_ROLES = "torchx.pytorch.org/roles"
DRIVER_FILE = "_ray_driver.py"
ACTORS_FILE = "torchx_ray_actors.json"
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# "(CommandActor pid=1) [role/k] text", possibly with ANSI colour codes around the actor name
_LINE_RE = re.compile(r"(?:^|\s)\[(?P<role>[^\[\]/\s]+)/(?P<k>\d+)\] (?P<text>.*)$", re.DOTALL)

# Ray JobStatus -> AppState.
JOB_STATES: dict[str, AppState] = {
    "PENDING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
    "STOPPED": AppState.CANCELLED,
}


@dataclass
class RayOpts(StructuredOpts):
    """Run options of the ``ray`` scheduler."""

    dashboard_address: str | None = field(
        default=None,
        metadata={
            "help": "Ray dashboard (Jobs API) address host:port; default: RAY_ADDRESS if it"
            " is an http URL, else 127.0.0.1:8265"
        },
    )
    working_dir: str | None = field(
        default=None,
        metadata={
            "help": "local directory uploaded as the job's working directory"
            " (default: the first role's workspace)"
        },
    )
    requirements: str | None = field(
        default=None, metadata={"help": "local requirements.txt installed into the job's env (pip)"}
    )
    placement_strategy: str = field(
        default="PACK",
        metadata={"help": "placement group strategy: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"},
    )
    placement_timeout: int = field(
        default=300, metadata={"help": "seconds to wait for the placement group before failing"}
    )


@dataclass
class RayActor:
    """One replica: the command it runs and the resources of its placement-group bundle."""

    role: str
    replica_id: int
    command: list[str]
    env: dict[str, str]
    num_cpus: float
    num_gpus: int = 0
    memory: int = 0


@dataclass
class RayJob:
    """The native request of ``ray``: one Ray job submission.

    Args:
        app_id: ``{dashboard_address}-{submission_id}``
        dashboard_address: the Jobs API address
        submission_id: the Ray job's submission id
        entrypoint: the job's entrypoint (the torchx driver)
        runtime_env: the job's runtime env (``working_dir`` is filled in by ``schedule``)
        metadata: job metadata (torchx tags)
        actors: one entry per replica
        working_dir: local directory uploaded with the job (None: only the driver)
        requirements: local requirements file for ``pip``
        placement_strategy: placement group strategy
        placement_timeout: seconds to wait for the placement group
    """

    app_id: str
    dashboard_address: str
    submission_id: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    actors: list[RayActor] = field(default_factory=list)
    working_dir: str | None = None
    requirements: str | None = None
    placement_strategy: str = "PACK"
    placement_timeout: int = 300

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-compatible data (what dryrun prints)."""
        return asdict(self)

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _resolve_address(opt: str | None) -> str:
    address = opt or os.environ.get("RAY_ADDRESS", "")
    if not opt and not address.startswith(("http://", "https://")):
        address = DEFAULT_DASHBOARD
    return re.sub(r"^https?://", "", address).rstrip("/")


def _parse_app_id(app_id: str) -> tuple[str, str]:
    match = re.match(r"^(?P<addr>.+:\d+)-(?P<sid>.+)$", app_id)
    if not match:
        raise InvalidAppIdError(
            f"invalid ray app id {app_id!r}; expected `<dashboard host:port>-<submission id>` (as"
            " returned by `torchx run`), e.g. `127.0.0.1:8265-train-a1b2c3d4`",
            app_id,
        )
    return match["addr"], match["sid"]


def _short(e: BaseException, limit: int = 300) -> str:
    text = str(e)  # shutil.Error lists every file that failed
    return text if len(text) <= limit else text[:limit] + "..."


#: Ray job submission ids: letters, digits, ``-`` and ``_``.
SUBMISSION_ID_RULES = IdRules(allowed="a-zA-Z0-9_-", max_name_len=50)


def _default_client_factory(address: str) -> Any:
    job_submission = import_optional("ray.job_submission", "ray", "the ray scheduler")
    return job_submission.JobSubmissionClient(f"http://{address}")


class RayScheduler(WorkspaceMixin[None], Scheduler[RayJob]):
    """Runs apps as Ray jobs on a Ray cluster's Jobs API.

    Args:
        session_name: the runner session name
        client: a ``JobSubmissionClient`` (or a fake) used for every address
        client_factory: builds a client for a dashboard address (default: ``JobSubmissionClient``)
        poll_interval: seconds between polls when following logs
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates
    _hook_takes_workspace = True  # its hook takes the Workspace, not a path

    def __init__(
        self,
        session_name: str,
        client: Any | None = None,
        client_factory: Callable[[str], Any] | None = None,
        poll_interval: float = 1.0,
    ) -> None:
        super().__init__("ray", session_name)
        self._fixed_client = client
        self._factory = client_factory or _default_client_factory
        self._clients: dict[str, Any] = {}
        self.poll_interval = poll_interval

    def _client(self, address: str) -> Any:
        if self._fixed_client is not None:
            return self._fixed_client
        if address not in self._clients:
            try:
                self._clients[address] = self._factory(address)
            except TorchXError:
                raise
            except Exception as e:  # ConnectionError / RuntimeError from JobSubmissionClient
                raise SchedulerError(
                    f"cannot reach the Ray Jobs API at http://{address}: {e}; start a Ray head"
                    " with its dashboard there, or point the run option dashboard_address (or"
                    " RAY_ADDRESS=http://host:8265) at one"
                ) from e
        return self._clients[address]

    def close(self) -> None:
        self._clients.clear()

    def _run_opts(self) -> runopts:
        return RayOpts.as_runopts()

    def _requires_resource(self) -> bool:
        return False  # a replica without a resource reserves 1 CPU

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Nothing to build: the workspace is uploaded as the job's working directory."""

    # -- dryrun -----------------------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[RayJob]:
        opts = RayOpts.from_cfg(cfg)
        if opts.placement_strategy not in PLACEMENT_STRATEGIES:
            raise SchedulerError(
                f"placement_strategy={opts.placement_strategy!r} is not valid; use one of"
                f" {', '.join(PLACEMENT_STRATEGIES)}"
            )
        if opts.working_dir is not None and not os.path.isdir(opts.working_dir):
            raise InvalidRunConfigException(
                f"working_dir={opts.working_dir!r} is not a local directory; give the directory"
                " to upload as the job's working directory",
                "working_dir",
                None,
            )
        if opts.requirements is not None and not os.path.isfile(opts.requirements):
            raise InvalidRunConfigException(
                f"requirements={opts.requirements!r} is not a local file; give the path of a"
                " requirements.txt to pip-install into the job's environment",
                "requirements",
                None,
            )
        address = _resolve_address(opts.dashboard_address)
        sid = unique_id(app.name, SUBMISSION_ID_RULES)
        working_dir = opts.working_dir
        requirements = opts.requirements
        if working_dir is None and app.roles[0].workspace:
            working_dir = str(app.roles[0].workspace)
        elif working_dir is None and app.roles[0].image and os.path.isdir(app.roles[0].image):
            working_dir = app.roles[0].image  # as in TorchX: the image is a local directory
        if (
            requirements is None
            and working_dir
            and os.path.isfile(os.path.join(working_dir, "requirements.txt"))
        ):
            requirements = os.path.join(working_dir, "requirements.txt")  # as in TorchX
        actors = []
        for role in app.roles:
            res = role.resource
            for i in range(role.num_replicas):
                replica = macros.Values(
                    img_root="", app_id=sid, replica_id=str(i), rank0_env=RANK0_ENV
                ).apply(role)
                actors.append(
                    RayActor(
                        role=role.name,
                        replica_id=i,
                        command=[replica.entrypoint, *replica.args],
                        env=dict(replica.env),
                        num_cpus=float(res.cpu) if res.cpu and res.cpu > 0 else 1.0,
                        num_gpus=int(res.gpu) if res.gpu and res.gpu > 0 else 0,
                        memory=int(res.memMB) * 1024 * 1024 if res.memMB and res.memMB > 0 else 0,
                    )
                )
        req = RayJob(
            app_id=f"{address}-{sid}",
            dashboard_address=address,
            submission_id=sid,
            entrypoint=f"python {DRIVER_FILE}",
            runtime_env={"env_vars": {"RAY_DEDUP_LOGS": "0", "PYTHONUNBUFFERED": "1"}},
            metadata={
                META_VERSION: __version__,
                META_APP_NAME: app.name,
                META_ROLES: json.dumps({r.name: r.num_replicas for r in app.roles}),
            },
            actors=actors,
            working_dir=working_dir,
            requirements=requirements,
            placement_strategy=opts.placement_strategy,
            placement_timeout=opts.placement_timeout,
        )
        return AppDryRunInfo(req, str)

    # -- submit -----------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[RayJob]) -> str:
        req = dryrun_info.request
        runtime_env = dict(req.runtime_env)
        if req.requirements:
            try:
                with open(req.requirements, encoding="utf-8") as f:
                    runtime_env["pip"] = [
                        line.strip() for line in f if line.strip() and not line.startswith("#")
                    ]
            except OSError as e:
                raise SchedulerError(
                    f"cannot read the requirements file {req.requirements}: {e}"
                ) from e
        tmp = tempfile.mkdtemp(prefix="torchx_ray_")
        try:
            if req.working_dir:
                try:
                    copy_workspace(req.working_dir, tmp)
                except OSError as e:  # unreadable files, sockets, a vanished directory
                    raise SchedulerError(
                        f"cannot copy the working directory {req.working_dir} for the Ray job:"
                        f" {_short(e)}; point working_dir (or the workspace) at a project"
                        " directory"
                    ) from e
            shutil.copy(
                os.path.join(os.path.dirname(__file__), "_driver.py"),
                os.path.join(tmp, DRIVER_FILE),
            )
            with open(os.path.join(tmp, ACTORS_FILE), "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "actors": [asdict(a) for a in req.actors],
                        "placement_strategy": req.placement_strategy,
                        "placement_timeout": req.placement_timeout,
                    },
                    f,
                )
            runtime_env["working_dir"] = tmp
            try:
                self._client(req.dashboard_address).submit_job(
                    entrypoint=req.entrypoint,
                    submission_id=req.submission_id,
                    runtime_env=runtime_env,
                    metadata=req.metadata,
                )
            except Exception as e:  # RuntimeError / ConnectionError from the Jobs API client
                raise SchedulerError(
                    f"Ray at {req.dashboard_address} rejected job {req.submission_id}: {e}"
                ) from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return req.app_id

    # -- inspection -------------------------------------------------------------------------

    def _job_info(self, app_id: str) -> tuple[Any, Any] | None:
        try:
            address, sid = _parse_app_id(app_id)
        except UnknownAppException:
            return None
        client = self._client(address)
        try:
            return client, client.get_job_info(sid)
        except Exception as e:
            text = str(e).lower()
            if "does not exist" in text or "404" in text or "not found" in text:
                return None
            raise SchedulerError(f"Ray at {address} could not describe {sid}: {e}") from e

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        found = self._job_info(app_id)
        return None if found is None else _describe_info(app_id, found[1])

    def _list_jobs(self, address: str) -> list[Any]:
        """Every job of the Ray cluster at ``address`` (one Jobs API call)."""
        try:
            return list(self._client(address).list_jobs())
        except TorchXError:
            raise
        except Exception as e:  # ConnectionError / RuntimeError from the Jobs API client
            raise SchedulerError(f"Ray at {address} could not list jobs: {e}") from e

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps from one ``list_jobs`` call per Ray cluster."""
        by_address: dict[str, dict[str, str]] = {}
        out: dict[str, DescribeAppResponse | None] = {}
        for app_id in dict.fromkeys(app_ids):
            out[app_id] = None
            try:
                address, sid = _parse_app_id(app_id)
            except UnknownAppException:
                continue
            by_address.setdefault(address, {})[sid] = app_id
        for address, sids in by_address.items():
            for job in self._list_jobs(address):
                found = sids.get(job.submission_id or "")
                if found is not None:
                    out[found] = _describe_info(found, job)
        return out

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        address = _resolve_address(str((cfg or {}).get("dashboard_address") or "") or None)
        out = []
        for job in self._list_jobs(address):
            metadata = job.metadata or {}
            if META_VERSION not in metadata or not job.submission_id:
                continue
            state = JOB_STATES.get(str(getattr(job.status, "value", job.status)), AppState.UNKNOWN)
            out.append(
                ListAppResponse(
                    app_id=f"{address}-{job.submission_id}",
                    state=state,
                    name=metadata.get(META_APP_NAME, ""),
                )
            )
        return out

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
        require_combined_streams(streams, "Ray job logs")
        if since is not None or until is not None:
            logger.warning("ray job logs carry no timestamps; since/until are ignored")
        _parse_app_id(app_id)  # an id no app can have says the expected form
        found = self._job_info(app_id)
        if found is None:
            raise UnknownAppException(app_id)
        roles = _role_counts(found[1])
        if roles and not 0 <= k < roles.get(role_name, 0):
            valid = ", ".join(f"{r} (replicas 0-{n - 1})" for r, n in roles.items())
            raise InvalidLogQueryError(
                f"app {app_id} has no replica {k} of role {role_name!r}; its roles are {valid}"
            )
        lines = self._replica_lines(app_id, role_name, k, should_tail)
        return filter_regex(regex, lines) if regex else lines

    def _replica_lines(self, app_id: str, role: str, k: int, should_tail: bool) -> Iterator[str]:
        _, sid = _parse_app_id(app_id)
        offset = 0
        while True:
            found = self._job_info(app_id)
            if found is None:
                return
            client, info = found
            finished = is_terminal(
                JOB_STATES.get(str(getattr(info.status, "value", info.status)), AppState.UNKNOWN)
            )
            text = client.get_job_logs(sid)
            # only complete lines, unless the job has ended
            end = len(text) if finished else text.rfind("\n") + 1
            for line in text[offset:end].splitlines(keepends=True):
                match = _LINE_RE.search(line)
                if match and match["role"] == role and int(match["k"]) == k:
                    yield match["text"] if match["text"].endswith("\n") else match["text"] + "\n"
            offset = max(offset, end)
            if not should_tail or finished:
                return
            time.sleep(self.poll_interval)

    # -- lifecycle --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        found = self._job_info(app_id)
        if found is None:
            return
        client, info = found
        try:
            client.stop_job(info.submission_id)
        except Exception as e:
            raise SchedulerError(f"Ray could not stop {app_id}: {e}") from e

    def _delete_existing(self, app_id: str) -> None:
        found = self._job_info(app_id)
        if found is None:
            return
        client, info = found
        state = JOB_STATES.get(str(getattr(info.status, "value", info.status)), AppState.UNKNOWN)
        if not is_terminal(state):
            self._cancel_existing(app_id)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not is_terminal(state):
                time.sleep(0.5)
                found = self._job_info(app_id)
                if found is None:
                    return
                state = JOB_STATES.get(
                    str(getattr(found[1].status, "value", found[1].status)), AppState.UNKNOWN
                )
        try:
            client.delete_job(info.submission_id)
        except Exception as e:
            raise SchedulerError(f"Ray could not delete {app_id}: {e}") from e


def _describe_info(app_id: str, info: Any) -> DescribeAppResponse:
    """The app's status from its Ray job info (``JobDetails``/``JobInfo``)."""
    state = JOB_STATES.get(str(getattr(info.status, "value", info.status)), AppState.UNKNOWN)
    role_counts = _role_counts(info)
    statuses = [
        RoleStatus(role, [ReplicaStatus(i, state, role, "") for i in range(n)])
        for role, n in role_counts.items()
    ]
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=0,
        msg=info.message or "",
        ui_url=f"http://{_parse_app_id(app_id)[0]}/#/jobs/{info.submission_id}",
        roles_statuses=statuses,
        roles=[Role(name=r, image="", num_replicas=n) for r, n in role_counts.items()],
    )


def _role_counts(info: Any) -> dict[str, int]:
    """``{role: num_replicas}`` from the job's torchx metadata (empty for a foreign job)."""
    try:
        counts = json.loads((info.metadata or {}).get(META_ROLES, "{}"))
    except ValueError:
        return {}
    return counts if isinstance(counts, dict) else {}


def create_scheduler(
    session_name: str,
    client: Any | None = None,
    client_factory: Callable[[str], Any] | None = None,
    poll_interval: float = 1.0,
    ray_client: Any | None = None,
    **kwargs: Any,
) -> RayScheduler:
    """Creates a :class:`RayScheduler` (registry entry of ``ray``).

    ``ray_client`` is TorchX's name for ``client``. Other keyword arguments (the runner passes its
    scheduler params to every factory) are ignored.
    """
    if kwargs:
        logger.debug("ray_scheduler: ignoring scheduler params %s", sorted(kwargs))
    return RayScheduler(
        session_name=session_name,
        client=client if client is not None else ray_client,
        client_factory=client_factory,
        poll_interval=poll_interval,
    )
