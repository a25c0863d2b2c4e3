"""The local scheduler with real processes: outcomes, retries, cancel, faults, logs, concurrency."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from local_helpers import live_processes_with_env, wait_until

from torchx_core import specs
from torchx_core.schedulers.api import AppValidationError, Stream
from torchx_core.schedulers.local import _state
from torchx_core.schedulers.local.scheduler import LocalScheduler, create_dir_scheduler
from torchx_core.specs import AppState, RetryPolicy

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[3]
PROBE = (
    "import sys; from torchx_core.schedulers.local.scheduler import create_scheduler;"
    " print(create_scheduler('x').describe(sys.argv[1]).state.name)"
)


def sh_app(
    script: str, num_replicas: int = 1, name: str = "app", **role_kw: object
) -> specs.AppDef:
    role = specs.Role(
        name="r",
        image="unused",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=num_replicas,
        **role_kw,  # type: ignore[arg-type]
    )
    return specs.AppDef(name=name, roles=[role])


def run(sched: LocalScheduler, app: specs.AppDef, cfg: dict | None = None, timeout: float = 60):
    app_id = sched.submit(app, cfg or {})
    desc = sched.wait(app_id, timeout)
    assert desc is not None
    assert desc.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED), desc
    return app_id, desc


def logs(
    sched: LocalScheduler, app_id: str, role: str = "r", k: int = 0, streams: Stream | None = None
) -> list[str]:
    return list(sched.log_iter(app_id, role, k, streams=streams))


def test_success_multi_replica_logs_and_states(sched: LocalScheduler) -> None:
    app_id, desc = run(sched, sh_app("echo hello $TORCHX_REPLICA_IDX", num_replicas=3))
    assert desc.state == AppState.SUCCEEDED
    assert desc.num_restarts == 0
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.SUCCEEDED] * 3
    for k in range(3):
        assert logs(sched, app_id, k=k) == [f"hello {k}\n"]
    assert desc.roles[0].name == "r"


def test_list_and_run_options_report_what_the_app_was_submitted_with(sched: LocalScheduler) -> None:
    """``list`` gives created time, owner and replica counts from its one pass; ``run_options``
    the resolved run options kept with the app (the dashboard shows both)."""
    app_id, _ = run(sched, sh_app("true", num_replicas=2), {"grace_period": 1.5})
    assert sched.set_owner(app_id, "airflow:d/t/r/-1#try=1")
    (row,) = [a for a in sched.list() if a.app_id == app_id]
    assert row.owner == "airflow:d/t/r/-1#try=1" and row.replicas == {"SUCCEEDED": 2}
    assert row.created is not None and abs(row.created - time.time()) < 600
    opts = sched.run_options(app_id)
    assert opts is not None and opts["grace_period"] == 1.5 and "log_dir" in opts
    assert sched.run_options("nosuch-app") is None


def test_failure_reports_exit_code_and_stderr_tail(sched: LocalScheduler) -> None:
    _, desc = run(sched, sh_app("echo starting; echo boom >&2; exit 3"))
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica r/0 exited with code 3"
    err = json.loads(desc.structured_error_msg)
    assert err["exit_code"] == 3 and err["signal"] is None
    assert err["role"] == "r" and err["replica_id"] == 0
    assert err["stderr_tail"] == ["boom"]
    replica = desc.roles_statuses[0].replicas[0]
    assert replica.state == AppState.FAILED
    assert json.loads(replica.structured_error_msg)["exit_code"] == 3


def test_failure_includes_reply_file(sched: LocalScheduler) -> None:
    script = 'echo \'{"message": "oops"}\' > "$TORCHELASTIC_ERROR_FILE"; exit 1'
    _, desc = run(sched, sh_app(script))
    assert json.loads(desc.structured_error_msg)["error_file"] == {"message": "oops"}


def test_replica_killed_by_signal_is_failed_with_signal_named(sched: LocalScheduler) -> None:
    app = sh_app(
        'if [ "$TORCHX_REPLICA_IDX" = 1 ]; then kill -KILL $$$$; fi; sleep 5', num_replicas=2
    )
    _, desc = run(sched, app)
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica r/1 killed by SIGKILL"
    assert json.loads(desc.structured_error_msg)["signal"] == "SIGKILL"
    states = [r.state for r in desc.roles_statuses[0].replicas]
    assert states == [AppState.CANCELLED, AppState.FAILED]  # the survivor was stopped


def test_missing_entrypoint_fails_with_clear_message(sched: LocalScheduler) -> None:
    app = specs.AppDef("x", roles=[specs.Role("r", image="", entrypoint="no-such-binary-xyz")])
    _, desc = run(sched, app)
    assert desc.state == AppState.FAILED
    assert "no-such-binary-xyz" in desc.msg and "not found" in desc.msg


# -- retries ---------------------------------------------------------------------------------


def _flaky(marker_dir: Path, fail_replica: int, sleep: float = 0.0, wait_for: str = "") -> str:
    """Prints `start <replica>` per attempt; `fail_replica` fails on its first attempt only
    (after the file ``wait_for`` exists, when given: other replicas have started)."""
    wait = (
        f"for i in $(seq 600); do [ -e {wait_for} ] && break; sleep 0.05; done" if wait_for else ""
    )
    return textwrap.dedent(
        f"""
        echo start $TORCHX_REPLICA_IDX $$$$  # $$ escapes $ in macros
        failed={marker_dir}/failed.$TORCHX_ROLE_NAME
        if [ "$TORCHX_REPLICA_IDX" = {fail_replica} ] && [ ! -e "$failed" ]; then
            {wait}
            touch "$failed"; exit 7
        fi
        sleep {sleep}
        """
    )


def _starts(sched: LocalScheduler, app_id: str, role: str, k: int) -> int:
    return sum(line.startswith("start ") for line in logs(sched, app_id, role, k, Stream.STDOUT))


def test_retry_replica_restarts_only_the_failed_replica(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    app = sh_app(
        _flaky(tmp_path, 1, sleep=1.0),
        num_replicas=3,
        max_retries=1,
        retry_policy=RetryPolicy.REPLICA,
    )
    app_id, desc = run(sched, app)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert [_starts(sched, app_id, "r", k) for k in range(3)] == [1, 2, 1]
    # the replacement kept replica id 1
    assert all(line.startswith("start 1 ") for line in logs(sched, app_id, "r", 1, Stream.STDOUT))


def _two_roles(tmp_path: Path, policy: RetryPolicy) -> specs.AppDef:
    # a/0 fails once, but only after b has printed its first `start` (no race on a loaded machine)
    b_up = tmp_path / "b-up"
    flaky = specs.Role(
        "a",
        image="",
        entrypoint="sh",
        args=["-c", _flaky(tmp_path, 0, sleep=0.5, wait_for=str(b_up))],
        num_replicas=2,
        max_retries=1,
        retry_policy=policy,
    )
    steady = specs.Role(
        "b",
        image="",
        entrypoint="sh",
        args=["-c", f"echo start $TORCHX_REPLICA_IDX; touch {b_up}; sleep 1.5"],
        max_retries=1,
        retry_policy=policy,
    )
    return specs.AppDef("two", roles=[flaky, steady])


def test_retry_role_restarts_the_role_only(sched: LocalScheduler, tmp_path: Path) -> None:
    app_id, desc = run(sched, _two_roles(tmp_path, RetryPolicy.ROLE))
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert [_starts(sched, app_id, "a", k) for k in range(2)] == [2, 2]
    assert _starts(sched, app_id, "b", 0) == 1


def test_retry_application_restarts_every_role(sched: LocalScheduler, tmp_path: Path) -> None:
    app_id, desc = run(sched, _two_roles(tmp_path, RetryPolicy.APPLICATION))
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert [_starts(sched, app_id, "a", k) for k in range(2)] == [2, 2]
    assert _starts(sched, app_id, "b", 0) == 2


def test_retries_exhausted_fails(sched: LocalScheduler) -> None:
    app = sh_app("echo try; exit 2", max_retries=2, retry_policy=RetryPolicy.REPLICA)
    app_id, desc = run(sched, app)
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 2
    assert desc.msg == "replica r/0 exited with code 2 (after 2 restart(s))"
    assert logs(sched, app_id, streams=Stream.STDOUT) == ["try\n"] * 3


# -- cancel, delete, faults ------------------------------------------------------------------


def test_cancel_kills_whole_process_groups(sched: LocalScheduler, local_root: str) -> None:
    app_id = sched.submit(sh_app("sleep 100 & sleep 100", num_replicas=2), {})
    marker = f"{_state.ROOT_ENV}={local_root}"
    # two replicas, each a shell with two sleeps (the shell may exec the last one)
    assert wait_until(lambda: len(live_processes_with_env(marker)) >= 4)
    sched.cancel(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.CANCELLED] * 2
    assert wait_until(lambda: not live_processes_with_env(marker), timeout=5)
    sched.cancel(app_id)  # idempotent
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]


def test_cancel_kills_descendants_that_left_the_group(
    sched: LocalScheduler, local_root: str
) -> None:
    # `setsid` puts the sleep in a new session: killing the replica's process group misses it
    app_id = sched.submit(sh_app("setsid sleep 100 & sleep 100"), {})
    marker = f"{_state.ROOT_ENV}={local_root}"
    assert wait_until(lambda: len(live_processes_with_env(marker)) >= 2)
    sched.cancel(app_id)
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    assert wait_until(lambda: not live_processes_with_env(marker), timeout=5)


def test_app_end_kills_daemonized_leftovers(sched: LocalScheduler, local_root: str) -> None:
    app_id = sched.submit(sh_app("setsid sleep 100 & echo started"), {})
    marker = f"{_state.ROOT_ENV}={local_root}"
    desc = sched.wait(app_id, timeout=30)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert wait_until(lambda: not live_processes_with_env(marker), timeout=5)


def test_cancel_escalates_to_sigkill(sched: LocalScheduler, local_root: str) -> None:
    app = sh_app("trap '' TERM; echo ready; while true; do sleep 0.1; done")
    app_id = sched.submit(app, {"grace_period": 0.3})
    assert wait_until(lambda: logs(sched, app_id) == ["ready\n"])
    sched.cancel(app_id)
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    assert wait_until(
        lambda: not live_processes_with_env(f"{_state.ROOT_ENV}={local_root}"), timeout=5
    )


def test_delete_cancels_and_removes_state(sched: LocalScheduler) -> None:
    app_id = sched.submit(sh_app("sleep 100"), {})
    sched.delete(app_id)
    assert sched.describe(app_id) is None
    assert not os.path.exists(os.path.join(sched.root, app_id))
    assert app_id not in [a.app_id for a in sched.list()]


def test_app_survives_sigkill_of_launcher_and_is_queryable_elsewhere(
    local_root: str, tmp_path: Path
) -> None:
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        textwrap.dedent(
            """
            import os, signal, sys
            from torchx_core import specs
            from torchx_core.schedulers.local.scheduler import create_scheduler
            app = specs.AppDef("orphan", roles=[specs.Role(
                "r", image="", entrypoint="sh", args=["-c", "sleep 1; echo finished"])])
            app_id = create_scheduler("s").submit(app, {})
            print(app_id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(launcher)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    app_id = proc.stdout.strip()
    # another process (this one) waits for it and reads its logs
    sched = LocalScheduler("other", root=local_root)
    desc = sched.wait(app_id, 30)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert logs(sched, app_id) == ["finished\n"]
    # and a third, fresh process can describe it
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, app_id],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    assert probe.stdout.strip() == "SUCCEEDED", probe.stderr


