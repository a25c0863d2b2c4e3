"""TorchX's public names of ``torchx.schedulers.local_scheduler``, behaving as in TorchX.

Image providers, ``LocalScheduler(image_provider_class=..., cache_size=...)``, the request's
``PopenRequest`` view (``role_params``, ``role_log_dirs``, ``log_dir``) and GPU counting by
``nvidia-smi -L``. Dry runs only: no process is started.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from torchx_core import specs
from torchx_core.schedulers import local_scheduler
from torchx_core.schedulers.api import SchedulerArgumentError
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local_scheduler import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
    PopenRequest,
    ReplicaParam,
    SignalException,
    create_scheduler,
)


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "root")
    monkeypatch.setenv(_state.ROOT_ENV, path)
    return path


def _role(image: str, **kw: Any) -> specs.Role:
    return specs.Role(
        "r", image=image, entrypoint="run.sh", args=["a", specs.macros.img_root], **kw
    )


def test_local_directory_provider_as_torchx(tmp_path: Path) -> None:
    provider = LocalDirectoryImageProvider(cfg={})
    assert provider.fetch(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError, match="does not exist or is not a directory"):
        provider.fetch(str(tmp_path / "missing"))
    rp = provider.get_replica_param(str(tmp_path), _role(str(tmp_path)))
    assert (rp.args, rp.cwd) == (["run.sh", "a", specs.macros.img_root], str(tmp_path))


def test_cwd_provider_as_torchx() -> None:
    provider = CWDImageProvider(cfg={})
    assert provider.fetch("/strawberry/toast") == os.getcwd() == provider.get_cwd("x")
    assert provider.get_entrypoint("ignored", _role("x")) == "run.sh"
    assert provider.get_replica_param("", _role("x")).args[0] == "run.sh"


def test_image_provider_class_chooses_the_mode(tmp_path: Path) -> None:
    local = LocalScheduler("s", image_provider_class=LocalDirectoryImageProvider)
    cwd = LocalScheduler("s", image_provider_class=CWDImageProvider)
    assert (local.backend, cwd.backend) == ("local", "local_cwd")
    req = local.submit_dryrun(specs.AppDef("a", roles=[_role(str(tmp_path))]), {}).request
    assert req.roles[0].cwd == str(tmp_path) and req.roles[0].argv[-1] == str(tmp_path)
    sched = create_scheduler("foo", cache_size=20, extra_paths=["foo"])
    assert sched._image_provider_class is CWDImageProvider and sched._cache_size == 20


def test_custom_image_provider_is_asked_per_role(tmp_path: Path) -> None:
    class Provider(ImageProvider):
        def __init__(self, cfg: Mapping[str, specs.CfgVal]) -> None:
            self.cfg = cfg

        def fetch(self, image: str) -> str:
            return str(tmp_path / image)

        def get_cwd(self, image: str) -> str | None:
            return str(tmp_path)

    sched = LocalScheduler("s", image_provider_class=Provider)
    req = sched.submit_dryrun(specs.AppDef("a", roles=[_role("img")]), {}).request
    role = req.roles[0]
    img_root = str(tmp_path / "img")
    # ImageProvider.get_entrypoint's default: the entrypoint under the image root
    assert role.argv == [os.path.join(img_root, "run.sh"), "a", img_root]
    assert role.cwd == str(tmp_path)


@pytest.mark.parametrize("size", [0, -1, True, "3"])
def test_cache_size_must_be_a_positive_int(size: object) -> None:
    with pytest.raises(SchedulerArgumentError, match="cache_size must be an int >= 1") as e:
        LocalScheduler("s", cache_size=size)  # type: ignore[arg-type]
    assert isinstance(e.value, ValueError)  # what TorchX raises


def test_popen_request_view(tmp_path: Path) -> None:
    assert PopenRequest is local_scheduler.LocalRequest
    app = specs.AppDef("a", roles=[_role(str(tmp_path), num_replicas=2, env={"FOO": "1"})])
    sched = LocalScheduler("s", image_provider_class=LocalDirectoryImageProvider)
    req = sched.submit_dryrun(app, {"log_dir": str(tmp_path / "logs")}).request
    assert req.log_dir == str(tmp_path / "logs" / "s" / req.app_id)
    dirs = req.role_log_dirs["r"]
    assert dirs == [os.path.join(req.log_dir, "r", str(k)) for k in (0, 1)]
    params = req.role_params["r"]
    assert [type(p) for p in params] == [ReplicaParam, ReplicaParam]
    first = params[1]
    assert first.stdout == os.path.join(dirs[1], "stdout.log")
    assert first.stderr == os.path.join(dirs[1], "stderr.log")
    assert first.combined == os.path.join(dirs[1], "combined.log")
    assert first.args == ["run.sh", "a", str(tmp_path)] and first.cwd == str(tmp_path)
    assert first.env["FOO"] == "1" and first.env["TORCHX_REPLICA_IDX"] == "1"
    assert first.env["TORCHELASTIC_ERROR_FILE"] == os.path.join(dirs[1], "error.json")
    assert first.env["PET_LOG_DIR"] == os.path.join(req.log_dir, "torchelastic", "r")


class _Run:
    def __init__(self, stdout: str = "", error: BaseException | None = None) -> None:
        self.stdout, self.error, self.calls = stdout, error, []

    def __call__(self, args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if self.error is not None:
            raise self.error
        return subprocess.CompletedProcess(args, 0, self.stdout, "")


def test_gpu_count_from_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _Run("GPU 0: Tesla V100 (UUID: a)\nGPU 1: Tesla V100 (UUID: b)\n")
    monkeypatch.setattr(subprocess, "run", run)
    sched = LocalScheduler("s")
    role = specs.Role(
        "r",
        image="",
        entrypoint="x",
        num_replicas=2,
        resource=specs.Resource(cpu=1, gpu=1, memMB=1),
    )
    req = sched.submit_dryrun(
        specs.AppDef("a", roles=[role]), {"auto_set_cuda_visible_devices": True}
    )
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in req.request.role_params["r"]] == ["0", "1"]
    assert run.calls == [["nvidia-smi", "-L"]]
    monkeypatch.setattr(subprocess, "run", _Run(error=FileNotFoundError("nvidia-smi")))
    assert sched._cuda_device_count() == 0
    failed = subprocess.CalledProcessError(2, "nvidia-smi", "", "no driver")
    monkeypatch.setattr(subprocess, "run", _Run(error=failed))
    assert sched._cuda_device_count() == 0


def test_signal_exception_keeps_the_signal() -> None:
    import signal

    e = SignalException("got SIGTERM", signal.SIGTERM)
    assert (str(e), e.sigval) == ("got SIGTERM", signal.SIGTERM)


def test_path_macros_substituted_and_torchx_path_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # extra_paths and the role's PATH may use macros (TorchX: `join(macros.img_root, "bin")`);
    # the replicas get them substituted, and role_params shows TorchX's PATH: the request's own
    # part (extra paths, role PATH, cwd) without the launcher's PATH
    monkeypatch.setenv("PATH", "/launcher/bin")
    sched = LocalScheduler(
        "s",
        image_provider_class=LocalDirectoryImageProvider,
        extra_paths=[os.path.join(specs.macros.img_root, "bin")],
    )
    role = _role(str(tmp_path), env={"PATH": f"{specs.macros.img_root}/tools:/home/bob"})
    app = specs.AppDef("a", roles=[role])
    req = sched._to_popen_request(app, {"log_dir": str(tmp_path / "logs")})
    assert isinstance(req, PopenRequest)
    before = f"{tmp_path}/bin:{tmp_path}/tools:/home/bob"
    assert req.materialize()["roles"][0]["path"] == [before, str(tmp_path)]
    assert req.role_params["r"][0].env["PATH"] == f"{before}:{tmp_path}"
    assert role.env["PATH"] == f"{specs.macros.img_root}/tools:/home/bob"  # not mutated
    prepended = sched._to_popen_request(app, {"prepend_cwd": True})
    assert prepended.role_params["r"][0].env["PATH"] == f"{tmp_path}:{before}"


def test_join_path_as_torchx() -> None:
    join = local_scheduler._join_PATH
    assert join(None) == join("", None) == ""
    assert join("/usr/local/bin", None) == join(None, "/usr/local/bin") == "/usr/local/bin"
    assert join("/usr/local/bin", ":/usr/bin:/bin:") == "/usr/local/bin:/usr/bin:/bin"
    assert join(":/usr/bin:/bin:", "/usr/local/bin") == "/usr/bin:/bin:/usr/local/bin"


def test_the_lazy_torchx_names_are_those_images_defines() -> None:
    """The scheduler module serves `_images`' names without importing it at start-up."""
    import subprocess
    import sys

    from torchx_core.schedulers.local import _images
    from torchx_core.schedulers.local._torchx_face import TORCHX_NAMES

    assert sorted(TORCHX_NAMES) == sorted(_images.__all__)
    code = (
        "import sys; import torchx_core.schedulers.local_scheduler as m;"
        " assert 'torchx_core.schedulers.local._images' not in sys.modules;"
        " assert m.CWDImageProvider.__name__ == 'CWDImageProvider';"
        " assert set(m.__all__) >= set(m.__dir__()) & {'SignalException'}"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_tmp_log_dirs_to_delete_on_close(tmp_path: Path) -> None:
    """TorchX's ``_tmp_log_dirs`` (what its ``close()`` deletes) is empty: an app without
    ``log_dir`` keeps its logs in its directory under the state root."""
    sched = LocalScheduler("s", image_provider_class=LocalDirectoryImageProvider)
    req = sched.submit_dryrun(specs.AppDef("a", roles=[_role(str(tmp_path))]), {}).request
    assert req.log_dir.startswith(sched.root + os.sep)  # no temporary directory of its own
    assert sched._tmp_log_dirs == []
