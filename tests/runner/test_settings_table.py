"""Every step setting x every entry point x the values users get wrong: one verdict, one message.

The rule of a setting is :data:`torchx_core.runner.step_settings.SETTINGS`; each entry point
(Airflow operator, sensor, trigger and executor section, Prefect task, job block and worker job
variables, KFP ``launch``, the Python ``AppLifecycle``) exposes some settings under its own
parameter names. For each value below, an entry point must refuse exactly what the table refuses,
with the table's message for that parameter name (its own prefix allowed), and keep exactly what
the table reads (``" 5 "`` -> 5.0). Run options (an unknown key, a near-miss key) are checked the
same way at every entry point that takes them, the CLI's ``-cfg`` and ``.torchxconfig`` included.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import AppDef, Role

if "airflow" not in sys.modules and "AIRFLOW_HOME" not in os.environ:
    # Airflow is imported in this process: keep its config/log files out of ~/airflow
    _home = tempfile.mkdtemp(prefix="torchx-airflow-unit-")
    os.environ["AIRFLOW_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)

#: the values users get wrong (and right), typed and as config strings
VALUES: list[object] = [
    math.nan,
    "nan",
    math.inf,
    " inf ",
    -1,
    "-1",
    0,
    "0",
    "5",
    " 5 ",
    2.5,
    True,
    "yes",
    "five",
]

HANDLE = "fake://session/app-1"


def _app() -> AppDef:
    return AppDef("train", roles=[Role("r", image="", entrypoint="/bin/true")])


# -- the entry points: each builds itself with one setting and returns what it kept -----------


def _operator(param: str, value: object) -> object:
    from torchx_airflow import TorchXOperator

    attr = {"wait": "wait", "stream_logs": "stream_logs"}.get(param, param)
    op = TorchXOperator(task_id="t", component="utils.echo", scheduler="fake", **{param: value})
    return getattr(op, attr)


def _sensor(param: str, value: object) -> object:
    from torchx_airflow import TorchXSensor

    return getattr(TorchXSensor(task_id="s", app_handle=HANDLE, **{param: value}), param)


def _trigger(param: str, value: object) -> object:
    from torchx_airflow.trigger import TorchXTrigger

    return getattr(TorchXTrigger(HANDLE, **{param: value}), param)  # type: ignore[arg-type]


def _executor_section(param: str, value: object) -> object:
    from torchx_airflow.executors.config import ExecutorSettings

    return getattr(ExecutorSettings.from_section({param: value}), param)


def _executor_env(param: str, value: object) -> object:
    """``AIRFLOW__TORCHX_EXECUTOR__<KEY>=<value>``: Airflow's config hands the section strings."""
    return _executor_section(param, str(value))


def _prefect_task(param: str, value: object) -> object:
    from torchx_prefect._launch import validate_args

    return getattr(validate_args("utils.echo", scheduler="fake", **{param: value}), param)  # type: ignore[arg-type]


def _prefect_job(param: str, value: object) -> object:
    from torchx_prefect.blocks import TorchXJob, TorchXScheduler

    job = TorchXJob(
        scheduler=TorchXScheduler(scheduler="local_cwd"), component="utils.echo", **{param: value}
    )
    return getattr(job, param)


def _prefect_job_assigned(param: str, value: object) -> object:
    from torchx_prefect.blocks import TorchXJob, TorchXScheduler

    job = TorchXJob(scheduler=TorchXScheduler(scheduler="local_cwd"), component="utils.echo")
    setattr(job, param, value)  # pydantic validates on assignment too
    return getattr(job, param)


def _prefect_worker(param: str, value: object) -> object:
    from torchx_prefect.worker import TorchXWorkerJobConfiguration

    poll, stream = TorchXWorkerJobConfiguration(**{param: value}).settings()
    return {"poll_interval": poll, "stream_output": stream}[param]


def _kfp_launch(param: str, value: object) -> object:
    import yaml
    from kfp import compiler, dsl

    from torchx_kfp import launch

    @dsl.pipeline(name="table")
    def pipeline():  # type: ignore[no-untyped-def]  # KFP reads a str "None" as an artifact
        launch(_app(), scheduler="local_cwd", **{param: value})

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.yaml"
        compiler.Compiler().compile(pipeline, str(out))
        spec = yaml.safe_load(out.read_text())
    if param not in ("wait_interval", "unknown_state_timeout"):
        return _ACCEPTED
    (task,) = spec["root"]["dag"]["tasks"].values()
    return task["inputs"]["parameters"][param]["runtimeValue"]["constant"]


