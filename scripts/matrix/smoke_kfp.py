"""One real use of torchx_kfp in the interpreter's environment (run by scripts/matrix/run.py).

A pipeline with one launcher step (utils.echo on local_cwd) compiled to IR, then run with
``kfp.local.SubprocessRunner(use_venv=False)``; with kfp-kubernetes installed, a container step
with a ``/dev/shm`` mount is compiled too. Exits non-zero on any failure.
"""

# no `from __future__ import annotations`: kfp reads the pipelines' annotations at run time
import os
import tempfile
from pathlib import Path


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="matrix-kfp-"))
    os.environ["TORCHX_LOCAL_ROOT"] = str(work / "torchx")
    os.chdir(work)
    import kfp
    from kfp import compiler, dsl, local

    from torchx_kfp import launch

    @dsl.pipeline(name="matrix-smoke")
    def pipeline():
        launch(
            component="utils.echo",
            component_args=["--msg", "matrix-ok"],
            scheduler="local_cwd",
            wait_interval=0.2,
        )

    compiler.Compiler().compile(pipeline, str(work / "pipeline.yaml"))
    assert "torchx-launcher" in (work / "pipeline.yaml").read_text()
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(work / "root"))
    pipeline()  # raises on a failed step

    try:
        import kfp.kubernetes
    except ImportError:
        kubernetes = "not installed"
    else:
        from torchx_core.specs import AppDef, Role
        from torchx_kfp import ContainerOptions, container_from_app

        app = AppDef(name="c", roles=[Role("r", "python:3.11", entrypoint="echo", args=["hi"])])

        @dsl.pipeline(name="matrix-k8s")
        def k8s():
            container_from_app(app, options=ContainerOptions(shm_size="1Gi"))

        compiler.Compiler().compile(k8s, str(work / "k8s.yaml"))
        assert "platforms" in (work / "k8s.yaml").read_text()
        kubernetes = "compiled"
    print(
        f"kfp smoke OK: kfp {kfp.__version__}, launcher step ran under kfp.local;"
        f" kfp-kubernetes {kubernetes}"
    )


if __name__ == "__main__":
    main()
