from pathlib import Path

import pytest
from support.fake_scheduler import fake_plugin  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No user/project .torchxconfig leaks in: HOME and cwd are fresh directories."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    return work
