"""The launcher image (docker/kfp-launcher/Dockerfile), built offline, runs a real launcher step.

Set-up (`scripts/services/kfp-image/install.sh`, run by `make services-install`) prepares a
Debian bookworm root filesystem made with debootstrap and every locked dependency of
``torchx-suite[kfp]`` as a wheel. This module, without any network, imports the rootfs into the
local Docker engine, builds the image with ``make kfp-launcher-image`` (extras ``kfp,aws``) from
our wheel (built from the working tree) and those wheels only (``pip --no-index``), then runs
pipelines whose launcher step executes inside the image with ``kfp.local.DockerRunner`` and
launches a real app: on the local scheduler inside the container (container network ``none``),
and on ``aws_batch`` against the moto server (host network, loopback only) with an int run
option. Image names are unique per session and removed at its end.
The ``slurm`` target (built with the slurm-client debs prepared at set-up) runs a step that
submits a real app to the test Slurm cluster: host network, ``slurm.conf`` and the host
munged's socket mounted (the README's "munged sidecar" recipe), the job dir inside the pipeline
root (bind-mounted at the same path by kfp.local), so the launcher reads the job's logs.
Cost: ~1-2 min per session on 2 cores (import ~15 s, build ~40-80 s), each step ~5-10 s.
"""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl
from kfp_helpers import AWS_TEST_ENV, batch_app

from torchx_core import specs
from torchx_kfp import launch

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
PREPARED = Path(
    os.environ.get(
        "KFP_IMAGE_DIR",
        os.path.join(os.environ.get("CI_STATE_DIR", "/var/lib/torchx-ci"), "kfp-image"),
    )
)
DOCKER = os.environ.get("DOCKER", "docker")


