"""``local_docker`` (alias ``docker``): runs each replica of an app as a Docker container.

Uses the Docker SDK (torchx-suite's ``docker`` extra) against the engine named by
``DOCKER_HOST`` (default: the local socket). Every container carries labels naming its app, role and
replica, so ``describe``, ``list``, ``log_iter``, ``cancel`` and ``delete`` work from any process
that can reach the engine; nothing is kept on the client side.

* Networking: containers join a user bridge network (``network`` run option, default ``torchx``,
  created on first use) with ``hostname`` = container name, so replica 0 of the first role is
  reachable by name; its name is exported as ``TORCHX_RANK0_HOST`` (``macros.rank0_env``). With
  ``network=host`` the containers share the host's network and ``TORCHX_RANK0_HOST=localhost``.
* Resources: ``cpu`` -> ``nano_cpus``, ``memMB`` -> ``mem_limit`` and ``shm_size`` (as TorchX: a
  ``/dev/shm`` as large as the memory, for DataLoader workers and NCCL; Docker's default is 64 MiB),
  ``gpu`` -> a GPU device request. Every container gets ``TORCHX_IMAGE`` (its image), as in TorchX.
* Mounts: bind, volume and device mounts map to Docker mounts and ``devices``.
* Retries: ``Role.max_retries`` maps to the ``on-failure`` restart policy of each container (Docker
  restarts replicas individually, whatever the role's ``retry_policy``).
* Images are pulled only if missing (``pull_policy=missing``); ``never`` fails on a missing image
  instead, ``always`` pulls every time.
* ``cancel`` stops the containers (SIGTERM, SIGKILL after ``stop_timeout``); cancelled apps are
  reported ``CANCELLED`` (the containers are renamed with a ``--cancelled`` suffix as a marker,
  since Docker labels are immutable). ``delete`` removes the containers.

Workspaces (:class:`~torchx_core.workspace.docker_workspace.DockerWorkspaceMixin`) build an image
that patches the workspace onto the role's image and run that.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from torchx_core import __version__
from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import (
    DescribeAppResponse,
    InvalidLogQueryError,
    ListAppResponse,
    Scheduler,
    SchedulerError,
    Stream,
    StructuredOpts,
    filter_regex,
    lines_from_chunks,
    split_lines,
)
from torchx_core.schedulers.devices import get_device_mounts
from torchx_core.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    Role,
    RoleStatus,
    VolumeMount,
    is_terminal,
    macros,
    runopts,
)
from torchx_core.specs.errors import import_optional
from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin

if TYPE_CHECKING:
    from docker.models.containers import Container

    from docker import DockerClient

__all__ = [
    "CONTAINER_STATE",
    "CONTAINER_STATES",
    "LABEL_APP_ID",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_NAME",
    "LABEL_VERSION",
    "NETWORK",
    "DockerContainer",
    "DockerJob",
    "DockerOpts",
    "DockerScheduler",
    "Opts",
    "create_scheduler",
    "ensure_network",
    "has_docker",
    "make_unique",
]

logger: logging.Logger = logging.getLogger(__name__)

LABEL_VERSION = "torchx.pytorch.org/version"
LABEL_APP_ID = "torchx.pytorch.org/app-id"
LABEL_ROLE_NAME = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID = "torchx.pytorch.org/replica-id"
LABEL_APP_NAME = "torchx.pytorch.org/app-name"
LABEL_VERSION_VALUE = __version__  # the package version, as on Kubernetes pods (and in TorchX)
RANK0_ENV = "TORCHX_RANK0_HOST"
IMAGE_ENV = "TORCHX_IMAGE"  # TorchX's settings.ENV_TORCHX_IMAGE
#: the default network of the containers (TorchX's name)
NETWORK = "torchx"
CANCELLED_SUFFIX = "--cancelled"
PULL_POLICIES = ("missing", "never", "always")

# Docker container status -> replica state ("exited" is decided by the exit code).
CONTAINER_STATES: dict[str, AppState] = {
    "created": AppState.PENDING,
    "restarting": AppState.PENDING,
    "paused": AppState.PENDING,
    "running": AppState.RUNNING,
    "removing": AppState.RUNNING,
    "exited": AppState.SUCCEEDED,
    "dead": AppState.FAILED,
}
CONTAINER_STATE = CONTAINER_STATES  # TorchX's name


@dataclass
class DockerOpts(StructuredOpts):
    """Run options of the ``local_docker`` scheduler."""

    copy_env: list[str] | None = field(
        default=None,
        metadata={
            "help": "glob patterns of local environment variables to copy into every container"
        },
    )
    env: dict[str, str] | None = field(
        default=None, metadata={"help": "extra environment variables for every container"}
    )
    privileged: bool = field(default=False, metadata={"help": "run the containers privileged"})
    network: str = field(
        default=NETWORK,
        metadata={
            "help": "docker network to attach the containers to (created if missing);"
            " 'host' shares the host network"
        },
    )
    pull_policy: str = field(
        default="missing",
        metadata={
            "help": "when to pull images: 'missing' (default), 'never' (fail if absent), 'always'"
        },
    )


Opts = DockerOpts  # TorchX's name


def has_docker() -> bool:
    """Whether the Docker SDK is installed and a Docker engine answers (``docker.from_env()``)."""
    try:
        import docker
    except ImportError:
        return False
    try:
        docker.from_env().close()
    except docker.errors.DockerException:
        return False
    return True


def ensure_network(client: DockerClient | None = None, name: str = NETWORK) -> None:
    """Creates the bridge network ``name`` (default ``torchx``) if it does not exist yet.

    Safe when several processes submit at once: a network created concurrently by another
    process counts as created.

    Raises:
        SchedulerError: the network is missing and cannot be created.
    """
    if client is None:
        docker = import_optional("docker", "docker", "the local_docker scheduler")
        client = docker.from_env()
    if client.networks.list(names=[name]):
        return
    try:
        client.networks.create(
            name, driver="bridge", check_duplicate=True, labels={LABEL_VERSION: LABEL_VERSION_VALUE}
        )
    except _docker_errors() as e:  # created concurrently by another submit
        if not client.networks.list(names=[name]):
            raise SchedulerError(f"cannot create docker network {name!r}: {e}") from e


@dataclass
class DockerContainer:
    """One container of a :class:`DockerJob`, in plain data (no Docker SDK objects).

    Args:
        image: the image to run
        command: entrypoint and arguments
        kwargs: the other ``containers.run`` keyword arguments (mounts as plain dicts)
    """

    image: str
    command: list[str]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class DockerJob:
    """The native request of ``local_docker``: what ``schedule`` will create.

    Args:
        app_id: the app id (prefix of every container name)
        network: the network name, or ``host``
        pull_policy: ``missing``, ``never`` or ``always``
        containers: one entry per replica
        images_to_push: workspace images to push first, ``{local_id: (repository, tag)}``
    """

    app_id: str
    network: str
    pull_policy: str
    containers: list[DockerContainer] = field(default_factory=list)
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-compatible data (what dryrun prints)."""
        return asdict(self)

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