def _lifecycle(param: str, value: object) -> object:
    from support.fake_scheduler import JobTable, make_runner

    from torchx_core.runner.lifecycle import AppLifecycle

    kwargs: dict[str, Any] = {"owner": "me", param: value}
    return getattr(AppLifecycle(make_runner(JobTable()), "fake", **kwargs), param)


#: a value an entry point accepted without exposing what it kept
_ACCEPTED = object()

#: entry point -> its builder and {its parameter: the setting it is}
ENTRY_POINTS: dict[str, tuple[Callable[[str, object], object], dict[str, str]]] = {
    "airflow operator": (
        _operator,
        {
            "poll_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "log_tail_lines": "tail_lines",
            "defer_after": "defer_after",
            "stream_logs": "flag",
        },
    ),
    "airflow sensor": (
        _sensor,
        {"unknown_state_timeout": "unknown_timeout", "fail_fast": "flag"},
    ),
    "airflow trigger": (
        _trigger,
        {
            "poll_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "timeout_at": "timeout_at",
            "owner": "owner",
            "cancel_on_kill": "flag",
        },
    ),
    "airflow executor section": (
        _executor_section,
        {
            "poll_interval": "poll_interval",
            "unknown_timeout": "unknown_timeout",
            "kill_grace": "kill_grace",
            "tail_lines": "tail_lines",
            "submit_retries": "retries",
            "cancel_on_end": "flag",
            "warm_start": "flag",
        },
    ),
    "airflow executor environment": (
        _executor_env,
        {"poll_interval": "poll_interval", "kill_grace": "kill_grace", "tail_lines": "tail_lines"},
    ),
    "prefect task": (
        _prefect_task,
        {
            "poll_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "log_tail_lines": "tail_lines",
            "cancel_timeout": "cancel_timeout",
            "stream_logs": "flag",
        },
    ),
    "prefect job block": (
        _prefect_job,
        {
            "poll_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "timeout_seconds": "timeout",
            "cancel_timeout": "cancel_timeout",
            "log_tail_lines": "tail_lines",
            "stream_logs": "flag",
        },
    ),
    "prefect job block, assigned": (
        _prefect_job_assigned,
        {
            "poll_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "timeout_seconds": "timeout",
            "log_tail_lines": "tail_lines",
        },
    ),
    "prefect worker job variables": (
        _prefect_worker,
        {"poll_interval": "poll_interval", "stream_output": "flag"},
    ),
    "kfp launch": (
        _kfp_launch,
        {
            "wait_interval": "poll_interval",
            "unknown_state_timeout": "unknown_timeout",
            "retries": "retries",
            "enable_caching": "flag",
        },
    ),
    "python AppLifecycle": (
        _lifecycle,
        {
            "poll_interval": "poll_interval",
            "unknown_timeout": "unknown_timeout",
            "tail_lines": "tail_lines",
            "max_log_replicas": "max_log_replicas",
            "owner": "owner",
        },
    ),
}

CASES = [
    pytest.param(entry, param, setting, id=f"{entry}-{param}")
    for entry, (_, params) in ENTRY_POINTS.items()
    for param, setting in params.items()
]


def _same(kept: object, expected: object) -> bool:
    if kept is _ACCEPTED:
        return True
    if isinstance(expected, float) and isinstance(kept, (int, float)):
        return kept == expected or (math.isinf(expected) and kept == expected)
    return kept == expected and type(kept) is type(expected)


@pytest.mark.parametrize(("entry", "param", "setting"), CASES)
def test_every_entry_point_gives_the_tables_verdict_and_message(
    entry: str, param: str, setting: str
) -> None:
    build, _ = ENTRY_POINTS[entry]
    rule = SETTINGS[setting]
    wrong = []
    for value in VALUES:
        given = str(value) if entry == "airflow executor environment" else value
        problem = rule.problem(given, param)
        try:
            kept = build(param, given)
        except Exception as e:  # noqa: BLE001 - the verdict is what we compare
            if problem is None or problem not in str(e):
                wrong.append(f"{given!r}: refused with {e!s:.300} (table: {problem})")
            continue
        if problem is not None:
            wrong.append(f"{given!r}: accepted as {kept!r} (table: {problem})")
        elif not _same(kept, rule.parse(given)):
            wrong.append(f"{given!r}: kept {kept!r}, the table reads {rule.parse(given)!r}")
    assert not wrong, f"{entry} {param}:\n" + "\n".join(wrong)


# -- run options: an unknown key and a near-miss key ---------------------------------------


