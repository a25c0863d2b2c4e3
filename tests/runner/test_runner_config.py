""".torchxconfig: discovery, precedence, typed run options, component and CLI sections."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from torchx_core.runner import config
from torchx_core.runner.config import ConfigError
from torchx_core.specs import runopts


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home = tmp_path / "home"
    cwd = tmp_path / "proj"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    return home, cwd


def _opts() -> runopts:
    opts = runopts()
    opts.add("queue", type_=str, help="q", default="default")
    opts.add("priority", type_=int, help="p", default=0)
    opts.add("ratio", type_=float, help="r", default=None)
    opts.add("debug", type_=bool, help="d", default=False)
    opts.add("tags", type_=list[str], help="t", default=None)
    opts.add("labels", type_=dict[str, str], help="l", default=None)
    opts.add("account", type_=str, help="the account to bill", required=True)
    return opts


def test_find_configs_home_then_cwd(dirs: tuple[Path, Path]) -> None:
    home, cwd = dirs
    assert config.find_configs() == []
    (cwd / ".torchxconfig").write_text("[fake]\n")
    assert config.find_configs() == [str(cwd / ".torchxconfig")]
    (home / ".torchxconfig").write_text("[fake]\n")
    assert config.find_configs() == [str(home / ".torchxconfig"), str(cwd / ".torchxconfig")]


def test_env_override_reads_only_that_file(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[fake]\nqueue = cwd\n")
    other = tmp_path / "other.ini"
    other.write_text("[fake]\nqueue = env\n")
    monkeypatch.setenv("TORCHXCONFIG", str(other))
    cfg: dict = {}
    config.apply("fake", cfg, run_opts=_opts())
    assert cfg == {"queue": "env"}
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "missing.ini"))
    with pytest.raises(ConfigError, match=r"missing\.ini"):
        config.find_configs()


def test_apply_precedence_explicit_then_home_then_cwd(dirs: tuple[Path, Path]) -> None:
    home, cwd = dirs
    (home / ".torchxconfig").write_text("[fake]\nqueue = home\n")
    (cwd / ".torchxconfig").write_text("[fake]\nqueue = cwd\npriority = 5\n")
    cfg: dict = {}
    config.apply("fake", cfg, run_opts=_opts())
    assert cfg == {"queue": "home", "priority": 5}
    cfg = {"priority": 1}
    config.apply("fake", cfg, run_opts=_opts())
    assert cfg == {"priority": 1, "queue": "home"}


def test_values_are_typed(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text(
        "[fake]\nratio = 0.5\ndebug = True\ntags = a;b\nlabels = x:1;y:2\naccount = None\n"
    )
    cfg: dict = {}
    config.apply("fake", cfg, run_opts=_opts())
    assert cfg == {
        "ratio": 0.5,
        "debug": True,
        "tags": ["a", "b"],
        "labels": {"x": "1", "y": "2"},
        "account": None,
    }


def test_bad_value_is_config_error(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[fake]\npriority = high\n")
    with pytest.raises(ConfigError, match="priority"):
        config.apply("fake", {}, run_opts=_opts())


def test_an_unknown_option_is_refused_with_a_suggestion(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[fake]\nqueu = q\n")
    with pytest.raises(ConfigError) as e:
        config.apply("fake", {}, run_opts=_opts())
    assert "[fake] queu = q: unknown run option 'queu'. Did you mean: 'queue'?" in str(e.value)


def test_a_free_form_scheduler_gets_its_undeclared_options(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[fake]\nqueu = q\n")
    opts = _opts()
    opts.free_form = True
    cfg: dict = {}
    with caplog.at_level(logging.WARNING):
        config.apply("fake", cfg, run_opts=opts)
    assert cfg == {"queu": "q"} and "free-form" in caplog.text


def test_malformed_file_is_config_error(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("no section header\n")
    with pytest.raises(ConfigError, match="malformed"):
        config.load_sections("component")


def test_component_and_cli_sections(dirs: tuple[Path, Path]) -> None:
    home, cwd = dirs
    (home / ".torchxconfig").write_text("[component:dist.ddp]\nj = 2x2\n")
    (cwd / ".torchxconfig").write_text(
        "[component:dist.ddp]\nj = 1x1\ncpu = 4\n"
        "[cli:run]\nscheduler = fake\ncomponent = utils.echo\n"
        "[:bad]\nx = 1\n[component:]\ny = 2\n"
    )
    assert config.load_sections("component") == {"dist.ddp": {"j": "2x2", "cpu": "4"}}
    assert config.get_configs("cli", "run") == {"scheduler": "fake", "component": "utils.echo"}
    assert config.get_config("cli", "run", "component") == "utils.echo"
    assert config.get_config("cli", "run", "nope") is None
    assert config.get_configs("cli", "status") == {}


def test_keys_are_case_sensitive(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[component:x]\nmemMB = 10\n")
    assert config.get_configs("component", "x") == {"memMB": "10"}


def test_dump_and_reload_roundtrip(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    buf = io.StringIO()
    config.dump(buf, schedulers=["fake"], run_opts={"fake": _opts()})
    text = buf.getvalue()
    assert "[fake]" in text and "queue = default" in text and "#FIXME" in text
    buf = io.StringIO()
    config.dump(buf, schedulers=["fake"], required_only=True, run_opts={"fake": _opts()})
    assert "queue" not in buf.getvalue() and "account" in buf.getvalue()
    # a dumped file (minus the FIXME) loads back to the defaults
    (cwd / ".torchxconfig").write_text(text.replace("account = #FIXME", "# account = #FIXME"))
    cfg: dict = {}
    config.apply("fake", cfg, run_opts=_opts())
    assert cfg["queue"] == "default" and cfg["priority"] == 0 and cfg["debug"] is False


def test_torchx_head_config_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As TorchX HEAD: ``DEFAULT_CONFIG_DIRS`` is the searched list (patchable),
    ``TORCHXCONFIG=""`` reads no file, a missing one is a FileNotFoundError, and ``dump`` of a
    scheduler that does not exist raises instead of writing a comment."""
    import io

    from torchx_core import settings
    from torchx_core.runner import config
    from torchx_core.specs import UnknownSchedulerException

    home, cwd = tmp_path / "h", tmp_path / "c"
    for d in (home, cwd):
        d.mkdir()
        (d / ".torchxconfig").write_text("[local_cwd]\n")
    monkeypatch.delenv(settings.ENV_TORCHXCONFIG, raising=False)
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(home), str(cwd)])
    assert config.find_configs() == [str(home / ".torchxconfig"), str(cwd / ".torchxconfig")]
    monkeypatch.setenv(settings.ENV_TORCHXCONFIG, "")
    assert config.find_configs() == []
    monkeypatch.setenv(settings.ENV_TORCHXCONFIG, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        config.find_configs()
    with pytest.raises(UnknownSchedulerException, match="does-not-exist"):
        config.dump(io.StringIO(), schedulers=["does-not-exist"])


def test_settings_names_match_their_users() -> None:
    from torchx_core import settings
    from torchx_core.runner import api as runner_api
    from torchx_core.runner import config
    from torchx_core.tracker import api as tracker_api
    from torchx_core.util import session

    assert config.ENV_TORCHXCONFIG == settings.ENV_TORCHXCONFIG == "TORCHXCONFIG"
    for name in ("ENV_TORCHX_JOB_ID", "ENV_TORCHX_PARENT_RUN_ID", "ENV_TORCHX_TRACKERS"):
        assert getattr(runner_api, name) == getattr(tracker_api, name) == getattr(settings, name)
    assert session.TORCHX_INTERNAL_SESSION_ID == settings.ENV_TORCHX_INTERNAL_SESSION_ID
