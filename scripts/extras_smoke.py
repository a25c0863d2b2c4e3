"""Each extra alone: the built wheel installed with one extra into a fresh venv, then used.

    python scripts/extras_smoke.py                    # build, check metadata, every extra
    python scripts/extras_smoke.py dashboard airflow  # some extras
    python scripts/extras_smoke.py --list             # the extras and what their smoke does
    python scripts/extras_smoke.py --floors docker    # the extra's requirements at their floors

What a user does without our lock: ``uv build`` once (wheel and sdist, their metadata checked),
then per extra ``python -m venv`` and plain ``pip install '<wheel>[<extra>]'`` (pip's own cache
makes reruns fast), then that extra's smoke use run by the venv's interpreter from an empty
folder, so it imports the installed wheel and nothing of this checkout. A dependency an extra
forgot (the locked dev venv hides it) fails here. ``EXTRAS_SMOKE_JOBS`` extras run at once
(default 2); venvs and logs go to ``build/extras-smoke/`` (``$EXTRAS_SMOKE_DIR``).

Run inside a venv as ``extras_smoke.py --use EXTRA``, the script does that extra's smoke use; this
part imports only the standard library and the installed distributions.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("EXTRAS_SMOKE_DIR", REPO / "build" / "extras-smoke"))
UV = os.environ.get("UV", str(REPO / ".tools" / "bin" / "uv"))
STEP_TIMEOUT = 1200


def _app(entrypoint: str = "echo", args: tuple[str, ...] = ("hi",)) -> object:
    from torchx_core import specs

    return specs.AppDef(
        name="smoke",
        roles=[
            specs.Role(
                name="worker",
                image="python:3.11-slim",
                entrypoint=entrypoint,
                args=list(args),
                resource=specs.Resource(cpu=1, gpu=0, memMB=512),
            )
        ],
    )


def _dryrun(scheduler: str, cfg: dict[str, object]) -> str:
    from torchx_core.runner import get_runner

    with get_runner("smoke") as runner:
        info = runner.dryrun(_app(), scheduler, cfg=cfg)  # type: ignore[arg-type]
    return type(info.request).__name__


# -- the smoke use of each extra (run inside its venv) ---------------------------------------


def use_kubernetes() -> str:
    from torchx_core.schedulers.kubernetes._client import kubernetes_client

    client = kubernetes_client()  # import and version check through our loader
    body = client.ApiClient().sanitize_for_serialization(client.V1Pod(metadata={"name": "p"}))
    assert body["metadata"]["name"] == "p", body
    return f"kubernetes client, {_dryrun('kubernetes', {'queue': 'default'})} dry run"


def use_aws() -> str:
    from torchx_core.specs.errors import import_optional

    boto3 = import_optional("boto3", "aws", "the aws_batch scheduler")
    batch = boto3.client("batch", region_name="us-east-1")
    assert batch.meta.service_model.service_name == "batch"
    cfg = {"queue": "q"}
    return f"boto3 {boto3.__version__} batch client, {_dryrun('aws_batch', cfg)} dry run"


def use_docker() -> str:
    # a client on a socket that does not exist must fail to *connect*: docker 7.0 with today's
    # requests cannot even build the request ("Not supported URL scheme http+docker")
    from torchx_core.specs.errors import import_optional

    docker = import_optional("docker", "docker", "the local_docker scheduler")
    sock = Path(tempfile.mkdtemp()) / "absent.sock"
    try:
        docker.DockerClient(base_url=f"unix://{sock}").ping()
    except docker.errors.DockerException as e:
        if "URL scheme" in str(e) or "No such file" not in str(e):
            raise AssertionError(f"docker {docker.__version__}: {e}") from e
    else:
        raise AssertionError(f"ping of {sock} succeeded")
    return f"docker {docker.__version__} client, {_dryrun('local_docker', {})} dry run"


def use_ray() -> str:
    from torchx_core.specs.errors import import_optional

    js = import_optional("ray.job_submission", "ray", "the ray scheduler")
    assert js.JobStatus.SUCCEEDED.value == "SUCCEEDED"
    return f"ray.job_submission, {_dryrun('ray', {})} dry run"


def use_mlflow() -> str:
    from torchx_core.tracker.mlflow import create_tracker

    # mlflow 3.x refuses a file store unless told (a database store needs sqlalchemy, which
    # mlflow-skinny does not install; a tracking server is the documented set-up)
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    store = Path(tempfile.mkdtemp()) / "mlruns"
    tracker = create_tracker(f"file://{store}")
    tracker.add_metadata("local_cwd://smoke/app-1", lr=0.1)
    got = tracker.metadata("local_cwd://smoke/app-1")
    assert got.get("lr") == 0.1, got
    return f"MLflow file store {store}: metadata written and read back"


def use_prefect() -> str:
    import torchx_prefect
    from torchx_prefect import TorchXScheduler, run_app, run_app_sync
    from torchx_prefect.worker import TorchXWorker

    block = TorchXScheduler(scheduler="local_cwd", cfg={"log_dir": tempfile.mkdtemp()})
    assert callable(run_app) and callable(run_app_sync), torchx_prefect
    return f"block {block.scheduler}, worker type {TorchXWorker.type}"


def use_airflow() -> str:
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-home-"))
    from airflow.sdk import DAG

    from torchx_airflow import TorchXOperator, TorchXSensor
    from torchx_airflow.provider import get_provider_info

    info = get_provider_info()
    with DAG("extras_smoke", schedule=None):
        op = TorchXOperator(task_id="t", component="utils.echo", component_args=["--msg", "hi"])
    assert TorchXSensor is not None and op.task_id == "t"
    return f"provider {info['package-name']}, operator in a DAG"


def use_kfp() -> str:
    from kfp import compiler, dsl

    import torchx_kfp

    @dsl.pipeline(name="extras-smoke")
    def pipeline():  # no annotation: kfp reads it at run time (this module defers them)
        torchx_kfp.launch(
            component="utils.echo", component_args=["--msg", "hi"], scheduler="local_cwd"
        )

    out = Path(tempfile.mkdtemp()) / "pipeline.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    assert "torchx-launcher" in out.read_text()
    return "a launcher pipeline compiled"


def use_kfp_kubernetes() -> str:
    from kfp import compiler, dsl

    from torchx_kfp import ContainerOptions, container_from_app

    @dsl.pipeline(name="extras-smoke-k8s")
    def pipeline():  # no annotation: kfp reads it at run time (this module defers them)
        container_from_app(_app(), options=ContainerOptions(shm_size="1Gi"))

    out = Path(tempfile.mkdtemp()) / "k8s.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    assert "platforms" in out.read_text()
    return f"{use_kfp()}; a container step with kubernetes settings compiled"


def _get(url: str, data: bytes | None = None, origin: str | None = None) -> str:
    req = urllib.request.Request(url, data=data)
    if origin:
        req.add_header("Origin", origin)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(resp.read().decode())


def use_dashboard() -> str:
    """Start ``torchx dashboard``, cancel a running app through the confirm page's form POST."""
    from torchx_core import specs
    from torchx_core.runner import get_runner

    os.environ["TORCHX_LOCAL_ROOT"] = tempfile.mkdtemp(prefix="torchx-local-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    torchx = Path(sys.executable).parent / "torchx"
    server = subprocess.Popen(
        [str(torchx), "dashboard", "-s", "local_cwd", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with get_runner("smoke") as runner:
        app = specs.AppDef(
            "sleeper", roles=[specs.Role(name="w", image="/tmp", entrypoint="sleep", args=["120"])]
        )
        handle = runner.run(app, "local_cwd")
        try:
            _wait_up(base, server)
            q = urllib.parse.quote(handle, safe="")
            page = _get(f"{base}/app/confirm?action=cancel&handle={q}")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf, page
            form = {"csrf": csrf.group(1), "action": "cancel", "handle": handle}
            _get(f"{base}/app/action", urllib.parse.urlencode(form).encode(), origin=base)
            state = runner.status(handle)
            assert state is not None and state.state == specs.AppState.CANCELLED, state
        finally:
            runner.cancel(handle)
            server.terminate()
            server.wait(timeout=30)
    return f"dashboard on {base}: {handle} cancelled through the form POST"


def _wait_up(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            _get(base + "/")
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                err = server.stderr.read().decode() if server.stderr else ""
                raise AssertionError(f"the dashboard did not start: {err}") from None
            time.sleep(0.2)


USES: dict[str, Callable[[], str]] = {
    "kubernetes": use_kubernetes,
    "aws": use_aws,
    "docker": use_docker,
    "ray": use_ray,
    "mlflow": use_mlflow,
    "prefect": use_prefect,
    "airflow": use_airflow,
    "kfp": use_kfp,
    "kfp-kubernetes": use_kfp_kubernetes,
    "dashboard": use_dashboard,
}


# -- the driver (run by the project's interpreter) --------------------------------------------


class SmokeFailed(Exception):
    """A step failed; the message names it and the log holds the output."""


def run(args: list[str], log: Path, cwd: Path | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(args)}\n")
        out.flush()
        try:
            proc = subprocess.run(
                args, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                timeout=STEP_TIMEOUT, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise SmokeFailed(f"timed out after {STEP_TIMEOUT}s: {' '.join(args[:4])}") from None
    if proc.returncode != 0:
        raise SmokeFailed(f"exit {proc.returncode}: {' '.join(args[:6])} (log: {log})")


def build(log: Path) -> tuple[Path, Path]:
    """``uv build`` of this checkout into a fresh folder: (wheel, sdist), metadata checked."""
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    run([UV, "build", "--out-dir", str(dist), str(REPO)], log)
    wheel = next(dist.glob("torchx_suite-*.whl"))
    sdist = next(dist.glob("torchx_suite-*.tar.gz"))
    problems = check_metadata(wheel) + check_sdist(sdist, wheel)
    if problems:
        raise SmokeFailed(f"{wheel.name} / {sdist.name} metadata: " + "; ".join(problems))
    return wheel, sdist


def check_sdist(sdist: Path, wheel: Path) -> list[str]:
    """The sdist's PKG-INFO names the wheel's distribution and version, and it holds the README."""
    import tarfile

    with tarfile.open(sdist) as tf:
        names = tf.getnames()
        info = next((n for n in names if n.count("/") == 1 and n.endswith("/PKG-INFO")), None)
        if info is None:
            return [f"{sdist.name} has no PKG-INFO"]
        extracted = tf.extractfile(info)
        meta = Parser().parsestr(extracted.read().decode() if extracted else "")
    name, version = wheel.name.split("-")[:2]
    problems = []
    if (meta.get("Name", "").replace("-", "_"), meta.get("Version")) != (name, version):
        problems.append(f"sdist: {meta.get('Name')} {meta.get('Version')}; wheel: {name} {version}")
    if not any(n.endswith("/README.md") for n in names):
        problems.append("sdist lacks README.md")
    return problems


def check_metadata(wheel: Path) -> list[str]:
    """What is wrong with the wheel's METADATA (the fields an index and pip rely on)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(name).decode())
    problems = [
        f"{field} missing"
        for field in ("Metadata-Version", "Name", "Version", "Summary", "Requires-Python")
        if not meta.get(field)
    ]
    if meta.get("Description-Content-Type") != "text/markdown":
        problems.append(f"Description-Content-Type is {meta.get('Description-Content-Type')!r}")
    if len(meta.get_payload() or "") < 200:
        problems.append("the long description (README) is missing")
    extras = set(meta.get_all("Provides-Extra") or [])
    missing = sorted(set(USES) - extras)
    if missing:
        problems.append(f"extras {missing} not declared (declared: {sorted(extras)})")
    return problems


def floor_pins(wheel: Path, extra: str) -> list[str]:
    """``name==lower bound`` for each requirement of ``extra`` that declares one (``>=``)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(name).decode())
    pins = []
    for req in meta.get_all("Requires-Dist") or []:
        m = re.match(r"([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*\(?([^;)]*)\)?\s*;(.*)", req)
        if m and re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", m.group(4)):
            low = re.search(r">=\s*([0-9][^,\s]*)", m.group(3))
            if low:
                pins.append(f"{m.group(1)}{m.group(2) or ''}=={low.group(1)}")
    return pins


def smoke(extra: str, wheel: Path, floors: bool = False) -> float:
    """Fresh venv, ``pip install '<wheel>[extra]'`` (with ``floors``: each of the extra's
    requirements pinned to its declared lower bound), the smoke use; returns the seconds taken."""
    start = time.monotonic()
    name = f"{extra}-floor" if floors else extra
    venv, log = WORK / "venvs" / name, WORK / "logs" / f"{name}.log"
    log.write_text("")
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)], log)
    py = str(venv / "bin" / "python")
    # no byte-compiling of every installed module (most of the time of ray's and airflow's
    # installs); the smoke use compiles what it imports
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", "-q"]
    run([*pip, f"{wheel}[{extra}]", *(floor_pins(wheel, extra) if floors else [])], log)
    empty = Path(tempfile.mkdtemp(prefix=f"extras-smoke-{extra}-"))
    try:
        run([py, str(Path(__file__).resolve()), "--use", extra], log, cwd=empty)
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    return time.monotonic() - start


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("extras", nargs="*", help=f"default: all ({', '.join(USES)})")
    p.add_argument("--use", help="run EXTRA's smoke use in this interpreter")
    p.add_argument("--list", action="store_true", help="list the extras and their smoke use")
    p.add_argument(
        "--floors",
        action="store_true",
        help="pin each requirement of the extra to its declared lower bound (checks the floors)",
    )
    args = p.parse_args(argv)
    if args.use:
        print(f"{args.use}: {USES[args.use]()}")
        return 0
    if args.list:
        for name, fn in USES.items():
            print(f"{name}: {(fn.__doc__ or fn.__name__).strip()}")
        return 0
    unknown = sorted(set(args.extras) - set(USES))
    if unknown:
        p.error(f"unknown extras {unknown}; valid: {', '.join(USES)}")
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        wheel, sdist = build(WORK / "logs" / "build.log")
    except SmokeFailed as e:
        print(f"extras smoke: build FAILED: {e}")
        return 1
    print(f"built {wheel.name} and {sdist.name} ({time.monotonic() - start:.0f}s, metadata OK)")
    failed = 0
    jobs = int(os.environ.get("EXTRAS_SMOKE_JOBS", "2"))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {
            pool.submit(smoke, e, wheel, args.floors): e for e in (args.extras or list(USES))
        }
        for fut in concurrent.futures.as_completed(futures):
            try:
                print(f"extra {futures[fut]}: OK ({fut.result():.0f}s)", flush=True)
            except SmokeFailed as e:
                failed += 1
                print(f"extra {futures[fut]}: FAILED: {e}", flush=True)
    took = time.monotonic() - start
    print(f"extras smoke: {len(futures) - failed} of {len(futures)} extras OK in {took:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