#: Container names: lowercase letters, digits, ``_``, ``.`` and ``-``.
APP_ID_RULES = IdRules(allowed="a-z0-9_.-", max_name_len=24, lower=True)
APP_ID_MAX_CHARS = 33  # name (24) + "-" + suffix (8): what APP_ID_RULES makes
_ROLE_RULES = IdRules(allowed="a-z0-9_.-", max_name_len=20, lower=True)


def make_unique(name: str) -> str:
    """A new app id for ``name``: its container-name-safe form and a random suffix.

    The module-level name TorchX's tests and users patch (``docker_scheduler.make_unique``).
    """
    return unique_id(name, APP_ID_RULES)


def container_name(app_id: str, role: str, replica_id: int) -> str:
    """``{app_id}-{role}-{replica_id}``: also the hostname, so at most 63 characters.

    An app id longer than the generated ones (a patched ``make_unique``) keeps its last 33
    characters (the random suffix is at its end); the name starts with a letter or digit.

    >>> container_name("my-app-x1", "Trainer", 0)
    'my-app-x1-trainer-0'
    """
    name = f"{app_id[-APP_ID_MAX_CHARS:]}-{_ROLE_RULES.clean(role)}-{replica_id}"
    return name.lstrip("_.-")


def _mount_to_data(mount: BindMount | VolumeMount | DeviceMount) -> tuple[str, Any]:
    if isinstance(mount, BindMount):
        return "mounts", {
            "Target": mount.dst_path,
            "Source": mount.src_path,
            "Type": "bind",
            "ReadOnly": mount.read_only,
        }
    if isinstance(mount, VolumeMount):
        return "mounts", {
            "Target": mount.dst_path,
            "Source": mount.src,
            "Type": "volume",
            "ReadOnly": mount.read_only,
        }
    if isinstance(mount, DeviceMount):
        return "devices", f"{mount.src_path}:{mount.dst_path}:{mount.permissions}"
    raise SchedulerError(f"unsupported mount {mount!r}; use BindMount, VolumeMount or DeviceMount")


