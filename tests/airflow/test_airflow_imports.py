"""Import hygiene and layering of ``torchx_airflow`` (fresh interpreters + an AST scan)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _top(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


def test_importing_torchx_airflow_and_its_provider_info_does_not_import_airflow() -> None:
    mods = _modules_after(
        "import torchx_airflow, torchx_airflow.provider\n"
        "torchx_airflow.provider.get_provider_info()"
    )
    assert "airflow" not in _top(mods)


@pytest.mark.parametrize("module", ["torchx_core.specs", "torchx_core.runner"])
def test_torchx_core_never_loads_torchx_airflow_or_airflow(module: str) -> None:
    mods = _top(_modules_after(f"import {module}"))
    assert "torchx_airflow" not in mods
    assert "airflow" not in mods


def test_public_names_resolve_lazily() -> None:
    import torchx_airflow

    assert torchx_airflow.TorchXOperator.__module__ == "torchx_airflow.operator"
    assert torchx_airflow.TorchXTrigger.__module__ == "torchx_airflow.trigger"
    assert torchx_airflow.TorchXSensor.__module__ == "torchx_airflow.sensor"
    with pytest.raises(AttributeError, match="nope"):
        torchx_airflow.nope  # noqa: B018


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_torchx_core_source_never_imports_torchx_airflow() -> None:
    offenders = [
        f"{p.relative_to(REPO)}: {name}"
        for p in sorted((REPO / "torchx_core").rglob("*.py"))
        for name in _imports(p)
        if name.split(".")[0] == "torchx_airflow"
    ]
    assert offenders == []


def test_torchx_airflow_uses_only_public_specs_and_runner() -> None:
    # and the stdlib-only helpers of torchx_core.util (the package's lazy face)
    allowed = ("torchx_core.specs", "torchx_core.runner", "torchx_core.util")
    offenders = [
        f"{p.relative_to(REPO)}: {name}"
        for p in sorted((REPO / "torchx_airflow").rglob("*.py"))
        for name in _imports(p)
        if name.startswith("torchx_core")
        and not any(name == a or name.startswith(a + ".") for a in allowed)
    ]
    assert offenders == []
