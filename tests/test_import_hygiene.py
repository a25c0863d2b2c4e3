"""Importing the light entry points loads no heavy optional dependency (fresh interpreter).

``import torchx_core.specs`` must not import kubernetes, boto3, docker, ray, airflow, kfp,
prefect, yaml, fsspec or torch; the CLI entry point must not import the heavy backends either.
Modules are only checked once they exist in the tree (found via importlib), so the test grows
with the code.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

HEAVY = (
    "kubernetes",
    "boto3",
    "botocore",
    "docker",
    "ray",
    "airflow",
    "kfp",
    "prefect",
    "torch",
    "mlflow",
    "starlette",
    "uvicorn",
    "jinja2",  # the dashboard's web stack: only `torchx dashboard` loads it
)
SPECS_FORBIDDEN = (*HEAVY, "yaml", "fsspec")

# module -> what it must not import
CANDIDATES: dict[str, tuple[str, ...]] = {
    "torchx_core.specs": SPECS_FORBIDDEN,
    "torchx_core.specs.api": SPECS_FORBIDDEN,
    "torchx_core.specs.overlays": SPECS_FORBIDDEN,
    "torchx_core.specs.builders": SPECS_FORBIDDEN,
    "torchx_core.specs.register": SPECS_FORBIDDEN,
    "torchx_core.plugins": SPECS_FORBIDDEN,
    "torchx_core.cli.main": HEAVY,
    "torchx_core.cli.cmd_dashboard": HEAVY,
    "torchx_core.dashboard": HEAVY,
    "torchx_core.runner.links": HEAVY,
    # job-side helpers: torch and the tracking services load only when used
    "torchx_core.tracker": (*HEAVY, "fsspec", "mlflow"),
    "torchx_core.distributed": HEAVY,
    "torchx_core.runtime.tracking": (*HEAVY, "fsspec"),
}


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


EXISTING = [m for m in CANDIDATES if _exists(m)]


def loaded_modules(code: str) -> set[str]:
    out = subprocess.run(
        # the modules are printed without importing anything (json would load re)
        [sys.executable, "-c", f"{code}\nimport sys\nprint('MODULES ' + ' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("MODULES "), out.stdout
    return set(last.split()[1:])


def _offenders(mods: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in forbidden)


def test_specs_is_checked() -> None:
    assert "torchx_core.specs" in EXISTING


@pytest.mark.parametrize("module", EXISTING)
def test_import_loads_no_heavy_dependency(module: str) -> None:
    mods = loaded_modules(f"import {module}")
    assert module in mods
    assert _offenders(mods, CANDIDATES[module]) == []


def test_specs_public_api_use_stays_light() -> None:
    """Using the core API (not just importing it) does not pull heavy deps in either."""
    code = (
        "import torchx_core.specs as s\n"
        "app = s.AppDef('a', [s.Role('r', 'img', resource=s.resource(h='gpu.small'))])\n"
        "s.AppDef.from_dict(app.to_dict())\n"
        "s.parse_app_handle('local://s/a')\n"
        "o = s.runopts(); o.add('x', type_=int, help='x'); o.cfg_from_str('x=1')\n"
    )
    assert _offenders(loaded_modules(code), SPECS_FORBIDDEN) == []


# Standard-library modules that cost import time and that defining an app does not need
# (benchmarks/bench_import_specs.py measures the effect against TorchX 0.7.0).
SPECS_STDLIB_FORBIDDEN = (
    "typing",
    "dataclasses",
    "inspect",
    "ast",
    "re",
    "copy",
    "json",
    "logging",
    "threading",
    "asyncio",
    "pathlib",
)


def test_specs_import_skips_heavy_stdlib_modules() -> None:
    assert _offenders(loaded_modules("import torchx_core.specs"), SPECS_STDLIB_FORBIDDEN) == []


def test_detector_sees_a_heavy_import() -> None:
    assert "json" in _offenders(loaded_modules("import json"), ("json",))
