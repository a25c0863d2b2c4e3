"""Docker workspaces: build context, Dockerfile.torchx, image push (fake Docker client)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from support.docker_fixtures import BUSYBOX, FakeDockerClient

from torchx_core.schedulers.docker.scheduler import DockerScheduler
from torchx_core.specs import AppDef, Role, Workspace
from torchx_core.workspace.docker_workspace import (
    DEFAULT_DOCKERFILE,
    TORCHX_DOCKERFILE,
    DockerWorkspaceError,
    build_context,
)


def _project(tmp_path: Path, dockerfile: str | None = None) -> Path:
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "main.py").write_text("print('hi')\n")
    (proj / "pkg" / "mod.py").write_text("X = 1\n")
    (proj / "__pycache__").mkdir()
    (proj / "__pycache__" / "junk.pyc").write_text("junk")
    if dockerfile is not None:
        (proj / TORCHX_DOCKERFILE).write_text(dockerfile)
    return proj


def _files(tar_bytes: bytes) -> set[str]:
    import io

    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_build_context_adds_default_dockerfile(tmp_path: Path) -> None:
    ctx, dockerfile = build_context(Workspace({str(_project(tmp_path)): ""}))
    names = _files(ctx.read())
    assert dockerfile == "Dockerfile.torchx"  # TorchX's name for the default one too
    assert names == {"main.py", "pkg/mod.py", dockerfile}


def test_torchx_build_context_is_the_tar(tmp_path: Path) -> None:
    """TorchX's ``_build_context(img, workspace)``: the tar, with file modes kept."""
    import os
    import stat

    from torchx_core.workspace.docker_workspace import _build_context

    proj = _project(tmp_path)
    os.chmod(proj / "main.py", 0o755)
    with _build_context("img", str(proj)) as f, tarfile.open(fileobj=f) as tar:
        assert stat.S_IMODE(tar.getmember("main.py").mode) == 0o755
        assert sorted(tar.getnames()) == [TORCHX_DOCKERFILE, "main.py", "pkg/mod.py"]  # no dirs
        assert tar.extractfile(TORCHX_DOCKERFILE).read() == DEFAULT_DOCKERFILE  # type: ignore[union-attr]


def test_build_context_maps_projects_to_subdirs(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.txt").write_text("b")
    ws = Workspace({str(_project(tmp_path)): "app", str(other): "lib"})
    ctx, _ = build_context(ws)
    assert {"app/main.py", "app/pkg/mod.py", "lib/b.txt"} <= _files(ctx.read())


def _app(workspace: Workspace) -> AppDef:
    return AppDef(
        "ws",
        roles=[Role("r", image=BUSYBOX, entrypoint="cat", args=["main.py"], workspace=workspace)],
    )


def test_workspace_build_updates_role_image(tmp_path: Path) -> None:
    client = FakeDockerClient()
    sched = DockerScheduler("t", client=client)
    app = _app(Workspace({str(_project(tmp_path)): ""}))
    req = sched.submit_dryrun(app, {}).request
    build = client.images.builds[0]
    assert build["buildargs"] == {"IMAGE": BUSYBOX}
    assert build["pull"] is False and build["network_mode"] == "host"
    assert build["files"][build["dockerfile"]] == DEFAULT_DOCKERFILE.decode()
    assert req.containers[0].image.startswith("sha256:")
    assert app.roles[0].image == req.containers[0].image
    assert req.images_to_push == {}


def test_dockerfile_torchx_is_honoured(tmp_path: Path) -> None:
    client = FakeDockerClient()
    custom = "ARG IMAGE\nFROM $IMAGE\nCOPY main.py /opt/main.py\n"
    DockerScheduler("t", client=client).submit_dryrun(
        _app(Workspace({str(_project(tmp_path, custom)): ""})), {}
    )
    build = client.images.builds[0]
    assert build["dockerfile"] == TORCHX_DOCKERFILE
    assert build["files"][TORCHX_DOCKERFILE] == custom


def test_image_repo_renames_and_pushes(tmp_path: Path) -> None:
    client = FakeDockerClient()
    sched = DockerScheduler("t", client=client)
    info = sched.submit_dryrun(
        _app(Workspace({str(_project(tmp_path)): ""})),
        {"image_repo": "127.0.0.1:5000/me/ws", "network": "host"},
    )
    ((local, (repo, tag)),) = info.request.images_to_push.items()
    assert repo == "127.0.0.1:5000/me/ws" and local.startswith("sha256:")
    assert info.request.containers[0].image == f"{repo}:{tag}"
    client.images.present[f"{repo}:{tag}"] = client.images.get(local)
    sched.schedule(info)
    assert client.images.pushed == [f"{repo}:{tag}"]
    assert f"{repo}:{tag}" in client.images.get(local).tags


def test_push_error_is_typed(tmp_path: Path) -> None:
    client = FakeDockerClient()
    client.push_error = "denied: requested access to the resource is denied"
    sched = DockerScheduler("t", client=client)
    info = sched.submit_dryrun(
        _app(Workspace({str(_project(tmp_path)): ""})), {"image_repo": "127.0.0.1:5000/me/ws"}
    )
    with pytest.raises(DockerWorkspaceError, match=r"denied.*docker login"):
        sched.schedule(info)


def test_special_files_in_the_workspace_are_skipped(tmp_path: Path) -> None:
    import socket

    proj = _project(tmp_path)
    client = FakeDockerClient()
    with socket.socket(socket.AF_UNIX) as sock:  # a socket file cannot be copied: it is skipped
        sock.bind(str(proj / "daemon.sock"))
        info = DockerScheduler("t", client=client).submit_dryrun(
            _app(Workspace({str(proj): ""})), {}
        )
    (build,) = client.images.builds
    # the image was built from the regular files, without the socket
    assert {"main.py", "pkg/mod.py"} <= set(build["files"])
    assert not any(name.endswith("daemon.sock") for name in build["files"])
    assert info.request.containers[0].image.startswith("sha256:")


def test_unreachable_engine_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.workspace.docker_workspace import DockerEngineError

    missing = tmp_path / "no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{missing}")
    with pytest.raises(DockerEngineError) as e:
        DockerScheduler("t").submit_dryrun(_app(Workspace({str(_project(tmp_path)): ""})), {})
    assert f"cannot reach the Docker engine at unix://{missing}" in str(e.value)
    assert "DOCKER_HOST" in str(e.value)