def test_dead_supervisor_is_reported_and_its_replicas_killed(
    sched: LocalScheduler, local_root: str
) -> None:
    app_id = sched.submit(sh_app("echo up; sleep 100"), {})
    assert wait_until(lambda: logs(sched, app_id) == ["up\n"])
    status = _state.read_json(os.path.join(sched.root, app_id, "status.json"))
    assert status is not None
    os.kill(status["sup_pid"], signal.SIGKILL)
    assert wait_until(lambda: not _state.supervisor_alive(os.path.join(sched.root, app_id)))
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert "supervisor" in desc.msg and "died" in desc.msg
    assert wait_until(
        lambda: not live_processes_with_env(f"{_state.ROOT_ENV}={local_root}"), timeout=5
    )


def test_200_apps_from_16_threads_all_succeed_with_distinct_ids(sched: LocalScheduler) -> None:
    app = sh_app("echo ok", name="many")
    with ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(lambda _: sched.submit(app, {}), range(200)))
    assert len(set(ids)) == 200
    states = {app_id: sched.wait(app_id, 60).state for app_id in ids}  # type: ignore[union-attr]
    assert set(states.values()) == {AppState.SUCCEEDED}
    listed = {a.app_id: a.state for a in sched.list()}
    assert all(listed[i] == AppState.SUCCEEDED for i in ids)


