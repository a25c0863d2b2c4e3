"""Fault injection, group "secrets": nothing of the launcher's environment reaches the disk.

An Airflow or Prefect worker launches with its secrets in its environment (the Fernet key, the
connections, an API key). The replicas inherit them, as in TorchX, but no file of the app holds
them, and the app's folders and files are private to the user whatever the umask and the
``log_dir``. The ``env_drop`` run option keeps chosen variables away from the replicas.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchx_core.schedulers.api import AppValidationError
from torchx_core.schedulers.local.scheduler import LocalScheduler
from torchx_core.specs import AppDef, AppState, Role

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]

SECRET = "fernet-7Hq2vZ9xK4mW1pR8sT3uY6"  # never written anywhere by the scheduler
CONN = "postgres://user:pa55-Wq8rT2@db/airflow"


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _checker(expect_fernet: bool, expect_conn: bool) -> AppDef:
    """An app whose replicas exit 0 iff they inherited (or not) the two secrets as expected."""
    role = Role(
        "check",
        image="",
        entrypoint="sh",
        args=["-c", _compare_script(expect_fernet, expect_conn)],
        num_replicas=2,
    )
    return AppDef("secrets", roles=[role])


def _compare_script(expect_fernet: bool, expect_conn: bool) -> str:
    # compares the inherited values against reversed copies so that the literal secrets are in
    # no argument either (arguments are persisted, in app.json and plan.json, on purpose)
    def check(var: str, value: str, present: bool) -> str:
        rev = value[::-1]
        got = f'"$(printf %s "${{{var}-}}" | rev)"'
        return f'[ {got} {"=" if present else "!="} "{rev}" ]'

    return (
        f"{check('AIRFLOW__CORE__FERNET_KEY', SECRET, expect_fernet)} && "
        f"{check('AIRFLOW_CONN_DB', CONN, expect_conn)} && echo inherited-as-expected"
    )


def _files(path: Path) -> Iterator[Path]:
    for dirpath, _dirnames, filenames in os.walk(path, followlinks=True):
        yield Path(dirpath)
        for name in filenames:
            yield Path(dirpath, name)


def _assert_private_and_clean(where: Path) -> int:
    seen = 0
    for p in _files(where):
        st = os.stat(p)
        assert not st.st_mode & 0o077, (
            f"{p} is mode {stat.filemode(st.st_mode)}: readable by others"
        )
        if p.is_file():
            data = p.read_bytes()
            for secret in (SECRET, CONN):
                assert secret.encode() not in data, f"a launcher secret is written in {p}"
            seen += 1
    return seen


@pytest.mark.parametrize("mode", ["fork", "spawn"])
@pytest.mark.parametrize("with_log_dir", [False, True])
def test_launcher_secrets_reach_replicas_but_no_file_and_every_file_is_private(
    sched: LocalScheduler,
    local_root: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    permissive_umask: None,
    mode: str,
    with_log_dir: bool,
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_SUPERVISOR", mode)
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", SECRET)
    monkeypatch.setenv("AIRFLOW_CONN_DB", CONN)
    cfg = {"log_dir": str(tmp_path / "logs")} if with_log_dir else {}
    app_id = sched.submit(_checker(True, True), cfg)
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED, final
    assert list(sched.log_iter(app_id, "check", 1)) == ["inherited-as-expected\n"]
    sched.set_owner(app_id, "airflow:dag/task/run/-1#try=1")
    seen = _assert_private_and_clean(Path(local_root))
    if with_log_dir:
        seen += _assert_private_and_clean(tmp_path / "logs" / "test")
    assert seen >= 10  # status, plan, app, marker, lock, owner, logs... were all read


def test_env_drop_keeps_names_and_prefixes_from_the_replicas(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", SECRET)
    monkeypatch.setenv("AIRFLOW_CONN_DB", CONN)
    cfg = {"env_drop": ["AIRFLOW__CORE__FERNET_KEY", "AIRFLOW_CONN_*"]}
    app_id = sched.submit(_checker(False, False), cfg)
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED, final
    cfg = {"env_drop": ["AIRFLOW_CONN_*"]}
    app_id = sched.submit(_checker(True, False), cfg)
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED, final


def test_env_drop_with_a_bad_pattern_is_refused_at_dry_run(sched: LocalScheduler) -> None:
    with pytest.raises(
        AppValidationError, match=r"env_drop entry 'AIRFLOW_\*_KEY'.*prefix ending in `\*`"
    ):
        sched.submit_dryrun(_checker(True, True), {"env_drop": ["AIRFLOW_*_KEY"]})


@pytest.mark.parametrize("source", ["cli", "torchxconfig", "api"])
def test_env_drop_entries_are_trimmed_the_same_on_every_path(
    source: str, sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # issue 32: `-cfg 'env_drop=A; B'` and the API's ["A", " B"] kept " B", which matched
    # nothing, so B reached every replica while .torchxconfig stripped it
    from torchx_core.runner import config

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", SECRET)
    monkeypatch.setenv("AIRFLOW_CONN_DB", CONN)
    opts = sched.run_opts()
    spaced = "AIRFLOW__CORE__FERNET_KEY; AIRFLOW_CONN_*"
    if source == "cli":  # what `torchx run -cfg` does with the string
        cfg = opts.cfg_from_str(f"env_drop={spaced}", strict=True)
        assert cfg["env_drop"] == ["AIRFLOW__CORE__FERNET_KEY", " AIRFLOW_CONN_*"]
    elif source == "torchxconfig":
        (tmp_path / ".torchxconfig").write_text(f"[{sched.backend}]\nenv_drop = {spaced}\n")
        cfg = {}
        config.apply(sched.backend, cfg, dirs=[str(tmp_path)], run_opts=opts)
    else:
        cfg = {"env_drop": [" AIRFLOW__CORE__FERNET_KEY ", " AIRFLOW_CONN_*", " "]}
    app_id = sched.submit(_checker(False, False), cfg)
    final = sched.wait(app_id, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED, final
    assert list(sched.log_iter(app_id, "check", 1)) == ["inherited-as-expected\n"]


def test_env_drop_with_spaces_on_the_torchx_cli_keeps_variables_from_a_real_app(
    local_root: str, tmp_path: Path
) -> None:
    """The whole CLI path, in its own process: ``torchx run -cfg 'env_drop=A; B'``."""
    env = {
        **os.environ,
        "AIRFLOW__CORE__FERNET_KEY": SECRET,
        "AIRFLOW_CONN_DB": CONN,
        "TXB_KEPT": "kept-1",
        "TORCHX_LOCAL_ROOT": local_root,
        "HOME": str(tmp_path),  # no user .torchxconfig
    }
    drop = "env_drop=AIRFLOW__CORE__FERNET_KEY; AIRFLOW_CONN_*"
    proc = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "run", "-s", "local_cwd", "-cfg", drop,
         "utils.sh", "env"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    logs = proc.stdout + proc.stderr  # the CLI relays the replica's lines (`sh/0 NAME=value`)
    assert "sh/0 TXB_KEPT=kept-1" in logs  # the replica's environment was printed
    assert "AIRFLOW_CONN_DB=" not in logs and "AIRFLOW__CORE__FERNET_KEY=" not in logs
