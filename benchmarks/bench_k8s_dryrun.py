"""Kubernetes dry run at scale: 8 roles x 128 replicas, build and print, ours vs TorchX 0.7.0.

Usage: .venv/bin/python benchmarks/bench_k8s_dryrun.py
Prints the best of 5 for building the request (``submit_dryrun``) and for rendering it (``str``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from _baseline import OUR_PYTHON, torchx070_python

SNIPPET = textwrap.dedent(
    """
    import time
    from {pkg} import specs
    from {pkg}.schedulers.kubernetes_scheduler import create_scheduler

    roles = [
        specs.Role(
            name=f"role{{i}}", image="ghcr.io/org/img:1", entrypoint="python",
            args=["-m", "train", "--replica", specs.macros.replica_id],
            env={{"A": "1"}}, num_replicas=128,
            resource=specs.Resource(cpu=4, gpu=1, memMB=16384),
        )
        for i in range(8)
    ]
    app = specs.AppDef(name="big", roles=roles)
    sched = create_scheduler("bench")
    build, render = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        info = sched.submit_dryrun(app, {{"queue": "default"}})
        t1 = time.perf_counter()
        str(info)
        t2 = time.perf_counter()
        build.append(t1 - t0)
        render.append(t2 - t1)
    print(f"{{min(build):.3f}} {{min(render):.3f}}")
    """
)


def measure(python: str, pkg: str) -> tuple[float, float]:
    out = subprocess.run(
        [python, "-c", SNIPPET.format(pkg=pkg)], check=True, capture_output=True, text=True
    )
    build, render = out.stdout.split()[-2:]
    return float(build), float(render)


def main() -> None:
    baseline = torchx070_python()
    # TorchX builds its request with the kubernetes client models; it is not a TorchX dependency.
    probe = [str(baseline), "-c", "import kubernetes"]
    if subprocess.run(probe, check=False, capture_output=True).returncode:
        subprocess.run([str(baseline), "-m", "pip", "install", "-q", "kubernetes"], check=True)
    ours = measure(str(OUR_PYTHON), "torchx_core")
    theirs = measure(str(baseline), "torchx")
    print("kubernetes dryrun, 8 roles x 128 replicas (best of 5, seconds)")
    print(f"{'':14}{'build':>8}{'print':>8}{'total':>8}")
    for label, (b, r) in (("torchx 0.7.0", theirs), ("torchx-suite", ours)):
        print(f"{label:14}{b:8.3f}{r:8.3f}{b + r:8.3f}")
    print(f"speed-up: {sum(theirs) / sum(ours):.1f}x")


if __name__ == "__main__":
    sys.exit(main())