def test_pushing_nothing_does_not_contact_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """As TorchX: ``push_images({})`` is a no-op (no engine needed: a job whose images are all
    in a registry already)."""
    from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin

    def no_engine(self: object) -> None:
        raise AssertionError("the Docker engine was contacted")

    monkeypatch.setattr(DockerWorkspaceMixin, "_docker_client", property(no_engine))
    DockerWorkspaceMixin().push_images({})


def test_build_logs_on_torchx_log_and_an_error_event_is_torchx_build_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As TorchX: ``client.api.build`` events are logged on the module's ``log`` (TorchX users
    patch it) unless ``quiet``; an ``error`` event raises a ``docker.errors.BuildError``."""
    import logging
    from unittest import mock

    from docker.errors import BuildError

    from torchx_core.workspace import docker_workspace
    from torchx_core.workspace.docker_workspace import DockerBuildError, DockerWorkspaceMixin

    client = FakeDockerClient()
    role = Role("r", image=BUSYBOX)
    with mock.patch.object(docker_workspace, "log") as log:
        DockerWorkspaceMixin(docker_client=client).build_workspace_and_update_role(
            role, str(_project(tmp_path)), {"quiet": True}
        )
    assert role.image.startswith("sha256:") and log.info.call_count == 2
    client.api.build_error = "COPY failed: no such file"
    with caplog.at_level(logging.INFO), pytest.raises(DockerBuildError) as e:
        DockerWorkspaceMixin(docker_client=client).build_workspace_and_update_role(
            Role("r", image=BUSYBOX), str(_project(tmp_path / "b")), {}
        )
    assert isinstance(e.value, BuildError) and "COPY failed: no such file" in str(e.value)
    assert "Step 1/3 : ARG IMAGE" in caplog.text  # the engine's output, as it came


def test_a_missing_project_builds_an_empty_context_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As TorchX: a workspace that does not exist adds no file (the runner refuses it first)."""
    ctx, dockerfile = build_context(str(tmp_path / "bogus"))
    assert _files(ctx.read()) == {dockerfile}
    assert "bogus does not exist" in caplog.text


def test_a_local_image_to_push_without_image_repo_is_torchx_key_error() -> None:
    """As TorchX: ``dryrun_push_images`` of a role running a local (``sha256:``) image needs
    ``image_repo`` (a remote cluster cannot pull the image); ``local_docker`` does not ask."""
    from torchx_core.workspace.docker_workspace import DockerWorkspaceMixin, MissingImageRepoError

    app = AppDef("a", roles=[Role("r", image="sha256:abc"), Role("s", image="busybox")])
    with pytest.raises(KeyError) as e:
        DockerWorkspaceMixin().dryrun_push_images(app, {})
    assert isinstance(e.value, MissingImageRepoError)
    assert str(e.value).startswith("role 'r' runs the local image sha256:abc")
    assert "-cfg image_repo=" in str(e.value) and app.roles[0].image == "sha256:abc"
    assert DockerWorkspaceMixin().dryrun_push_images(AppDef("b", roles=[app.roles[1]]), {}) == {}
    pushed = DockerWorkspaceMixin().dryrun_push_images(app, {"image_repo": "reg/me"})
    assert pushed == {"sha256:abc": ("reg/me", "abc")} and app.roles[0].image == "reg/me:abc"
