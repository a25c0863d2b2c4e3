"""TorchX's scheduler import paths are aliases of the backend packages (one layout)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

ALIASES = {
    "local_scheduler": "local.scheduler",
    "slurm_scheduler": "slurm.scheduler",
    "lsf_scheduler": "lsf.scheduler",
    "docker_scheduler": "docker.scheduler",
    "ray_scheduler": "ray.scheduler",
    "kubernetes_scheduler": "kubernetes.scheduler",
    "kubernetes_mcad_scheduler": "kubernetes.mcad",
    "aws_batch_scheduler": "aws.batch",
    "aws_sagemaker_scheduler": "aws.sagemaker",
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_the_torchx_path_is_the_package_module(alias: str) -> None:
    old = importlib.import_module(f"torchx_core.schedulers.{alias}")
    new = importlib.import_module(f"torchx_core.schedulers.{ALIASES[alias]}")
    assert old is new
    assert callable(old.create_scheduler)


def test_patching_through_the_alias_reaches_the_code() -> None:
    """``mock.patch("torchx_core.schedulers.local_scheduler.X")`` (TorchX tests do that) patches
    the module the scheduler runs, imported first under either name, in a fresh interpreter."""
    code = (
        "from unittest import mock\n"
        "import torchx_core.schedulers.local.scheduler as impl\n"
        "with mock.patch('torchx_core.schedulers.local_scheduler.make_unique', lambda n: 'X'):\n"
        "    print(impl.make_unique('a'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "X"
