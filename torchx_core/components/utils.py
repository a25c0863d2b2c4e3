"""Utility components: echo, sh, python, binary, touch, copy, booth, hydra."""

from __future__ import annotations

import os
import shlex
from typing import Annotated

from torchx_core import specs
from torchx_core.components import IMAGE
from torchx_core.specs.errors import ComponentArgumentError


def _run_app_module(name: str) -> list[str]:
    """``python`` arguments that run the app ``name`` of ``torchx.apps.utils``, in any image.

    The default image (TorchX's ``ghcr.io/pytorch/torchx``) holds TorchX, whose
    ``torchx.apps.utils.<name>`` takes the same arguments as ours; an image (or a ``local_cwd``
    environment) with torchx-suite runs ``torchx_core.apps.utils.<name>``. The choice is made where
    the job runs: the first of the two that is installed.

    >>> _run_app_module("copy_main")[0]
    '-c'
    """
    ours, theirs = f"torchx_core.apps.utils.{name}", f"torchx.apps.utils.{name}"
    code = (
        "import importlib.util as u, runpy; runpy.run_module("
        f"{ours!r} if u.find_spec('torchx_core') else {theirs!r},"
        " run_name='__main__', alter_sys=True)"
    )
    return ["-c", code]


def echo(msg: str = "hello world", image: str = IMAGE, num_replicas: int = 1) -> specs.AppDef:
    """Echos a message to stdout (calls echo)

    Args:
        msg: message to echo
        image: image to use
        num_replicas: number of replicas to run
    """
    return specs.AppDef(
        name="echo",
        roles=[
            specs.Role(
                name="echo",
                image=image,
                entrypoint="echo",
                args=[msg],
                num_replicas=num_replicas,
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )


def touch(file: str, image: str = IMAGE) -> specs.AppDef:
    """Creates a file (runs ``touch``).

    Args:
        file: the file to create
        image: the image to use
    """
    return specs.AppDef(
        name="touch",
        roles=[
            specs.Role(
                name="touch",
                image=image,
                entrypoint="touch",
                args=[file],
                num_replicas=1,
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )


def sh(
    *args: str,
    image: str = IMAGE,
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
) -> specs.AppDef:
    """Runs a command with ``sh -c`` (the arguments are joined and shell-quoted).

    ``LOGLEVEL`` is set to the launcher's ``$LOGLEVEL`` (``WARNING`` if unset) unless ``env``
    sets it.

    Args:
        args: the command and its arguments
        image: image to use
        num_replicas: number of replicas to run
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if given, takes precedence over cpu, gpu, memMB)
        env: environment variables for the command (e.g. ENV1=v1,ENV2=v2)
        max_retries: the number of scheduler retries allowed
        mounts: mounts for the replicas (e.g. type=bind,src=/host,dst=/job[,readonly])
    """
    if not args:
        raise ComponentArgumentError("utils.sh needs a command, e.g. `utils.sh echo hi`")
    env = dict(env or {})
    # as in TorchX: the launcher's $LOGLEVEL, else WARNING, unless env sets it
    env.setdefault("LOGLEVEL", os.environ.get("LOGLEVEL", "WARNING"))
    return specs.AppDef(
        name="sh",
        roles=[
            specs.Role(
                name="sh",
                image=image,
                entrypoint="sh",
                args=["-c", " ".join(shlex.quote(a) for a in args)],
                num_replicas=num_replicas,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                env=env,
                max_retries=max_retries,
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def python(
    *args: str,
    m: str | None = None,
    c: str | None = None,
    script: str | None = None,
    image: str = IMAGE,
    name: str = "torchx_utils_python",
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
    num_replicas: int = 1,
    mounts: list[str] | None = None,
) -> specs.AppDef:
    """Runs ``python`` with a module (``-m``), a command (``-c``) or a script (``--script``).

    Separate the program's own arguments with ``--``, e.g.
    ``torchx run utils.python -m foo.main -- --lr 0.1``.

    Args:
        args: arguments passed to the program (``sys.argv[1:]``)
        m: run library module as a script
        c: program passed as a string
        script: .py script to run
        image: image to run on
        name: name of the job
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if given, takes precedence over cpu, gpu, memMB)
        num_replicas: number of copies to run
        mounts: mounts for the replicas (e.g. type=bind,src=/host,dst=/job[,readonly])
    """
    given = [flag for flag, v in (("-m", m), ("-c", c), ("--script", script)) if v is not None]
    if len(given) != 1:
        raise ComponentArgumentError(
            "utils.python needs exactly one of `-m MODULE`, `-c CODE` and `--script FILE`;"
            f" got {', '.join(given) or 'none'}"
        )
    if script is not None:
        cmd = [script]
    elif m is not None:
        cmd = ["-m", m]
    else:
        cmd = ["-c", str(c)]
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="python",
                image=image,
                entrypoint="python",
                args=[*cmd, *args],
                num_replicas=num_replicas,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                env={"HYDRA_MAIN_MODULE": m} if m else {},
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def binary(
    *args: str,
    entrypoint: str,
    name: str = "torchx_utils_binary",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
) -> specs.AppDef:
    """Runs an executable (found on ``PATH`` or given by path) with the given arguments.

    Args:
        args: arguments passed to the program
        entrypoint: the executable to run
        name: name of the job
        num_replicas: number of copies to run
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if given, takes precedence over cpu, gpu, memMB)
    """
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="binary",
                image=specs.NONE,
                entrypoint=entrypoint,
                args=list(args),
                num_replicas=num_replicas,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
            )
        ],
    )


def copy(src: str, dst: str, image: str = IMAGE, mounts: list[str] | None = None) -> specs.AppDef:
    """Copies a file from ``src`` to ``dst``; both may be any fsspec URL (``s3://``, ``file://``...).

    Directories and recursive copies are not supported.

    Args:
        src: the source fsspec file location
        dst: the destination fsspec file location
        image: an image with torchx-suite or TorchX (the default, TorchX's image, has TorchX)
        mounts: mounts for the replicas (e.g. type=bind,src=/host,dst=/job[,readonly])
    """
    return specs.AppDef(
        name="torchx-utils-copy",
        roles=[
            specs.Role(
                name="torchx-utils-copy",
                image=image,
                entrypoint="python",
                args=[*_run_app_module("copy_main"), "--src", src, "--dst", dst],
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def booth(
    x1: float,
    x2: float,
    trial_idx: int = 0,
    tracker_base: str = "/tmp/torchx-util-booth",
    image: str = IMAGE,
) -> specs.AppDef:
    """Evaluates the Booth function ``f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2``.

    The result is ``FsspecResultTracker(tracker_base)[trial_idx]["booth_eval"]`` (as TorchX).

    Args:
        x1: x1
        x2: x2
        trial_idx: the trial index (when running a hyper-parameter search)
        tracker_base: URL of the base output directory (e.g. s3://foo/bar)
        image: an image with torchx-suite or TorchX (the default, TorchX's image, has TorchX)
    """
    return specs.AppDef(
        name="torchx-utils-booth",
        roles=[
            specs.Role(
                name="torchx-utils-booth",
                image=image,
                entrypoint="python",
                args=[
                    *_run_app_module("booth_main"),
                    "--x1",
                    str(x1),
                    "--x2",
                    str(x2),
                    "--trial_idx",
                    str(trial_idx),
                    "--tracker_base",
                    tracker_base,
                ],
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )


def hydra(
    *overrides: str,
    config_name: Annotated[str, "-cn"],
    config_dir: Annotated[str, "-cd"] = ".torchx",
) -> specs.AppDef:
    """Builds the AppDef of a Hydra config (needs ``hydra-core``: ``pip install hydra-core``).

    The config's ``app`` key is instantiated: give it ``_target_: torchx_core.specs.AppDef``.
    Other top-level keys (config groups such as ``role``) can be interpolated into it, and
    ``${torchx.app_id:}``, ``${torchx.replica_id:}``, ``${torchx.rank0_env:}`` and
    ``${torchx.img_root:}`` give the run-time macros::

        defaults:
          - role: python
        app:
          _target_: torchx_core.specs.AppDef
          name: my_job
          roles:
            - ${role}

    Args:
        overrides: Hydra config overrides (e.g. role.num_replicas=2)
        config_name: the config file name in config_dir
        config_dir: the directory holding the configs
    """
    from torchx_core.components._hydra import compose_app

    return compose_app(config_name, config_dir, list(overrides))