# -- logs ------------------------------------------------------------------------------------


def test_log_iter_tail_follows_until_the_app_ends(sched: LocalScheduler) -> None:
    app_id = sched.submit(
        sh_app("for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done; printf tail"), {}
    )
    lines = list(sched.log_iter(app_id, "r", 0, should_tail=True))
    assert lines == [f"line {i}\n" for i in range(1, 6)] + ["tail"]
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_log_iter_streams_and_regex(sched: LocalScheduler) -> None:
    app_id, _ = run(sched, sh_app("echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2"))
    assert logs(sched, app_id, streams=Stream.STDOUT) == ["out1\n", "out2\n"]
    assert logs(sched, app_id, streams=Stream.STDERR) == ["err1\n"]
    assert logs(sched, app_id, streams=Stream.COMBINED) == ["out1\n", "err1\n", "out2\n"]
    assert logs(sched, app_id) == ["out1\n", "err1\n", "out2\n"]
    assert list(sched.log_iter(app_id, "r", 0, regex=r"^out")) == ["out1\n", "out2\n"]


def test_log_iter_of_silent_replica_is_empty(sched: LocalScheduler) -> None:
    app_id, _ = run(sched, sh_app("true"))
    assert logs(sched, app_id) == []
    assert list(sched.log_iter(app_id, "r", 0, should_tail=True)) == []


