"""The executor's Airflow floor: it imports on Airflow >= 3.3 and says what is wrong below it.

The version matrix runs this on every supported Airflow (3.0 to 3.3): on the old ones it is the
executor's whole test (its other tests use 3.3's workload classes and are not collected there).
"""

from __future__ import annotations

import importlib
import sys

import pytest
from airflow_versions import AIRFLOW_VERSION

from torchx_core.specs import MissingDependencyError


@pytest.fixture(autouse=True)
def _restore_modules() -> object:
    """Puts back the executor modules other tests imported (this test re-imports them)."""
    saved = {m: mod for m, mod in sys.modules.items() if m.startswith("torchx_airflow.executors")}
    yield
    for name in [m for m in sys.modules if m.startswith("torchx_airflow.executors")]:
        del sys.modules[name]
    sys.modules.update(saved)


def _fresh_import() -> object:
    for name in [m for m in sys.modules if m.startswith("torchx_airflow.executors")]:
        del sys.modules[name]
    return importlib.import_module("torchx_airflow.executors")


def test_the_executor_imports_on_a_supported_airflow_and_names_the_floor_below_it() -> None:
    if AIRFLOW_VERSION >= (3, 3):
        mod = _fresh_import()
        assert mod.MIN_AIRFLOW == (3, 3) and mod.TorchXExecutor.__name__ == "TorchXExecutor"
        return
    with pytest.raises(MissingDependencyError) as info:
        _fresh_import()
    text = str(info.value)
    assert "apache-airflow" in text and ">=3.3" in text and "pip install" in text
    assert info.value.found is not None and info.value.found.startswith("3.")


def test_the_floor_check_refuses_an_older_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(
        metadata, "version", lambda d: "3.1.8" if d == "apache-airflow" else real(d)
    )
    with pytest.raises(
        MissingDependencyError, match=r"apache-airflow 3\.1\.8 is installed.*>=3\.3"
    ):
        _fresh_import()
