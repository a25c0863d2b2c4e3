"""Docker workspaces: build an image that patches a local workspace onto the role's image.

The build context is the workspace (every project merged into one directory, without what each
project's ``.dockerignore`` names, as in TorchX) plus a Dockerfile:

* if the workspace root holds ``Dockerfile.torchx`` it is used as is, with the build argument
  ``IMAGE`` set to the role's image (so it can start with ``ARG IMAGE`` / ``FROM $IMAGE``);
* otherwise a default one copies the workspace over the image's working directory::

      ARG IMAGE
      FROM $IMAGE
      COPY . .

The build (``client.api.build``, TorchX's call: its events are logged on the module's ``log``
as they come, unless ``quiet``) never pulls (``pull=False``, the base image must be present or
pullable by the engine itself) and runs with host networking. ``role.image`` becomes the built
image id; an ``error`` event raises :class:`DockerBuildError` (a ``docker.errors.BuildError``
too, as in TorchX). A local project that does not exist is copied as nothing (with a warning),
as in TorchX; the runner refuses such a workspace before any build. With the
``image_repo`` run option, :meth:`DockerWorkspaceMixin.dryrun_push_images` renames the built images
to ``{image_repo}:{tag}`` and :meth:`DockerWorkspaceMixin.push_images` pushes them; without it, a
built image raises :class:`MissingImageRepoError` there, as in TorchX (``local_docker``, which
runs the local image, does not ask for a push without ``image_repo``).
"""

from __future__ import annotations

import functools
import io
import logging
import os
import tarfile
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torchx_core.specs import AppDef, CfgVal, Role, Workspace, runopts
from torchx_core.specs.errors import TorchXError, import_optional
from torchx_core.workspace.api import WorkspaceMixin, as_workspace, copy_workspace
from torchx_core.workspace.ignore import DOCKER_IGNORE

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "DEFAULT_DOCKERFILE",
    "TORCHX_DOCKERFILE",
    "DockerBuildError",
    "DockerEngineError",
    "DockerWorkspaceError",
    "DockerWorkspaceMixin",
    "MissingImageRepoError",
    "build_context",
]

log: logging.Logger = logging.getLogger(__name__)  # TorchX's name (its users' tests patch it)
logger = log

TORCHX_DOCKERFILE = "Dockerfile.torchx"
DEFAULT_DOCKERFILE = b"""ARG IMAGE
FROM $IMAGE

COPY . .
"""
LABEL_WORKSPACE = "torchx.pytorch.org/workspace"


class DockerWorkspaceError(TorchXError, RuntimeError):
    """Building or pushing a workspace image failed (the engine's output is in the message)."""


