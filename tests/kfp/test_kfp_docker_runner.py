"""``torchx_kfp.docker_runner``: a kfp.local DockerRunner whose steps can write the pipeline root
(unit tests of its arguments; the image test runs a step with it,
``tests/kfp/test_kfp_image.py::test_docker_runner_runs_the_step_as_the_pipeline_roots_owner``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchx_kfp import InvalidKfpOptionsError, docker_runner


def test_the_step_runs_as_the_owner_of_the_pipeline_root(tmp_path: Path) -> None:
    pytest.importorskip("docker", reason="kfp.local.DockerRunner needs the docker extra")
    root = tmp_path / "made-here"
    runner = docker_runner(root, network_mode="none")
    assert root.is_dir()  # created, so owned by this process's user
    args = runner.container_run_args
    assert args["user"] == f"{os.getuid()}:{os.getgid()}"
    assert args["environment"]["HOME"] == "/tmp" and args["environment"]["USER"]
    assert args["network_mode"] == "none"


def test_given_user_and_environment_win(tmp_path: Path) -> None:
    pytest.importorskip("docker", reason="kfp.local.DockerRunner needs the docker extra")
    runner = docker_runner(
        tmp_path, user="1000:1000", environment={"HOME": "/home/torchx", "AWS_DEFAULT_REGION": "x"}
    )
    args = runner.container_run_args
    assert args["user"] == "1000:1000"
    assert args["environment"]["HOME"] == "/home/torchx"
    assert args["environment"]["AWS_DEFAULT_REGION"] == "x"


def test_bad_arguments_say_what_to_give(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(InvalidKfpOptionsError, match=r"pipeline_root .* is not a directory"):
        docker_runner(a_file / "root")
    with pytest.raises(InvalidKfpOptionsError, match="environment must be a dict"):
        docker_runner(tmp_path, environment=["HOME=/tmp"])
