"""Golden files compare, and can be regenerated only outside CI."""

from __future__ import annotations

from pathlib import Path

import golden_files
import pytest
from golden_files import check_golden, update_requested


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_update_golden_is_refused_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(RuntimeError, match="UPDATE_GOLDEN=1 under CI"):
        update_requested()


def test_update_golden_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("UPDATE_GOLDEN", raising=False)
    assert update_requested() is False
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    assert update_requested() is True
    monkeypatch.setenv("CI", "false")
    assert update_requested() is True


def test_a_changed_request_fails_with_a_diff(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("UPDATE_GOLDEN", raising=False)
    monkeypatch.setattr(golden_files, "GOLDEN_DIR", tmp_path)
    (tmp_path / "req.json").write_text('{"image": "a"}\n')
    check_golden("req.json", '{"image": "a"}', __file__)
    with pytest.raises(AssertionError, match=r'-\{"image": "a"\}\n\+\{"image": "b"\}'):
        check_golden("req.json", '{"image": "b"}', __file__)
    with pytest.raises(AssertionError, match="is missing"):
        check_golden("other.json", "{}", __file__)