# -- macros, env, images, workspaces ----------------------------------------------------------


def test_macros_and_env(sched: LocalScheduler, tmp_path: Path) -> None:
    script = (
        'echo "$1 $2 $3 $${'
        + specs.macros.rank0_env
        + '}"; echo "$TORCHX_RANK0_HOST $MASTER_ADDR $MASTER_PORT";'
        ' echo "$TORCHX_APP_ID $TORCHX_ROLE_NAME $TORCHX_REPLICA_IDX $TORCHX_JOB_ID $FROM_ROLE"'
    )
    role = specs.Role(
        "r",
        image="",
        entrypoint="sh",
        num_replicas=2,
        args=[
            "-c",
            script,
            "sh",
            specs.macros.app_id,
            specs.macros.replica_id,
            specs.macros.img_root,
        ],
        env={"FROM_ROLE": f"v{specs.macros.replica_id}"},
    )
    app_id, desc = run(sched, specs.AppDef("macros", roles=[role]))
    assert desc.state == AppState.SUCCEEDED
    for k in range(2):
        first, second, third = logs(sched, app_id, k=k, streams=Stream.STDOUT)
        assert first == f"{app_id} {k} {os.getcwd()} localhost\n"
        host, addr, port = second.split()
        assert (host, addr) == ("localhost", "localhost") and port.isdigit()
        assert third == f"{app_id} r {k} local_cwd://test/{app_id} v{k}\n"


def test_local_dir_scheduler_runs_in_image_dir(local_root: str, tmp_path: Path) -> None:
    sched = create_dir_scheduler("test", root=local_root)
    app = specs.AppDef("pwd", roles=[specs.Role("r", image=str(tmp_path), entrypoint="pwd")])
    app_id, desc = run(sched, app)
    assert desc.state == AppState.SUCCEEDED
    assert logs(sched, app_id) == [f"{tmp_path}\n"]
    bad = specs.AppDef(
        "pwd", roles=[specs.Role("r", image=str(tmp_path / "missing"), entrypoint="pwd")]
    )
    with pytest.raises(AppValidationError, match="not an existing directory"):
        sched.submit(bad, {})