def _docker(*args: str, timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload]
    assert proc.returncode == 0, (
        f"docker {' '.join(args[:2])} failed:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


@pytest.fixture(scope="session")
def launcher_image(docker_engine: Any) -> Iterator[str]:
    """The launcher image, built offline from the prepared rootfs and wheels (removed after)."""
    rootfs, wheels = PREPARED / "rootfs.tar", PREPARED / "wheels"
    if not rootfs.is_file() or not (wheels / ".complete").is_file():
        pytest.fail(
            f"the launcher-image test needs {rootfs} and {wheels}/ prepared at set-up time: run"
            " `bash scripts/services/kfp-image/install.sh` (it downloads from Debian's mirror"
            " and PyPI; the test itself never does)"
        )
    tag = uuid.uuid4().hex[:10]
    base, image = f"torchx-kfp-test-base:{tag}", f"torchx-kfp-test-launcher:{tag}"
    try:
        # the README's `make kfp-launcher-image`: offline by default once prepared (build.sh
        # imports the base from rootfs.tar, installs from the wheels alone, builds ours offline)
        env = {**os.environ, "KFP_IMAGE_DIR": str(PREPARED), "BASE_IMAGE": base, "DOCKER": DOCKER}
        for knob in ("EXTRA_WHEELS", "EXTRA_DEBS", "PIP_OPTIONS", "UV_OFFLINE", "OFFLINE"):
            env.pop(knob, None)
        build = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(REPO),
                "kfp-launcher-image",
                f"KFP_LAUNCHER_IMAGE={image}",
                "KFP_LAUNCHER_EXTRAS=kfp,aws",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert build.returncode == 0, f"image build failed:\n{build.stdout[-6000:]}\n{build.stderr}"
        assert f"built {image} (from {base}, offline)" in build.stdout, build.stdout[-2000:]
        yield image
    finally:
        subprocess.run(
            [DOCKER, "rmi", "-f", image, base], capture_output=True, check=False, timeout=300
        )


@pytest.fixture(scope="session")
def slurm_launcher_image(launcher_image: str) -> Iterator[str]:
    """The ``slurm`` target, built offline on top of the launcher image's layers."""
    debs = PREPARED / "slurm-debs"
    if not (debs / ".complete").is_file():
        pytest.fail(f"{debs}/ is not prepared: run `bash scripts/services/kfp-image/install.sh`")
    image = launcher_image.replace("torchx-kfp-test-launcher:", "torchx-kfp-test-slurm:")
    base = launcher_image.replace("torchx-kfp-test-launcher:", "torchx-kfp-test-base:")
    env = {**os.environ, "KFP_IMAGE_DIR": str(PREPARED), "BASE_IMAGE": base, "DOCKER": DOCKER}
    try:
        build = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(REPO),
                "kfp-launcher-image",
                f"KFP_LAUNCHER_IMAGE={image}",
                "KFP_LAUNCHER_EXTRAS=kfp,aws",
                "KFP_LAUNCHER_TARGET=slurm",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert build.returncode == 0, (
            f"slurm image build failed:\n{build.stdout[-6000:]}\n{build.stderr}"
        )
        yield image
    finally:
        subprocess.run([DOCKER, "rmi", "-f", image], capture_output=True, check=False, timeout=300)


@pytest.fixture
def slurm_conf() -> Iterator[str]:
    """The test Slurm cluster's slurm.conf (started by our script if it is down, then stopped)."""
    run_dir = Path(os.environ.get("CI_RUN_DIR", "/run/torchx-ci")) / "slurm"
    pidfile = run_dir / "slurmctld.pid"
    was_running = pidfile.is_file() and Path(f"/proc/{pidfile.read_text().strip()}").exists()
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/services/slurm/start.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (
        f"the Slurm test cluster did not start:\n{proc.stdout}\n{proc.stderr}"
    )
    conf = next(
        line.split("=", 1)[1] for line in proc.stdout.splitlines() if line.startswith("SLURM_CONF=")
    )
    yield conf
    if not was_running:
        subprocess.run(
            ["bash", str(REPO / "scripts/services/slurm/stop.sh")],
            capture_output=True,
            timeout=300,
            check=False,
        )


@pytest.fixture
def kfp_docker(launcher_image: str, tmp_path: Path) -> Iterator[Path]:
    """kfp.local with the DockerRunner: each step is a container of the launcher image."""
    import kfp.local

    root = tmp_path / "pipeline-root"
    root.mkdir()
    root.chmod(0o777)  # the step runs as the image's non-root user
    kfp.local.init(runner=kfp.local.DockerRunner(network_mode="none"), pipeline_root=str(root))
    yield root


REPLICA = (
    "import sys, torchx_kfp; print('replica', sys.argv[1], 'python', sys.executable,"
    " 'torchx_kfp', torchx_kfp.__file__, flush=True); sys.exit(int(sys.argv[2]))"
)


def _app(name: str, replicas: int, exit_code: int = 0) -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                "worker",
                image="/tmp",
                entrypoint="python3",
                args=["-c", REPLICA, specs.macros.replica_id, str(exit_code)],
                num_replicas=replicas,
            )
        ],
    )


def test_image_holds_kfp_and_torchx_suite_in_its_venv(launcher_image: str) -> None:
    probe = (
        "import sys, kfp, torchx_kfp; print(sys.version_info[:2], kfp.__version__,"
        " torchx_kfp.__file__)"
    )
    out = _docker(
        "run", "--rm", "--network", "none", launcher_image, "python3", "-c", probe, timeout=300
    ).stdout
    assert "(3, 11)" in out  # Debian bookworm's python3
    assert "2.16" in out
    assert "/opt/torchx/lib/python3.11/site-packages/torchx_kfp/__init__.py" in out


def test_image_runs_as_non_root_without_pip_and_without_a_wheel_layer(launcher_image: str) -> None:
    out = _docker(
        "run",
        "--rm",
        "--network",
        "none",
        launcher_image,
        "sh",
        "-c",
        "id -u; id -un; /opt/torchx/bin/python3 -m pip --version 2>&1 || true",
        timeout=300,
    ).stdout.split("\n", 2)
    assert out[:2] == ["1000", "torchx"]
    assert "No module named pip" in out[2]
    # the wheels were only in the builder stage: no layer of the image holds them
    history = _docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", launcher_image).stdout
    assert "torchx-wheels" not in history, history


