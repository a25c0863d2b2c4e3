"""TorchX's image providers on real local runs: where each replica runs and what it runs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from torchx_core import specs
from torchx_core.schedulers.local_scheduler import (
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
)

pytestmark = [pytest.mark.integration, pytest.mark.local]


def _script(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_local_directory_provider_runs_in_the_image_dir(local_root: str, tmp_path: Path) -> None:
    image = tmp_path / "image"
    image.mkdir()
    _script(image, "where.sh", 'pwd; echo "$1"')
    sched = LocalScheduler("s", root=local_root, image_provider_class=LocalDirectoryImageProvider)
    role = specs.Role("r", image=str(image), entrypoint="./where.sh", args=[specs.macros.img_root])
    app_id = sched.submit(specs.AppDef("where", roles=[role]), {})
    desc = sched.wait(app_id, timeout=60)
    assert desc is not None and desc.state == specs.AppState.SUCCEEDED
    lines = list(sched.log_iter(app_id, "r", 0))
    assert lines == [f"{image}\n", f"{image}\n"]


def test_custom_provider_chooses_the_command(local_root: str, tmp_path: Path) -> None:
    images = tmp_path / "images"
    (images / "tool").mkdir(parents=True)
    _script(images / "tool", "run.sh", 'echo "ran in $(pwd) with $1"')

    class Images(ImageProvider):
        """Images are directories under ``images``; roles run in ``tmp_path``."""

        def __init__(self, cfg: Mapping[str, specs.CfgVal]) -> None:
            self.cfg = cfg

        def fetch(self, image: str) -> str:
            return str(images / image)

        def get_cwd(self, image: str) -> str | None:
            return str(tmp_path)

    sched = LocalScheduler("s", root=local_root, image_provider_class=Images)
    role = specs.Role("r", image="tool", entrypoint="run.sh", args=[specs.macros.img_root])
    app_id = sched.submit(specs.AppDef("custom", roles=[role]), {})
    desc = sched.wait(app_id, timeout=60)
    assert desc is not None and desc.state == specs.AppState.SUCCEEDED
    tool = os.path.join(images, "tool")
    assert list(sched.log_iter(app_id, "r", 0)) == [f"ran in {tmp_path} with {tool}\n"]