def _copy_env(patterns: Iterable[str]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if any(fnmatch.fnmatch(k, p) for p in patterns)}


def _replica_state(container: Container) -> AppState:
    status = container.status
    if _is_cancelled(container) and status in ("exited", "dead", "created"):
        return AppState.CANCELLED  # "created": cancelled before it ever started
    if status == "exited":
        state_info = container.attrs.get("State", {})
        return AppState.SUCCEEDED if state_info.get("ExitCode", 1) == 0 else AppState.FAILED
    return CONTAINER_STATES.get(status, AppState.UNKNOWN)


def _is_cancelled(container: Container) -> bool:
    name: str = container.name
    return name.endswith(CANCELLED_SUFFIX)


def _app_state(containers: list[Container]) -> AppState:
    states = [_replica_state(c) for c in containers]
    cancelled = any(_is_cancelled(c) for c in containers)
    if cancelled and all(is_terminal(s) for s in states):
        return AppState.CANCELLED
    if AppState.FAILED in states and not cancelled:
        return AppState.FAILED
    if all(s == AppState.SUCCEEDED for s in states):
        return AppState.SUCCEEDED
    if any(s == AppState.RUNNING for s in states):
        return AppState.RUNNING
    if any(s == AppState.UNKNOWN for s in states):
        return AppState.UNKNOWN
    return AppState.PENDING


