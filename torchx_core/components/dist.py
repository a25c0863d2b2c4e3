"""Distributed components: ``dist.ddp`` and ``dist.spmd`` (PyTorch, launched by ``torchrun``).

Each replica (node) runs ``torchrun``, which starts ``nproc_per_node`` worker processes and
forms the process group with the other nodes through the ``c10d`` rendezvous hosted at the
rank-0 node (``$TORCHX_RANK0_HOST``, set by the scheduler). On the local scheduler the nodes are
processes on this machine.

``torchrun``, as TorchX runs it, not ``python -m torch.distributed.run``: the two are not
equivalent everywhere TorchX's command works. ``torchrun``'s shebang names the interpreter that
has torch installed, whereas ``python`` is whatever comes first on ``PATH`` (absent in images
that only ship ``python3``, or another interpreter than torch's in a conda/venv layout).

>>> from torchx_core.components.dist import ddp
>>> app = ddp(script="train.py", j="2x2")
>>> app.roles[0].num_replicas, app.roles[0].entrypoint
(2, 'bash')
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from torchx_core import specs
from torchx_core.components import IMAGE
from torchx_core.components.structured_arg import StructuredNameArgument
from torchx_core.specs import macros
from torchx_core.specs.errors import ComponentArgumentError
from torchx_core.specs.limits import too_many_replicas

_J_RE = re.compile(r"^(?:(?:(?P<min>\d+):)?(?P<max>\d+)x)?(?P<nproc>\d+)$")

# env presets for ``debug=True``
_TORCH_DEBUG_FLAGS = {
    "CUDA_LAUNCH_BLOCKING": "1",
    "NCCL_DESYNC_DEBUG": "1",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
}


class _Raw(str):
    """A command-line word that must not be shell-quoted (it holds a ``$VAR`` expansion)."""


def parse_nnodes(j: str) -> tuple[int, int, int, str]:
    """Parses ``[[min_nnodes:]nnodes x]nproc_per_node`` into (min, max, nproc, nnodes string).

    >>> parse_nnodes("2x4")
    (2, 2, 4, '2')
    >>> parse_nnodes("1:3x2")
    (1, 3, 2, '1:3')
    >>> parse_nnodes("4")
    (1, 1, 4, '1')

    Raises:
        ComponentArgumentError: ``j`` is not of that form.
    """
    m = _J_RE.match(j.strip()) if isinstance(j, str) else None
    if m is None:
        raise ComponentArgumentError(
            f"invalid -j {j!r}: use `[[MIN_NNODES:]NNODES x]NPROC_PER_NODE`, e.g. 2x4, 1:2x4 or 4"
        )
    nproc = int(m["nproc"])
    max_nodes = int(m["max"]) if m["max"] else 1
    min_nodes = int(m["min"]) if m["min"] else max_nodes
    if nproc < 1 or max_nodes < 1 or min_nodes > max_nodes:
        raise ComponentArgumentError(
            f"invalid -j {j!r}: need NPROC_PER_NODE >= 1, NNODES >= 1 and MIN_NNODES <= NNODES"
        )
    too_many = too_many_replicas(max_nodes, f"-j {j!r}")
    if too_many:
        raise ComponentArgumentError(too_many)
    rep = f"{min_nodes}:{max_nodes}" if m["min"] else str(max_nodes)
    return min_nodes, max_nodes, nproc, rep


def get_role_name(script: str | None, m: str | None) -> str:
    """The role name: the script's stem or the module's last part."""
    if script:
        return Path(script).stem
    if m:
        return m.rpartition(".")[2]
    raise ComponentArgumentError("one of --script and -m is required")


def _names(name: str, script: str | None, m: str | None) -> tuple[str, str]:
    """(experiment, run) from ``{experiment}/{run}``, ``{experiment}/``, ``/{run}``, ``{run}``.

    As in TorchX, the run name defaults to the script or module name and the experiment name to
    ``default-experiment``.
    """
    get_role_name(script, m)  # exactly one of script and m, or a ComponentArgumentError
    parsed = StructuredNameArgument.parse_from(name=name, m=m, script=script)
    return parsed.experiment_name, parsed.run_name


def _join(words: list[str]) -> str:
    return " ".join(w if isinstance(w, _Raw) else shlex.quote(w) for w in words)


def ddp(
    *script_args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = IMAGE,
    name: str = "/",
    h: str | None = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: str | None = None,
    mounts: list[str] | None = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """Distributed data parallel app: one role of ``nnodes`` replicas each running ``torchrun``.

    ``torchrun`` starts ``nproc_per_node`` workers per node; nodes rendezvous with the ``c10d``
    backend at ``$rank0_host:rdzv_port`` (single-node jobs use a random free port instead).
    ``h`` (a named resource) takes precedence over ``cpu``, ``gpu`` and ``memMB``.

    Args:
        script_args: arguments to the script or module
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name as ``{experimentname}/{runname}``, ``{experimentname}/``, ``/{runname}``
            or ``{runname}``; the run name defaults to the script or module name
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}; on gpu hosts nproc_per_node must not exceed
            the gpus
        env: environment variables for the job (e.g. ENV1=v1,ENV2=v2)
        metadata: metadata for the scheduler, set on the AppDef (e.g. KEY1=v1,KEY2=v2)
        max_retries: the number of scheduler retries allowed
        rdzv_port: port on the rank-0 host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend (multi-node only)
        rdzv_conf: more rendezvous configuration
            (e.g. join_timeout=600,close_timeout=600,timeout=600)
        mounts: mounts for the workers (e.g. type=bind,src=/host,dst=/job[,readonly])
        debug: set the torch distributed debug environment variables
        tee: tee these streams to console and file: 0 none, 1 stdout, 2 stderr, 3 both
    """
    if (script is None) == (m is None):
        raise ComponentArgumentError("dist.ddp needs exactly one of --script and -m")
    min_nodes, max_nodes, nproc, nnodes_rep = parse_nnodes(j)
    if max_nodes == 1:
        rdzv_endpoint: str = "localhost:0"
    else:
        # `$$` escapes the macro substitution; the scheduler sets the rank0 env var's value
        rdzv_endpoint = _Raw(f"$${{{macros.rank0_env}:=localhost}}:{rdzv_port}")
    experiment, run_name = _names(name, script, m)
    job_env = dict(env or {})
    job_env["TORCHX_TRACKING_EXPERIMENT_NAME"] = experiment
    job_env["TORCHX_TRACKING_RUN_NAME"] = run_name
    job_env.setdefault("LOGLEVEL", os.environ.get("LOGLEVEL", "WARNING"))
    if debug:
        job_env.update(_TORCH_DEBUG_FLAGS)
    cmd: list[str] = [
        "torchrun",
        "--rdzv_backend",
        rdzv_backend,
        *(["--rdzv_conf", rdzv_conf] if rdzv_conf is not None else []),
        "--rdzv_endpoint",
        rdzv_endpoint,
        "--rdzv_id",
        macros.app_id,
        "--nnodes",
        nnodes_rep,
        "--nproc_per_node",
        str(nproc),
        "--tee",
        str(tee),
        "--role",
        "",
    ]
    if rdzv_backend == "static":
        cmd += ["--node_rank", macros.replica_id]
    cmd += [script] if script is not None else ["-m", str(m)]
    cmd += list(script_args)
    return specs.AppDef(
        name=run_name,
        roles=[
            specs.Role(
                name=get_role_name(script, m),
                image=image,
                min_replicas=min_nodes,
                entrypoint="bash",
                num_replicas=max_nodes,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                args=["-c", _join(cmd)],
                env=job_env,
                port_map={"c10d": rdzv_port},
                max_retries=max_retries,
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
        metadata=dict(metadata or {}),
    )


def spmd(
    *args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = IMAGE,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
    debug: bool = False,
) -> specs.AppDef:
    """Single program, multiple data: ``torchrun`` with one worker per GPU of the named resource.

    ``j`` is ``{nnodes}x{nproc_per_node}`` or just ``{nnodes}``, in which case ``nproc_per_node``
    is the number of GPUs of ``h`` (at least 1).

    Args:
        args: arguments to the script or module
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name as ``{experimentname}/{runname}`` (see dist.ddp)
        h: the named resource of each node
        j: {nnodes}x{nproc_per_node} or {nnodes}
        env: environment variables for the job (e.g. ENV1=v1,ENV2=v2)
        metadata: metadata for the scheduler, set on the AppDef (e.g. KEY1=v1,KEY2=v2)
        max_retries: the number of scheduler retries allowed
        mounts: mounts for the workers (e.g. type=bind,src=/host,dst=/job[,readonly])
        debug: set the torch distributed debug environment variables
    """
    if "x" not in j:
        if not j.isdigit():
            raise ComponentArgumentError(
                f"invalid -j {j!r}: use {{nnodes}}x{{nproc_per_node}} or {{nnodes}}"
            )
        gpus = specs.resource(h=h).gpu
        j = f"{j}x{max(gpus, 1)}"
    return ddp(
        *args,
        script=script,
        m=m,
        image=image,
        name=name,
        h=h,
        j=j,
        env=env,
        metadata=metadata,
        max_retries=max_retries,
        mounts=mounts,
        debug=debug,
    )