def test_workspace_is_copied_into_the_app_dir_and_run_there(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "hello.sh").write_text("echo from workspace; pwd\n")
    app = specs.AppDef("ws", roles=[specs.Role("r", image="", entrypoint="sh", args=["hello.sh"])])
    app_id = sched.submit(app, {}, workspace=str(ws))
    desc = sched.wait(app_id, 30)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    app_dir = os.path.realpath(os.path.join(sched.root, app_id))
    assert logs(sched, app_id) == ["from workspace\n", f"{app_dir}/workspace\n"]
    assert not os.listdir(os.path.join(sched.root, _state.STAGING))


def test_log_dir_option_uses_torchx_layout_and_keeps_app_findable_by_id(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    """TorchX 0.7.0 writes ``{log_dir}/{session}/{app_id}/{role}/{k}/stdout.log`` (and
    ``stderr.log``, ``combined.log``, ``error.json``) and, once the logs are closed, a ``SUCCESS``
    file holding the final state; users' scripts read those paths."""
    log_dir = tmp_path / "logs"
    app = sh_app("echo hi; echo oops >&2", num_replicas=2)
    app_id, desc = run(sched, app, {"log_dir": str(log_dir)})
    assert desc.state == AppState.SUCCEEDED
    app_dir = log_dir / sched.session_name / app_id
    assert (app_dir / "r" / "0" / "stdout.log").read_text() == "hi\n"
    assert (app_dir / "r" / "0" / "stderr.log").read_text() == "oops\n"
    assert sorted((app_dir / "r" / "1" / "combined.log").read_text().splitlines()) == ["hi", "oops"]
    success = json.loads((app_dir / "SUCCESS").read_text())
    assert success["app_id"] == app_id and success["final_state"] == "SUCCEEDED"
    assert [r["exitcode"] for r in success["roles"]["r"]] == [0, 0]
    assert success["roles"]["r"][0]["stdout"] == str(app_dir / "r" / "0" / "stdout.log")
    assert logs(sched, app_id, streams=Stream.STDERR) == ["oops\n"]
    assert os.path.islink(os.path.join(sched.root, app_id))
    sched.delete(app_id)
    assert not app_dir.exists() and not os.path.lexists(os.path.join(sched.root, app_id))


def test_log_dir_reply_file_is_in_the_replica_log_dir(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    app_id, _ = run(sched, sh_app('echo "$TORCHELASTIC_ERROR_FILE"'), {"log_dir": str(tmp_path)})
    assert logs(sched, app_id) == [
        f"{tmp_path / sched.session_name / app_id / 'r' / '0' / 'error.json'}\n"
    ]


def test_wait_with_timeout_returns_current_status_and_shares_one_waiter(
    sched: LocalScheduler,
) -> None:
    import threading

    app_id = sched.submit(sh_app("sleep 3"), {})
    # the supervisor may take a moment to start on a loaded machine: PENDING until then
    assert wait_until(lambda: sched.describe(app_id).state == AppState.RUNNING)  # type: ignore[union-attr]
    for _ in range(3):
        desc = sched.wait(app_id, timeout=0.05)
        assert desc is not None and desc.state == AppState.RUNNING
    waiters = [t for t in threading.enumerate() if t.name == "torchx-local-wait"]
    assert len(waiters) == 1
    assert sched.wait(app_id, timeout=30).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert wait_until(
        lambda: not [t for t in threading.enumerate() if t.name == "torchx-local-wait"]
    )


_START_MODE_SCRIPT = """
import os, sys
from torchx_core import specs
from torchx_core.schedulers.local import _launch
from torchx_core.schedulers.local.scheduler import create_scheduler
assert _launch.choose_mode() == sys.argv[1], _launch.choose_mode()
sched = create_scheduler("t")
role = specs.Role(
    "r", image="unused", entrypoint="sh", args=["-c", "echo $TORCHX_REPLICA_IDX"], num_replicas=2
)
app_id = sched.submit(specs.AppDef("app", roles=[role]), {})
desc = sched.wait(app_id, 60)
print(desc.state.name, list(sched.log_iter(app_id, "r", 1)))
"""


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_both_supervisor_start_modes(local_root: str, mode: str) -> None:
    # a fresh, single-threaded launcher: fork mode is only chosen when that is safe, and the
    # test process has threads of other tests
    import subprocess
    import sys

    from torchx_core.schedulers.local import _launch

    env = {**os.environ, _launch.MODE_ENV: mode}
    out = subprocess.run(
        [sys.executable, "-c", _START_MODE_SCRIPT, mode],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SUCCEEDED ['1\\n']"


def test_early_failure_while_spawning_many_replicas(sched: LocalScheduler) -> None:
    app = sh_app('[ "$TORCHX_REPLICA_IDX" = 0 ] && exit 5; sleep 100', num_replicas=64)
    _, desc = run(sched, app)
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica r/0 exited with code 5"
    states = [r.state for r in desc.roles_statuses[0].replicas]
    assert states[0] == AppState.FAILED and set(states[1:]) == {AppState.CANCELLED}


def test_cancel_many_running_replicas(sched: LocalScheduler, local_root: str) -> None:
    app_id = sched.submit(sh_app("echo up; sleep 100", num_replicas=200), {})
    assert wait_until(lambda: sched.describe(app_id).state == AppState.RUNNING)  # type: ignore[union-attr]
    assert wait_until(lambda: logs(sched, app_id, k=199) == ["up\n"])
    sched.cancel(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert wait_until(
        lambda: not live_processes_with_env(f"{_state.ROOT_ENV}={local_root}"), timeout=5
    )


def test_submit_garbage_collects_old_finished_apps(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_id, _ = run(sched, sh_app("true"))
    os.remove(os.path.join(sched.root, _state.GC_STAMP))  # the last collection was "long ago"
    monkeypatch.setenv(_state.TTL_ENV, "0")
    new_id, _ = run(sched, sh_app("true"))
    assert sched.describe(old_id) is None
    assert sched.describe(new_id) is not None


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_cancel_right_after_submit(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch, local_root: str, mode: str
) -> None:
    monkeypatch.setenv("TORCHX_LOCAL_SUPERVISOR", mode)
    for _ in range(3):
        app_id = sched.submit(sh_app("sleep 100", num_replicas=4), {})
        sched.cancel(app_id)  # may run before the supervisor has even started
        assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    assert wait_until(
        lambda: not live_processes_with_env(f"{_state.ROOT_ENV}={local_root}"), timeout=5
    )


@pytest.mark.parametrize("num_replicas", [8, 16, 64])
def test_replicas_that_end_while_others_are_spawned(
    sched: LocalScheduler, num_replicas: int
) -> None:
    # the supervisor handles exits every few spawns; when every replica has ended by the time
    # the last one is started, it must still finish (not wait for an exit that already came)
    app = specs.AppDef(
        "fast", roles=[specs.Role("r", image="", entrypoint="/bin/true", num_replicas=num_replicas)]
    )
    for _ in range(5):
        _, desc = run(sched, app, timeout=30)
        assert desc.state == AppState.SUCCEEDED


def test_entrypoint_that_cannot_be_executed_fails_the_app(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-program"
    bad.write_bytes(b"\x00\x01garbage")
    bad.chmod(0o755)
    app = specs.AppDef(
        "bad", roles=[specs.Role("r", image="", entrypoint=str(bad), num_replicas=2)]
    )
    _, desc = run(sched, app)
    assert desc.state == AppState.FAILED
    assert desc.msg.startswith("replica r/0 could not start:"), desc.msg
    assert json.loads(desc.structured_error_msg)["exit_code"] == 127


def test_status_reads_only_the_status_file(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchx_core.schedulers.local.scheduler import create_scheduler

    app_id, _ = run(sched, sh_app("true"))
    fresh = create_scheduler("other")  # no cached AppDef, like another process
    read: list[str] = []
    real_json, real_status = _state.read_json, _state._load_status

    def recording(path: str) -> object:
        read.append(os.path.basename(path))
        return real_json(path)

    def recording_status(app_dir: str, app_id: str) -> object:
        read.append("status.json")
        return real_status(app_dir, app_id)

    monkeypatch.setattr(_state, "read_json", recording)
    monkeypatch.setattr(_state, "_load_status", recording_status)
    desc = fresh.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert read == ["status.json"]
    assert [r.name for r in desc.roles] == ["r"]  # the AppDef is read on first use of roles
    assert read == ["status.json", "app.json"]