class MissingImageRepoError(DockerWorkspaceError, KeyError):
    """A local workspace image must be pushed but no ``image_repo`` is set (TorchX: KeyError)."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


class DockerBuildError(DockerWorkspaceError):
    """The engine reported an error event while building a workspace image. With the ``docker``
    package installed, the raised error is also a ``docker.errors.BuildError`` (TorchX's)."""


@functools.cache
def _build_error_type() -> type[DockerBuildError]:
    """:class:`DockerBuildError`, also a ``docker.errors.BuildError`` when ``docker`` imports."""
    try:
        from docker.errors import BuildError
    except ImportError:
        return DockerBuildError

    class _DockerBuildError(DockerBuildError, BuildError):  # type: ignore[misc]  # untyped docker
        def __init__(self, reason: str, build_log: list[dict[str, Any]]) -> None:
            Exception.__init__(self, reason)
            self.msg = reason
            self.build_log = build_log

    _DockerBuildError.__name__ = _DockerBuildError.__qualname__ = "DockerBuildError"
    return _DockerBuildError


class DockerEngineError(TorchXError, ConnectionError):
    """The Docker engine cannot be reached (``DOCKER_HOST`` or the local socket)."""


def _engine_unreachable(e: BaseException) -> DockerEngineError:
    """The error to raise when no Docker engine answers."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock (the default)"
    return DockerEngineError(
        f"cannot reach the Docker engine at {host}: {e}; start the Docker daemon or point"
        " DOCKER_HOST at a running engine"
    )


def build_context(workspace: Workspace | str) -> tuple[io.BytesIO, str]:
    """Returns a gzip-free tar of the merged workspace (plus a default Dockerfile if it has none);
    each project's ``.dockerignore`` leaves files out, as in TorchX.

    Returns:
        ``(tar_file, dockerfile_name)``: the in-memory build context, rewound, and the name of the
        Dockerfile inside it: ``Dockerfile.torchx``, the workspace's or (as in TorchX) the
        default one added under that name.
    """
    with tempfile.TemporaryDirectory(prefix="torchx_ws_") as tmp:
        copy_workspace(workspace, tmp, DOCKER_IGNORE, missing_ok=True)
        dockerfile = TORCHX_DOCKERFILE
        if not os.path.isfile(os.path.join(tmp, TORCHX_DOCKERFILE)):  # TorchX's default one
            with open(os.path.join(tmp, dockerfile), "wb") as f:
                f.write(DEFAULT_DOCKERFILE)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            # files and symlinks only, as TorchX's context (directories come with their files)
            for current, dirs, files in os.walk(tmp):
                dirs.sort()
                for name in sorted(files + [d for d in dirs if os.path.islink(f"{current}/{d}")]):
                    path = os.path.join(current, name)
                    tar.add(path, arcname=os.path.relpath(path, tmp), recursive=False)
    buf.seek(0)
    return buf, dockerfile


def _build_context(img: str, workspace: Workspace | str) -> io.BytesIO:
    """TorchX's form of :func:`build_context`: the tar alone (its Dockerfile is always
    ``Dockerfile.torchx``); ``img`` is not used (the image is a build argument)."""
    return build_context(workspace)[0]


class DockerWorkspaceMixin(WorkspaceMixin[dict[str, tuple[str, str]]]):
    """Workspace support for schedulers that run Docker images.

    Args:
        docker_client: a ``docker.DockerClient`` (or a fake); default ``docker.from_env()``
    """

    _hook_takes_workspace = True  # its hook takes the Workspace, not a path

    def __init__(
        self, *args: Any, docker_client: DockerClient | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.__docker_client = docker_client

    @property
    def _docker_client(self) -> DockerClient:
        """The Docker client given to the constructor, else ``docker.from_env()`` built on first
        use (TorchX's attribute: a property)."""
        if self.__docker_client is None:
            backend = getattr(self, "backend", "docker")  # set by Scheduler.__init__
            docker = import_optional("docker", "docker", f"the {backend} scheduler")
            try:
                self.__docker_client = docker.from_env()
            except docker.errors.DockerException as e:  # no engine answers on DOCKER_HOST
                raise _engine_unreachable(e) from e
        return self.__docker_client

    def _close_docker_client(self) -> None:
        client, self.__docker_client = self.__docker_client, None
        if client is not None and hasattr(client, "close"):
            client.close()

    def workspace_opts(self) -> runopts:
        opts = runopts()
        opts.add(
            "image_repo",
            type_=str,
            help="(docker workspaces) repository to push the built workspace images to, e.g."
            " 127.0.0.1:5000/me/trainer; unset keeps them local",
        )
        opts.add("quiet", type_=bool, default=False, help="(docker workspaces) hide build output")
        return opts

    def _scheduler_cfg(self, cfg: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        """``cfg`` without the workspace options: what the scheduler's own opts read."""
        workspace_keys = {k for k, _ in self.workspace_opts()}
        return {k: v for k, v in cfg.items() if k not in workspace_keys}

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace | str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Builds the workspace image on top of ``role.image`` and points ``role.image`` at it."""
        errors = _docker_errors()
        try:
            context, dockerfile = build_context(as_workspace(workspace))
        except OSError as e:  # unreadable files, sockets, a missing project directory
            raise DockerWorkspaceError(
                f"cannot copy the workspace {workspace} into the image build context:"
                f" {_copy_failure(e)}; point the workspace at a project directory (CLI:"
                " --workspace DIR, or --workspace '' to run the image unchanged)"
            ) from e
        client = self._docker_client
        log.info("workspace `%s` copied into the image build context", workspace)
        log.info("building the workspace image on `%s` (this may take a while)...", role.image)
        events: list[dict[str, Any]] = []
        image_id = None
        try:
            for event in client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=dockerfile,
                buildargs={"IMAGE": role.image},
                pull=False,
                rm=True,
                network_mode="host",
                labels={LABEL_WORKSPACE: str(workspace)},
                decode=True,
            ):
                events.append(event)
                message = str(event.get("stream") or "").strip("\r\n")
                if message and not cfg.get("quiet"):
                    log.info(message)
                if aux := event.get("aux"):
                    image_id = aux.get("ID", image_id)
                if error := event.get("error"):
                    raise _build_error_type()(
                        f"building the workspace {workspace} on image {role.image!r} failed:"
                        f" {error}",
                        events,
                    )
        except DockerWorkspaceError:
            raise
        except errors as e:
            raise DockerWorkspaceError(
                f"building the workspace {workspace} on image {role.image!r} failed: {e}"
            ) from e
        if not image_id:
            raise DockerWorkspaceError(
                f"building the workspace {workspace} on image {role.image!r} reported no image"
                " id; check the engine's build output above (run without quiet)"
            )
        role.image = image_id

    def dryrun_push_images(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> dict[str, tuple[str, str]]:
        """Renames locally built images to ``{image_repo}:{tag}``; returns what to push.

        Returns:
            ``{local_image_id: (repository, tag)}`` (empty: no role runs a local image).

        Raises:
            MissingImageRepoError: a role runs a local image and ``image_repo`` is not set (a
                ``KeyError``, as in TorchX: the cluster could not pull the image).
        """
        repo = cfg.get("image_repo")
        images: dict[str, tuple[str, str]] = {}
        for role in app.roles:
            if role.image.startswith("sha256:"):
                if not repo:
                    raise MissingImageRepoError(
                        f"role {role.name!r} runs the local image {role.image} (its workspace"
                        " build), which the cluster cannot pull: set the `image_repo` run option"
                        " to a repository you can push to (-cfg image_repo=registry/me/trainer)"
                    )
                tag = role.image[len("sha256:") :][:12]
                images[role.image] = (str(repo), tag)
                role.image = f"{repo}:{tag}"
        return images

    def push_images(self, images_to_push: dict[str, tuple[str, str]]) -> None:
        """Tags and pushes the images chosen by :meth:`dryrun_push_images` (nothing to push: the
        Docker engine is not contacted)."""
        if not images_to_push:
            return
        client = self._docker_client
        for local, (repo, tag) in images_to_push.items():
            try:
                client.images.get(local).tag(repo, tag=tag)
                for line in client.images.push(repo, tag=tag, stream=True, decode=True):
                    if isinstance(line, dict) and line.get("error"):
                        raise DockerWorkspaceError(
                            f"pushing {repo}:{tag} failed: {line['error']}; check that the"
                            " registry is reachable and you are logged in (docker login)"
                        )
            except _docker_errors() as e:
                raise DockerWorkspaceError(f"pushing {repo}:{tag} failed: {e}") from e


def _copy_failure(e: OSError) -> str:
    """A short description of a failed workspace copy (``shutil.Error`` lists every file)."""
    failures = e.args[0] if e.args and isinstance(e.args[0], list) else None
    if failures and all(isinstance(f, tuple) and len(f) == 3 for f in failures):
        src, _, why = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{src}: {why}{more}"
    return str(e)


def _docker_errors() -> tuple[type[BaseException], ...]:
    try:
        from docker.errors import DockerException
    except ImportError:
        return (OSError,)
    return (DockerException, OSError)
