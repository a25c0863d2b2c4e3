"""The launch-path probe: a built-in scheduler resolves without building the plugin registry,
and everything that can override a built-in still does (each case in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_builtin_lookup_does_not_import_the_registry() -> None:
    out = _run(
        "import sys\n"
        "from torchx_core.schedulers import get_scheduler_factory\n"
        "get_scheduler_factory('local_cwd')\n"
        "print(sorted(m for m in sys.modules if m.startswith('torchx_core.plugins')))\n",
        env={"TORCHX_PLUGINS_SOURCE": "3"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['torchx_core.plugins', 'torchx_core.plugins._probe']"


def test_entry_point_carrying_a_builtin_name_still_overrides_it(tmp_path: Path) -> None:
    dist = tmp_path / "probe_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[torchx.schedulers]\nlocal_cwd = probe_plugin_mod:create_scheduler\n"
    )
    (tmp_path / "probe_plugin_mod.py").write_text(
        "def create_scheduler(session_name, **kwargs):\n    return ('probe', session_name)\n"
    )
    out = _run(
        "from torchx_core.schedulers import get_scheduler_factory\n"
        "print(get_scheduler_factory('local_cwd')('s'))\n",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "('probe', 's')"


def test_code_registration_of_a_builtin_name_still_overrides_it() -> None:
    out = _run(
        "from torchx_core.plugins import PluginType, registry\n"
        "from torchx_core.schedulers import get_scheduler_factory\n"
        "def mine(session_name, **kwargs):\n    return ('mine', session_name)\n"
        "registry().add(PluginType.SCHEDULER, 'local_cwd', mine)\n"
        "print(get_scheduler_factory('local_cwd')('s'))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "('mine', 's')"


@pytest.mark.parametrize("value", ["7", "x", "-1"])
def test_invalid_plugin_source_still_raises_on_lookup(value: str) -> None:
    out = _run(
        "from torchx_core.schedulers import get_scheduler_factory\n"
        "get_scheduler_factory('local_cwd')\n",
        env={"TORCHX_PLUGINS_SOURCE": value},
    )
    assert out.returncode != 0
    assert f"TORCHX_PLUGINS_SOURCE={value!r} is invalid" in out.stderr


def test_namespace_only_source_skips_the_entry_point_scan() -> None:
    out = _run(
        "import sys\n"
        "import torchx_core.util.entrypoints as e\n"
        "from torchx_core.schedulers import get_scheduler_factory\n"
        "get_scheduler_factory('local_cwd')\n"
        "print(e._cache is None, 'torchx_core.plugins._registry' in sys.modules)\n",
        env={"TORCHX_PLUGINS_SOURCE": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "True False"  # no entry point scan at all
