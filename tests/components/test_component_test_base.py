"""torchx_core.components.component_test_base.ComponentTestCase, used as a TorchX user does."""

from __future__ import annotations

import unittest
from pathlib import Path

import pytest

from torchx_core.components import utils
from torchx_core.components.component_test_base import ComponentTestCase
from torchx_core.specs import AppState


def _run(case: type[unittest.TestCase], name: str) -> unittest.TestResult:
    result = unittest.TestResult()
    case(name).run(result)
    return result


def test_validate_accepts_builtin_and_rejects_a_broken_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad_components.py"
    bad.write_text("def broken(x) -> int:\n    '''b'''\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import bad_components  # type: ignore[import-not-found]

    class Checks(ComponentTestCase):
        def test_good(self) -> None:
            self.validate(utils, "echo")

        def test_bad(self) -> None:
            self.validate(bad_components, "broken")

    good = _run(Checks, "test_good")
    assert good.wasSuccessful(), good.errors + good.failures
    failed = _run(Checks, "test_bad")
    assert not failed.wasSuccessful()
    assert "Missing type annotation" in str(failed.errors + failed.failures)


@pytest.mark.integration
@pytest.mark.local
def test_run_component_runs_to_the_end_on_local_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    statuses = []

    class Runs(ComponentTestCase):
        def test_echo(self) -> None:
            status = self.run_component(
                utils.echo, {"msg": "hi", "image": str(tmp_path)}, interval=0.1, timeout=30
            )
            statuses.append(status)
            self.assertIsNotNone(status)

    result = _run(Runs, "test_echo")
    assert result.wasSuccessful(), result.errors + result.failures
    assert statuses[0].state == AppState.SUCCEEDED