def test_slurm_target_checks_every_tool(tmp_path: Path) -> None:
    """The slurm target's tool check (run as in the Dockerfile) fails on any missing tool,
    not only the first one."""
    text = (REPO / "docker/kfp-launcher/Dockerfile").read_text()
    loop = re.search(r"for tool in [^;]+; do .*?done", text.replace("\\\n", " "), re.DOTALL)
    assert loop, "no tool check loop in the slurm target"
    tools = loop.group(0).split(" in ", 1)[1].split(";", 1)[0].split()
    assert {"sbatch", "squeue", "scancel", "sacct"} <= set(tools)
    for missing in tools:
        bin_dir = tmp_path / missing
        bin_dir.mkdir()
        for tool in tools:
            if tool != missing:
                (bin_dir / tool).write_text("#!/bin/sh\n")
                (bin_dir / tool).chmod(0o755)
        proc = subprocess.run(
            ["/bin/sh", "-ec", loop.group(0)],
            env={"PATH": str(bin_dir)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode != 0 and f"{missing} is missing" in proc.stderr, (missing, proc)


def test_launcher_step_runs_in_the_image_and_launches_a_real_app(
    kfp_docker: Path, launcher_image: str, capfd: pytest.CaptureFixture[str]
) -> None:
    app = _app("kfpimage", replicas=2)

    @dsl.pipeline(name="kfp-in-image")
    def pipeline() -> str:
        step = launch(app, scheduler="local_cwd", base_image=launcher_image, wait_interval=0.2)
        return step.outputs["status_json"]

    status = json.loads(pipeline().output)
    assert status["state"] == "SUCCEEDED"
    assert [r["role"] for r in status["roles"]] == ["worker"]
    out = capfd.readouterr().out
    assert f"Found image '{launcher_image}'" in out  # kfp.local used the local image, no pull
    venv_python = "python /opt/torchx/bin/python3"
    image_pkg = "torchx_kfp /opt/torchx/lib/python3.11/site-packages/torchx_kfp/__init__.py"
    for k in (0, 1):  # both replicas ran inside the image; their logs reached the step log
        assert f"[worker/{k}] replica {k} {venv_python} {image_pkg}" in out


def test_failed_app_fails_the_step_in_the_image(
    kfp_docker: Path, launcher_image: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The launcher in the image raises AppFailedError (so its container exits non-zero).

    kfp.local's verdict on that exit races with Docker: ``DockerRunner`` runs the step with
    ``auto_remove=True`` and reads the exit code after streaming the logs; when the container
    is already removed it reports SUCCESS (kfp 2.16 ``local/docker_task_handler.py``
    ``run_docker_container``: ``NotFound`` -> 0; about 1 run in 8 here, for any failing step).
    The launcher's failure is therefore asserted from the step log, and kfp.local's FAILURE
    whenever kfp.local saw the exit code.
    """
    app = _app("kfpimagefail", replicas=1, exit_code=7)

    @dsl.pipeline(name="kfp-in-image-fail")
    def pipeline() -> None:
        launch(app, scheduler="local_cwd", base_image=launcher_image, wait_interval=0.2)

    verdict = "SUCCESS (kfp.local lost the exit code)"
    try:
        pipeline()
    except RuntimeError as e:
        assert re.search(r"finished with status \S*FAILURE", str(e)), e
        verdict = "FAILURE"
    out = capfd.readouterr().out
    assert "[worker/0] replica 0" in out, verdict
    assert re.search(r"AppFailedError: app local_cwd://\S+/kfpimagefail-\S+ ended FAILED", out)
    assert '"exit_code": 7' in out


def test_docker_runner_runs_the_step_as_the_pipeline_roots_owner(
    launcher_image: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 14: the README's DockerRunner route on a pipeline root the image's user
    (uid 1000) cannot write, here another user's private directory (uid 4321, mode 0700): the
    plain DockerRunner step dies of PermissionError; ``torchx_kfp.docker_runner`` runs it as
    the directory's owner, and the app runs."""
    import kfp.local

    from torchx_kfp import docker_runner

    def private_root(name: str) -> Path:
        root = tmp_path / name
        root.mkdir(mode=0o700)
        os.chown(root, 4321, 4321)
        return root

    app = _app("kfpowner", replicas=1)

    @dsl.pipeline(name="kfp-root-owner")
    def pipeline() -> str:
        step = launch(app, scheduler="local_cwd", base_image=launcher_image, wait_interval=0.2)
        return step.outputs["status_json"]

    root = private_root("plain")
    kfp.local.init(runner=kfp.local.DockerRunner(network_mode="none"), pipeline_root=str(root))
    # kfp.local may lose a failed step's exit code (see the test above); it then reports the
    # step SUCCESS and fails reading the output the step never wrote: read the log.
    with pytest.raises((RuntimeError, ValueError)) as failed:
        pipeline()
    assert re.search(
        r"finished with status \S*FAILURE|output 'status_json' from task .* not found",
        str(failed.value),
    ), failed.value
    assert "PermissionError" in capfd.readouterr().out
    root = private_root("owned")
    kfp.local.init(runner=docker_runner(root, network_mode="none"), pipeline_root=str(root))
    status = json.loads(pipeline().output)
    assert status["state"] == "SUCCEEDED"
    assert "[worker/0] replica 0" in capfd.readouterr().out
    written = {p.stat().st_uid for p in root.rglob("*") if p.is_file()}
    assert written == {4321}, written  # the step's outputs, written as the root's owner


@pytest.mark.aws
def test_launcher_step_in_the_image_submits_to_aws_batch_with_an_int_option(
    launcher_image: str,
    moto_batch_queue: tuple[str, Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The pod recipe for aws_batch: credentials and endpoint in the step's environment."""
    import kfp.local

    queue, batch = moto_batch_queue
    (tmp_path / "pipeline-root").mkdir(mode=0o777)
    (tmp_path / "pipeline-root").chmod(0o777)  # the step runs as the image's non-root user
    kfp.local.init(
        runner=kfp.local.DockerRunner(network_mode="host", environment=AWS_TEST_ENV),
        pipeline_root=str(tmp_path / "pipeline-root"),
    )
    app = batch_app("kfpimagebatch", "batch in image says hi")

    @dsl.pipeline(name="kfp-in-image-batch")
    def pipeline() -> str:
        step = launch(
            app,
            scheduler="aws_batch",
            cfg={"queue": queue, "priority": 5},
            base_image=launcher_image,
            wait_interval=0.5,
        )
        return step.outputs["state"]

    assert pipeline().output == "SUCCEEDED"
    jobs = batch.list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
    assert [j["jobName"][:14] for j in jobs] == ["kfpimagebatch-"]
    assert "batch in image says hi" in capfd.readouterr().out


@pytest.mark.slurm
def test_launcher_step_in_the_slurm_image_runs_an_app_on_the_slurm_cluster(
    slurm_launcher_image: str,
    slurm_conf: str,
    request: pytest.FixtureRequest,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import kfp.local

    import docker

    # the step, and so the Slurm job, runs as the image's user (uid 1000, a user of the test
    # cluster's host): the job dir must be reachable by it, so not under the 0700 tmp_path
    root = Path(tempfile.mkdtemp(prefix="torchx-kfp-slurm-"))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    job_dir = root / "slurm-job"  # kfp.local mounts the pipeline root at the same path
    job_dir.mkdir(parents=True)
    for d in (root, job_dir):
        d.chmod(0o777)
    mounts = [
        docker.types.Mount("/etc/slurm/slurm.conf", slurm_conf, type="bind", read_only=True),
        docker.types.Mount("/run/munge", "/run/munge", type="bind"),
    ]
    kfp.local.init(
        runner=kfp.local.DockerRunner(network_mode="host", mounts=mounts), pipeline_root=str(root)
    )
    app = specs.AppDef(
        name="kfpslurm",
        roles=[
            specs.Role(
                "worker",
                image=str(job_dir),
                entrypoint="sh",
                args=["-c", "echo slurm replica $SLURM_PROCID of $SLURM_NTASKS says hi"],
                num_replicas=2,
                resource=specs.Resource(cpu=1, gpu=0, memMB=100),
            )
        ],
    )

    @dsl.pipeline(name="kfp-in-slurm-image")
    def pipeline() -> str:
        step = launch(
            app,
            scheduler="slurm",
            cfg={"job_dir": str(job_dir)},
            base_image=slurm_launcher_image,
            wait_interval=0.5,
        )
        return step.outputs["app_handle"]

    handle = pipeline().output
    assert handle.startswith("slurm://")
    out = capfd.readouterr().out
    for k in (0, 1):  # the job ran on the cluster; the launcher in the image read its logs
        assert f"[worker/{k}] slurm replica {k} of 2 says hi" in out, out[-3000:]
