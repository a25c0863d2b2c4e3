"""A Kubeflow Pipelines v2 pipeline of TorchX apps, run locally with kfp.local or compiled.

Run it end to end on this machine (kfp.local runs each launcher step as a subprocess of this
interpreter; the apps run on the TorchX local scheduler)::

    python examples/kfp/pipeline.py run --message hi

Compile the cluster variant to KFP IR YAML (submit it to a KFP backend with
``kfp.Client().create_run_from_pipeline_package``); its launcher step runs in the launcher image
(``make kfp-launcher-image``, pushed where the cluster pulls), the apps in your training image::

    python examples/kfp/pipeline.py compile --output pipeline.yaml \
        --image registry.example.com/ml/train:1 \
        --launcher-image registry.example.com/ml/torchx-kfp:0.1

The local pipeline has two launcher steps: ``train`` runs a two-replica app, then ``report``
runs the builtin ``utils.echo`` component with the first step's app handle as its message. The
cluster pipeline runs a single-container app as a plain KFP container task
(``container_from_app``: resources, retries, ``/dev/shm``, caching off) and the two-replica app
through a launcher step on the kubernetes scheduler.
"""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import argparse
import os
import sys
from typing import Any

from kfp import compiler, dsl

import torchx_kfp
import torchx_kfp.launcher
from torchx_core.specs import AppDef, Resource, Role, macros

TRAIN = """
import os, sys, time
rank = sys.argv[1]
for step in range(3):
    print(f"replica {rank} step {step}", flush=True)
    time.sleep(0.1)
print(f"replica {rank} done: {os.environ['EXAMPLE_MESSAGE']}", flush=True)
"""


def train_app(message: str, image: str, python: str = "python", num_replicas: int = 2) -> AppDef:
    """A small "training" app: ``num_replicas`` replicas each print a few steps."""
    role = Role(
        name="trainer",
        image=image,
        entrypoint=python,
        args=["-u", "-c", TRAIN, macros.replica_id],
        env={"EXAMPLE_MESSAGE": message},
        num_replicas=num_replicas,
        resource=Resource(cpu=1, gpu=0, memMB=512),
    )
    return AppDef(name="train", roles=[role])


def local_pipeline(message: str) -> Any:
    """The pipeline kfp.local runs: two launcher steps on the local scheduler."""
    app = train_app(message, image=os.getcwd(), python=sys.executable)

    @dsl.pipeline(name="torchx-local-example")
    def pipeline() -> str:
        train = torchx_kfp.launch(app, scheduler="local_cwd", wait_interval=0.2)
        report = torchx_kfp.launch(
            component="utils.echo",
            component_args=["--msg", train.outputs["app_handle"]],
            scheduler="local_cwd",
            wait_interval=0.2,
        )
        return report.outputs["app_handle"]

    return pipeline


def cluster_pipeline(message: str, image: str, launcher_image: str | None = None) -> Any:
    """The pipeline for a KFP cluster: a container task and a launcher step on kubernetes.

    ``image`` runs the apps; ``launcher_image`` the launcher step (default
    ``torchx_kfp.launcher.DEFAULT_BASE_IMAGE``).
    """
    prepare = AppDef(
        name="prepare",
        roles=[
            Role(
                name="prepare",
                image=image,
                entrypoint="python",
                args=["-c", "print('preparing')"],
                max_retries=2,
                resource=Resource(cpu=2, gpu=0, memMB=4096),
            )
        ],
    )
    train = train_app(message, image=image)
    options = torchx_kfp.ContainerOptions(shm_size="1Gi")

    @dsl.pipeline(name="torchx-cluster-example")
    def pipeline() -> str:
        first = torchx_kfp.container_from_app(prepare, options=options)
        second = torchx_kfp.launch(
            train,
            scheduler="kubernetes",
            cfg={"namespace": "default"},
            base_image=launcher_image,
            after=first,
        )
        return second.outputs["app_handle"]

    return pipeline


def run_locally(message: str, pipeline_root: str | None = None) -> str:
    """Runs :func:`local_pipeline` with kfp.local and returns the last step's app handle."""
    import kfp.local

    kfp.local.init(
        runner=kfp.local.SubprocessRunner(use_venv=False),
        pipeline_root=pipeline_root or os.path.join(os.getcwd(), "local_outputs"),
    )
    return local_pipeline(message)().output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the local pipeline with kfp.local")
    run.add_argument("--message", default="hello from kfp")
    run.add_argument("--pipeline-root", default=None)
    comp = sub.add_parser("compile", help="compile the cluster pipeline to IR YAML")
    comp.add_argument("--message", default="hello from kfp")
    comp.add_argument(
        "--image",
        default="ghcr.io/example/train:latest",
        help="the apps' image (your training code)",
    )
    comp.add_argument(
        "--launcher-image",
        default=None,
        help="the launcher step's image (make kfp-launcher-image; default"
        f" {torchx_kfp.launcher.DEFAULT_BASE_IMAGE})",
    )
    comp.add_argument("--output", default="pipeline.yaml")
    args = parser.parse_args(argv)
    if args.command == "run":
        handle = run_locally(args.message, args.pipeline_root)
        sys.stdout.write(f"last app: {handle}\n")
    else:
        pipeline = cluster_pipeline(args.message, args.image, args.launcher_image)
        compiler.Compiler().compile(pipeline, args.output)
        sys.stdout.write(f"wrote {args.output}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