def _timestamp(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class DockerScheduler(DockerWorkspaceMixin, Scheduler[DockerJob]):
    """Runs apps as Docker containers on one engine (images pushed only to an ``image_repo``).

    Args:
        session_name: the runner session name
        client: a ``docker.DockerClient`` (or a fake); default ``docker.from_env()`` on first use
        stop_timeout: seconds between SIGTERM and SIGKILL when cancelling
    """

    checks_in_dryrun = True  # submit_dryrun builds workspaces and validates

    def __init__(
        self,
        session_name: str,
        client: DockerClient | None = None,
        stop_timeout: float = 10.0,
    ) -> None:
        super().__init__("local_docker", session_name, docker_client=client)
        self.stop_timeout = stop_timeout

    def _client(self) -> DockerClient:
        return self._docker_client

    def close(self) -> None:
        self._close_docker_client()

    def _run_opts(self) -> runopts:
        return DockerOpts.as_runopts()

    def _requires_resource(self) -> bool:
        return False  # no resource: the container is not limited

    # -- dryrun -----------------------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        opts = DockerOpts.from_cfg(self._scheduler_cfg(cfg))
        if opts.pull_policy not in PULL_POLICIES:
            raise SchedulerError(
                f"pull_policy={opts.pull_policy!r} is not valid;"
                f" use one of {', '.join(PULL_POLICIES)}"
            )
        # container names double as hostnames (<= 63 chars): app 24 + 9, role 20, replica id
        app_id = make_unique(app.name)
        host_net = opts.network == "host"
        first = app.roles[0]
        rank0 = "localhost" if host_net else container_name(app_id, first.name, 0)
        base_env = _copy_env(opts.copy_env or [])
        base_env.update(opts.env or {})
        req = DockerJob(
            app_id=app_id,
            network=opts.network,
            pull_policy=opts.pull_policy,
            images_to_push=self.dryrun_push_images(app, cfg) if cfg.get("image_repo") else {},
        )
        for role in app.roles:
            for replica_id in range(role.num_replicas):
                req.containers.append(
                    self._container(app_id, role, replica_id, opts, base_env, rank0, app.name)
                )
        return AppDryRunInfo(req, str)

    def _container(
        self,
        app_id: str,
        role: Role,
        replica_id: int,
        opts: DockerOpts,
        base_env: dict[str, str],
        rank0: str,
        app_name: str,
    ) -> DockerContainer:
        values = macros.Values(
            img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=RANK0_ENV
        )
        replica = values.apply(role)
        name = container_name(app_id, role.name, replica_id)
        env = dict(base_env)
        env.update(replica.env)
        env[RANK0_ENV] = rank0
        env[IMAGE_ENV] = role.image
        kwargs: dict[str, Any] = {
            "name": name,
            "labels": {
                LABEL_VERSION: LABEL_VERSION_VALUE,
                LABEL_APP_ID: app_id,
                LABEL_ROLE_NAME: role.name,
                LABEL_REPLICA_ID: str(replica_id),
                LABEL_APP_NAME: app_name,
            },
            "environment": env,
            "privileged": opts.privileged,
        }
        if opts.network == "host":
            kwargs["network_mode"] = "host"
        else:
            kwargs["network"] = opts.network
            kwargs["hostname"] = name
            if role.port_map:
                kwargs["ports"] = {f"{port}/tcp": None for port in role.port_map.values()}
        res = role.resource
        if res.cpu and res.cpu > 0:
            kwargs["nano_cpus"] = int(res.cpu * 1e9)
        if res.memMB and res.memMB > 0:
            # /dev/shm as large as the memory (TorchX): Docker's 64 MiB breaks DataLoader workers
            kwargs["mem_limit"] = kwargs["shm_size"] = f"{int(res.memMB)}m"
        if res.gpu and res.gpu > 0:
            kwargs["device_requests"] = [
                {"Driver": "", "Count": int(res.gpu), "Capabilities": [["gpu"]]}
            ]
        # named devices (EFA, Neuron) are mounted from the host, as TorchX does
        for mount in [*role.mounts, *get_device_mounts(res.devices or {})]:
            key, data = _mount_to_data(mount)
            kwargs.setdefault(key, []).append(data)
        if role.max_retries > 0:
            kwargs["restart_policy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
        command = [replica.entrypoint, *replica.args]
        return DockerContainer(image=role.image, command=command, kwargs=kwargs)

    # -- submit -----------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        req = dryrun_info.request
        client = self._client()
        errors = _docker_errors()
        if req.images_to_push:
            self.push_images(req.images_to_push)
        try:
            if req.network != "host":
                self._ensure_network(req.network)
            for image in dict.fromkeys(c.image for c in req.containers):
                self._ensure_image(image, req.pull_policy)
            ncpu = int(client.info().get("NCPU") or 0)
            for c in req.containers:
                kwargs = _materialize(c.kwargs)
                if ncpu and kwargs.get("nano_cpus", 0) > ncpu * 10**9:
                    # the engine rejects a CPU limit above its CPU count: cap it
                    logger.warning(
                        "%s asks for %.1f CPUs, the docker engine has %d; capping",
                        kwargs["name"],
                        kwargs["nano_cpus"] / 1e9,
                        ncpu,
                    )
                    kwargs["nano_cpus"] = ncpu * 10**9
                client.containers.run(c.image, c.command, detach=True, **kwargs)
        except errors as e:
            # no half-started app: remove the replicas already created
            for started in self._get_containers(req.app_id):
                self._quietly(started.remove, force=True)
            raise SchedulerError(f"docker failed to start app {req.app_id}: {e}") from e
        return req.app_id

    def _ensure_network(self, name: str) -> None:
        ensure_network(self._client(), name)

    def _ensure_image(self, image: str, pull_policy: str) -> None:
        client = self._client()
        not_found = _image_not_found()
        if pull_policy != "always":
            try:
                client.images.get(image)
                return
            except not_found:
                if pull_policy == "never":
                    raise SchedulerError(
                        f"image {image!r} is not present on the docker engine and"
                        " pull_policy=never; build or load it first, or use pull_policy=missing"
                    ) from None
        logger.info("pulling image %s", image)
        client.images.pull(image)

    # -- inspection -------------------------------------------------------------------------

    def _get_containers(self, app_id: str) -> list[Container]:
        """The containers of ``app_id``, stopped ones included (TorchX's name)."""
        return self._list_containers(f"{LABEL_APP_ID}={app_id}", f"look up app {app_id}")

    def _list_containers(self, label: str, what: str) -> list[Container]:
        client = self._client()
        try:
            found: list[Container] = client.containers.list(all=True, filters={"label": label})
            return found
        except _docker_errors() as e:  # the engine went away, or answered with an API error
            raise SchedulerError(f"the docker engine failed to {what}: {e}") from e

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        return _describe_containers(app_id, self._get_containers(app_id))

    def describe_many(self, app_ids: Iterable[str]) -> dict[str, DescribeAppResponse | None]:
        """The status of many apps from one ``containers.list`` of every torchx container."""
        by_app = self._containers_by_app()
        return {a: _describe_containers(a, by_app.get(a, [])) for a in dict.fromkeys(app_ids)}

    def _containers_by_app(self) -> dict[str, list[Container]]:
        """Every torchx container (one engine call), by app id."""
        apps: dict[str, list[Container]] = {}
        for c in self._list_containers(LABEL_APP_ID, "list the torchx containers"):
            apps.setdefault(c.labels[LABEL_APP_ID], []).append(c)
        return apps

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        apps = self._containers_by_app()
        return [
            ListAppResponse(
                app_id=a, state=_app_state(cs), name=cs[0].labels.get(LABEL_APP_NAME, "")
            )
            for a, cs in sorted(apps.items())
        ]

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
        matches = [
            c
            for c in self._get_containers(app_id)
            if c.labels.get(LABEL_ROLE_NAME) == role_name
            and c.labels.get(LABEL_REPLICA_ID) == str(k)
        ]
        if not matches:
            raise InvalidLogQueryError(
                f"app {app_id!r} has no replica {k} of role {role_name!r} on local_docker;"
                " check the role name and replica id with `torchx status`"
            )
        streams = streams or Stream.COMBINED
        kwargs: dict[str, Any] = {
            "stdout": streams in (Stream.STDOUT, Stream.COMBINED),
            "stderr": streams in (Stream.STDERR, Stream.COMBINED),
        }
        if since is not None:
            kwargs["since"] = _timestamp(since)
        if until is not None:
            kwargs["until"] = _timestamp(until)
        try:
            if should_tail:
                chunks = matches[0].logs(stream=True, follow=True, **kwargs)
                lines: Iterable[str] = lines_from_chunks(
                    b.decode("utf-8", errors="replace") for b in chunks
                )
            else:
                lines = split_lines(matches[0].logs(**kwargs).decode("utf-8", errors="replace"))
        except _docker_errors() as e:
            raise SchedulerError(
                f"the docker engine failed to read the logs of {matches[0].name}: {e}"
            ) from e
        return filter_regex(regex, lines) if regex else lines

    # -- lifecycle --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        containers = self._get_containers(app_id)
        for c in containers:
            if not _is_cancelled(c):
                try:
                    c.rename(c.name + CANCELLED_SUFFIX)
                except _docker_errors() as e:
                    logger.warning("cannot mark container %s cancelled: %s", c.name, e)
        alive = [
            c for c in containers if c.status in ("running", "restarting", "created", "paused")
        ]
        for c in alive:
            self._quietly(c.kill, signal="SIGTERM")
        deadline = time.monotonic() + self.stop_timeout
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            for c in alive:
                self._quietly(c.reload)
            alive = [c for c in alive if c.status in ("running", "restarting", "paused")]
        for c in alive:
            self._quietly(c.kill, signal="SIGKILL")

    def _delete_existing(self, app_id: str) -> None:
        for c in self._get_containers(app_id):
            self._quietly(c.remove, force=True)

    def _quietly(self, fn: Any, **kwargs: Any) -> None:
        try:
            fn(**kwargs)
        except _docker_errors() as e:
            logger.debug("ignored docker error during cancel/delete: %s", e)


def _docker_errors() -> tuple[type[BaseException], ...]:
    try:
        from docker.errors import DockerException
    except ImportError:
        return (OSError,)
    return (DockerException, OSError)


def _image_not_found() -> tuple[type[BaseException], ...]:
    try:
        from docker.errors import ImageNotFound
    except ImportError:
        return (LookupError,)
    return (ImageNotFound, LookupError)


def _materialize(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turns the plain-data kwargs of a :class:`DockerContainer` into Docker SDK arguments."""
    out = dict(kwargs)
    if "mounts" in out or "device_requests" in out:
        types = import_optional("docker.types", "docker", "the local_docker scheduler")
        if "mounts" in out:
            out["mounts"] = [
                types.Mount(
                    target=m["Target"], source=m["Source"], type=m["Type"], read_only=m["ReadOnly"]
                )
                for m in out["mounts"]
            ]
        if "device_requests" in out:
            out["device_requests"] = [
                types.DeviceRequest(
                    driver=d["Driver"], count=d["Count"], capabilities=d["Capabilities"]
                )
                for d in out["device_requests"]
            ]
    return out


def _describe_containers(app_id: str, containers: list[Container]) -> DescribeAppResponse | None:
    """The app's status from its containers (None when it has none)."""
    if not containers:
        return None
    by_role: dict[str, list[ReplicaStatus]] = {}
    images: dict[str, str] = {}
    restarts = 0
    failures: list[str] = []
    # creation order = role order of the AppDef, then replica order
    order = sorted(
        containers,
        key=lambda c: (str(c.attrs.get("Created", "")), int(c.labels.get(LABEL_REPLICA_ID, "0"))),
    )
    for c in order:
        role = c.labels.get(LABEL_ROLE_NAME, "")
        state = _replica_state(c)
        hostname = c.attrs.get("Config", {}).get("Hostname", "")
        by_role.setdefault(role, []).append(
            ReplicaStatus(int(c.labels.get(LABEL_REPLICA_ID, "0")), state, role, hostname)
        )
        images.setdefault(role, c.attrs.get("Config", {}).get("Image", ""))
        restarts = max(restarts, int(c.attrs.get("RestartCount", 0) or 0))
        if state == AppState.FAILED:
            info = c.attrs.get("State", {})
            oom = " (out of memory)" if info.get("OOMKilled") else ""
            failures.append(
                f"{role}/{c.labels.get(LABEL_REPLICA_ID, '0')} exited with"
                f" {info.get('ExitCode')}{oom}"
            )
    return DescribeAppResponse(
        app_id=app_id,
        state=_app_state(containers),
        num_restarts=restarts,
        msg="; ".join(failures) or NONE,
        roles_statuses=[RoleStatus(r, reps) for r, reps in by_role.items()],
        roles=[
            Role(name=r, image=images[r], num_replicas=len(reps)) for r, reps in by_role.items()
        ],
    )


def create_scheduler(
    session_name: str,
    client: Any | None = None,
    stop_timeout: float = 10.0,
    **kwargs: Any,
) -> DockerScheduler:
    """Creates a :class:`DockerScheduler` (registry entry of ``local_docker`` and ``docker``).

    Other keyword arguments (the runner passes its scheduler params to every factory) are ignored.
    """
    if kwargs:
        logger.debug("docker_scheduler: ignoring scheduler params %s", sorted(kwargs))
    return DockerScheduler(session_name=session_name, client=client, stop_timeout=stop_timeout)
