"""Errors for optional dependencies tell a missing package from an unusable version.

The end-to-end cases shadow the real engine in a fresh interpreter with a stub package and a
``.dist-info`` of another version, so the adapters' real import paths produce the message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchx_core.specs import _dependencies as deps
from torchx_core.specs.errors import (
    MissingDependencyError,
    check_dependency_version,
    extra_install_hint,
    import_optional,
    missing_dependency,
)

REPO = Path(__file__).resolve().parents[2]


def declared_range(dist: str) -> str:
    """The range pyproject.toml gives, as the messages print it."""
    req = deps.declared(dist, "")
    assert req is not None, dist
    return req.specifier


def test_messages_for_the_three_cases() -> None:
    missing = MissingDependencyError(
        "airflow", "airflow", "torchx_airflow", distribution="apache-airflow", required=">=3.0,<4"
    )
    assert str(missing).startswith("Optional dependency 'apache-airflow' is not installed")
    assert "apache-airflow>=3.0,<4" in str(missing)
    assert extra_install_hint("airflow") in str(missing)

    old = MissingDependencyError(
        "airflow",
        "airflow",
        "torchx_airflow",
        distribution="apache-airflow",
        found="2.10.5",
        required=">=3.0,<4",
    )
    assert "not installed" not in str(old)
    assert (
        "apache-airflow 2.10.5 is installed, but torchx_airflow needs apache-airflow>=3.0,<4"
        in str(old)
    )
    assert old.pip_hint == "pip install 'apache-airflow>=3.0,<4'"

    broken = MissingDependencyError(
        "airflow",
        "airflow",
        "torchx_airflow",
        distribution="apache-airflow",
        found="3.3.2",
        required=">=3.0,<4",
        reason="cannot import name 'X'",
    )
    assert "not installed" not in str(broken)
    assert "apache-airflow 3.3.2 is installed" in str(broken)
    assert "cannot import name 'X'" in str(broken)
    assert broken.found == "3.3.2" and broken.required == ">=3.0,<4"


def test_failed_import_of_an_installed_package_names_its_version() -> None:
    import yaml  # a core dependency: installed wherever torchx-suite is

    with pytest.raises(MissingDependencyError) as info:
        import_optional("yaml.no_such_submodule", "", "a test")
    e = info.value
    assert "not installed" not in str(e)
    assert e.distribution == "pyyaml" and e.found == yaml.__version__
    assert e.required == declared_range("pyyaml")
    assert "No module named 'yaml.no_such_submodule'" in str(e)


def test_distribution_named_for_a_shared_namespace() -> None:
    e = missing_dependency(
        "kfp.kubernetes", "kfp-kubernetes", distribution="kfp-kubernetes", cause=ImportError("boom")
    )
    assert e.distribution == "kfp-kubernetes"
    assert e.required == declared_range("kfp-kubernetes")


def test_absent_module_is_not_blamed_on_an_installed_sibling() -> None:
    e = missing_dependency("no_such_module_xyz.sub", "aws", "a test", cause=ImportError("x"))
    assert e.found is None and "is not installed" in str(e) and extra_install_hint("aws") in str(e)
    # boto3 is the aws extra's only requirement: named when it is missing too, never when it
    # is installed (it does not provide this module)
    boto3 = deps.installed_version("boto3")
    assert e.distribution == ("no_such_module_xyz" if boto3 else "boto3")


def test_version_check_passes_in_range() -> None:
    check_dependency_version("pyyaml", "", "a test")  # the installed pyyaml is in range


def _shadow(tmp_path: Path, dist: str, version: str, package: str, files: dict[str, str]) -> Path:
    site = tmp_path / "site"
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    for rel, text in {"__init__.py": "", **files}.items():
        path = site / package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return site


def _import_error(site: Path, module: str) -> str:
    code = textwrap.dedent(f"""
        from torchx_core.specs.errors import MissingDependencyError
        try:
            import {module}
        except MissingDependencyError as e:
            print("ERROR:", e)
        else:
            print("IMPORTED")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("dist", "package", "module"),
    [
        ("apache-airflow", "airflow", "torchx_airflow.operator"),
        ("prefect", "prefect", "torchx_prefect.tasks"),
        ("kfp", "kfp", "torchx_kfp.launcher"),
    ],
)
def test_too_old_engine_names_version_range_and_pip(
    tmp_path: Path, dist: str, package: str, module: str
) -> None:
    site = _shadow(tmp_path, dist, "2.0.1", package, {})
    out = _import_error(site, module)
    wanted = f"{dist}{declared_range(dist)}"
    assert out.startswith("ERROR:"), out
    assert f"{dist} 2.0.1 is installed" in out and f"needs {wanted}" in out
    assert f"pip install '{wanted}'" in out and "not installed" not in out


def test_installed_engine_that_fails_to_import_is_not_called_missing(tmp_path: Path) -> None:
    site = _shadow(tmp_path, "apache-airflow", "3.3.2", "airflow", {"sdk/__init__.py": ""})
    out = _import_error(site, "torchx_airflow.operator")
    assert out.startswith("ERROR:"), out
    assert "apache-airflow 3.3.2 is installed" in out and "not installed" not in out
    assert "cannot import name 'BaseOperator'" in out


@pytest.mark.parametrize(
    ("version", "spec", "want"),
    [
        ("2.15.2", ">=2.16,<3", False),
        ("2.16.0", ">=2.16,<3", True),
        ("2.17.3", ">=2.16,<3", True),
        ("3.0.0", ">=2.16,<3", False),
        ("7.0.0", ">=7.1", False),
        ("7.1.0", ">=7.1", True),
        ("2.16.0rc1", ">=2.16", False),
        ("2.16.0.post1", "<=2.16", False),
        ("3.1.6", ">=3.1.6,<4", True),
        ("3.1.5", ">=3.1.6,<4", False),
        ("2.13.0+cpu", "==2.13.0", True),
        ("1.0", "!=1.0", False),
        ("1.0", "~=1.0", None),
        ("main", ">=1", None),
    ],
)
def test_versions_are_compared_without_packaging(version: str, spec: str, want: object) -> None:
    assert deps.simple_satisfies(version, spec) is want
    if want is not None:  # the same answer as packaging's
        assert deps.satisfies(version, spec) is want


def test_too_old_kfp_is_refused_without_packaging(tmp_path: Path) -> None:
    """kfp does not depend on `packaging`: a venv with kfp 2.15.2 and this package alone has none,
    and the version check must still refuse it (it passed silently before)."""
    site = _shadow(tmp_path, "kfp", "2.15.2", "kfp", {"dsl/__init__.py": ""})
    (site / "sitecustomize.py").write_text(
        "import sys\nfor m in ('packaging', 'packaging.specifiers', 'packaging.version'):\n"
        "    sys.modules[m] = None  # as if not installed\n"
    )
    out = _import_error(site, "torchx_kfp.launcher")
    wanted = f"kfp{declared_range('kfp')}"
    assert out.startswith("ERROR:"), out
    assert "kfp 2.15.2 is installed" in out and f"needs {wanted}" in out
    assert f"pip install '{wanted}'" in out


def test_missing_dependency_is_a_module_not_found_error() -> None:
    """TorchX raises ``ModuleNotFoundError`` when a backend's client package is absent."""
    with pytest.raises(ModuleNotFoundError):
        import_optional("no_such_module_xyz", "aws", "a test")