def _runner_dryrun(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_core.runner import get_runner

    with get_runner() as runner:
        runner.dryrun(_app(), "local_cwd", cfg=cfg)


def _lifecycle_attach(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_core.runner import get_runner
    from torchx_core.runner.lifecycle import AppLifecycle

    with get_runner() as runner:
        AppLifecycle(runner, "local_cwd", owner="me", cfg=cfg).attach(_app(), "table-test")


def _operator_execute(cfg: dict[str, Any], tmp: Path) -> None:
    from support.airflow_fakes import FakeStore, make_context

    from torchx_airflow import TorchXOperator
    from torchx_core.runner import get_runner

    op = TorchXOperator(
        task_id="t", app=_app(), scheduler="local_cwd", cfg=cfg, runner_factory=get_runner
    )
    op.execute(make_context(FakeStore()))  # type: ignore[arg-type]


def _executor_config(cfg: dict[str, Any], tmp: Path) -> None:
    """The executor's path: the task's ``executor_config`` cfg over the section's, then the
    app is submitted through the lifecycle (whose dry run checks it)."""
    from torchx_airflow.executors.config import ExecutorSettings

    task = ExecutorSettings.from_section({"scheduler": "local_cwd"}).task
    merged = task.override({"torchx": {"cfg": cfg}})
    _runner_dryrun(merged.cfg, tmp)


def _executor_section_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_airflow.executors.config import ExecutorSettings

    section = {"scheduler": "local_cwd", "cfg": json.dumps(cfg)}
    _runner_dryrun(ExecutorSettings.from_section(section).task.cfg, tmp)


def _prefect_task_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_prefect._launch import check_run_options

    check_run_options("local_cwd", cfg)


def _prefect_block_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_prefect.blocks import TorchXScheduler

    TorchXScheduler(scheduler="local_cwd", cfg=cfg)


def _prefect_worker_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_prefect.worker import TorchXWorkerJobConfiguration, _lifecycle

    configuration = TorchXWorkerJobConfiguration(scheduler="local_cwd", cfg=cfg)
    _lifecycle(SimpleNamespace(id="flow-run"), configuration)  # type: ignore[arg-type]


def _kfp_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_kfp import launch

    launch(_app(), scheduler="local_cwd", cfg=cfg)


def _cli_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_core.cli.main import run_main

    text = ",".join(f"{k}={v}" for k, v in cfg.items())
    try:
        rc = run_main(["run", "--dryrun", "-s", "local_cwd", "-cfg", text, "utils.echo"])
    except SystemExit as e:
        rc = int(e.code or 0)
    if rc != 0:
        raise RuntimeError(f"torchx run exited {rc}")


def _torchxconfig_cfg(cfg: dict[str, Any], tmp: Path) -> None:
    from torchx_core.runner import config

    lines = "".join(f"{k} = {v}\n" for k, v in cfg.items())
    (tmp / ".torchxconfig").write_text(f"[local_cwd]\n{lines}")
    config.apply("local_cwd", {}, dirs=[str(tmp)])


RUN_OPTION_ENTRY_POINTS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "python Runner.dryrun": _runner_dryrun,
    "python AppLifecycle.attach": _lifecycle_attach,
    "airflow operator": _operator_execute,
    "airflow executor_config": _executor_config,
    "airflow executor section": _executor_section_cfg,
    "prefect task": _prefect_task_cfg,
    "prefect scheduler block": _prefect_block_cfg,
    "prefect worker job variables": _prefect_worker_cfg,
    "kfp launch": _kfp_cfg,
    "cli -cfg": _cli_cfg,
    ".torchxconfig": _torchxconfig_cfg,
}


@pytest.mark.parametrize("entry", list(RUN_OPTION_ENTRY_POINTS))
@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("grace_periodd", " Did you mean: 'grace_period'?"),  # a near miss
        ("no_such_opt", ""),  # unknown
    ],
)
def test_an_unknown_run_option_is_refused_with_the_same_message_everywhere(
    entry: str,
    key: str,
    hint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchx_core.runner import get_runner

    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(tmp_path / "root"))
    with get_runner() as runner:
        expected = runner.scheduler_run_opts("local_cwd").unknown_message(key)
    assert expected.startswith(f"unknown run option {key!r}.{hint} Valid options: ")
    with pytest.raises(Exception) as e:
        RUN_OPTION_ENTRY_POINTS[entry]({key: "1"}, tmp_path)
    message = str(e.value) + capsys.readouterr().err
    cause = e.value.__cause__
    while cause is not None:
        message += str(cause)
        cause = cause.__cause__
    assert expected in message, message
