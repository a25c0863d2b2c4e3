"""local_docker, aws_batch, aws_sagemaker and ray load their SDKs lazily (fresh interpreter).

Importing a scheduler module, creating the scheduler and printing a dryrun must not import
docker, boto3/botocore, ray or any other heavy optional dependency: only talking to the engine,
cloud or cluster does (and a missing SDK is then a MissingDependencyError naming the extra, which
each scheduler's unit tests check).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("docker", "boto3", "botocore", "ray", "requests", "kubernetes", "yaml", "torch")

# module -> (create_scheduler cfg for a dryrun of a one-role app, or None: import only)
MODULES: dict[str, dict[str, str] | None] = {
    "torchx_core.schedulers.docker.scheduler": {},
    "torchx_core.schedulers.aws.batch": {"queue": "q"},
    "torchx_core.schedulers.aws.sagemaker": {
        "role": "arn:aws:iam::1:role/r",
        "output_path": "s3://b/o",
        "instance_type": "ml.m5.large",
    },
    "torchx_core.schedulers.ray.scheduler": {},
    "torchx_core.schedulers.aws._logs": None,
    "torchx_core.schedulers.ray._driver": None,
    "torchx_core.workspace.docker_workspace": None,
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_import_and_dryrun_load_no_sdk(module: str) -> None:
    cfg = MODULES[module]
    code = f"import {module} as m\n"
    if cfg is not None:
        code += (
            "from torchx_core.specs import AppDef, Role, resource\n"
            "app = AppDef('a', [Role('r', 'img', entrypoint='echo', args=['hi'],"
            " resource=resource(cpu=1, memMB=64))])\n"
            f"info = m.create_scheduler('s').submit_dryrun(app, {cfg!r})\n"
            "assert 'echo' in str(info), str(info)\n"
        )
    code += "import sys\nprint('MODULES ' + ' '.join(sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.strip().splitlines()[-1].split()[1:])
    assert module in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
