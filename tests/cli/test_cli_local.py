"""The torchx CLI end to end on the real local scheduler, each command in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.local]


@pytest.fixture
def env(tmp_path: Path, isolated_config: Path) -> dict[str, str]:
    """Environment of the CLI processes: a private local-scheduler root, no colors."""
    e = dict(os.environ)
    e["TORCHX_LOCAL_ROOT"] = str(tmp_path / "local-root")
    e["PATH"] = os.path.dirname(sys.executable) + os.pathsep + e.get("PATH", "")
    e["NO_COLOR"] = "1"
    return e


def torchx(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


SLEEPER = textwrap.dedent(
    '''
    import torchx_core.specs as specs


    def sleeper(seconds: int = 60) -> specs.AppDef:
        """Sleeps, printing a line first.

        Args:
            seconds: how long to sleep
        """
        return specs.AppDef(
            name="sleeper",
            roles=[specs.Role(name="sleep", image="/", entrypoint="sh",
                              args=["-c", f"echo started; sleep {seconds}"], num_replicas=2)],
        )
    '''
)


def _write_sleeper(directory: Path) -> None:
    (directory / "comp.py").write_text(SLEEPER)


def test_run_streams_prefixed_logs_and_other_processes_see_the_app(env: dict[str, str]) -> None:
    p = torchx(
        env, "run", "-s", "local_cwd", "utils.echo", "--msg", "hi there", "--num_replicas", "2"
    )
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip().splitlines()[-1]
    assert handle.startswith("local_cwd://torchx/echo-")
    assert "echo/0 hi there" in p.stderr and "echo/1 hi there" in p.stderr
    assert "Job finished: SUCCEEDED" in p.stderr

    st = torchx(env, "status", handle, "--json")
    assert st.returncode == 0, st.stderr
    data = json.loads(st.stdout)
    assert data["state"] == "SUCCEEDED" and len(data["roles"][0]["replicas"]) == 2

    log = torchx(env, "log", f"{handle}/echo/1")
    assert log.stdout == "echo/1 hi there\n"

    ls = torchx(env, "list", "-s", "local_cwd")
    assert handle in ls.stdout and "SUCCEEDED" in ls.stdout

    desc = torchx(env, "describe", handle, "--json")
    assert json.loads(desc.stdout)["roles"][0]["entrypoint"] == "echo"

    assert torchx(env, "delete", handle).returncode == 0
    gone = torchx(env, "status", handle)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


def test_failing_app_exits_nonzero_with_status(env: dict[str, str], tmp_path: Path) -> None:
    p = torchx(
        env,
        "run",
        "-s",
        "local_cwd",
        "utils.touch",
        "--file",
        str(tmp_path / "no" / "such" / "dir" / "f"),
    )
    assert p.returncode == 1
    assert "Job finished: FAILED" in p.stderr
    assert "touch/0" in p.stderr  # the replica's own error, streamed
    assert "Traceback" not in p.stderr


def _run_sleeper_in_foreground(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    """Starts `torchx run comp.py:sleeper` (which waits) and returns it once the app RUNS."""
    _write_sleeper(cwd)
    # a shell runs background jobs with SIGINT ignored, and children inherit that: give the CLI
    # a normal Ctrl-C whatever started the test run
    launch = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
        "sys.argv = ['torchx', 'run', '-s', 'local_cwd', 'comp.py:sleeper'];"
        "runpy.run_module('torchx_core.cli.main', run_name='__main__')"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", launch],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        assert p.stdout is not None
        handle = p.stdout.readline().strip()
        assert handle.startswith("local_cwd://torchx/sleeper-"), handle
        deadline = time.monotonic() + 60
        while "RUNNING" not in torchx(env, "status", handle).stdout:
            assert time.monotonic() < deadline, "app never reached RUNNING"
            time.sleep(0.1)
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p, handle


def test_cancel_from_another_process_and_file_component(
    env: dict[str, str], isolated_config: Path
) -> None:
    runner, handle = _run_sleeper_in_foreground(env, isolated_config)
    try:
        assert torchx(env, "cancel", handle).returncode == 0
        rc = runner.wait(timeout=60)
        err = runner.stderr.read() if runner.stderr else ""
        assert rc == 1, err  # the launching `torchx run` sees CANCELLED
        assert "Job finished: CANCELLED" in err
        assert "sleep/0 started" in err and "sleep/1 started" in err
        data = json.loads(torchx(env, "status", handle, "--json").stdout)
        assert data["state"] == "CANCELLED"
        assert torchx(env, "cancel", handle).returncode == 0  # idempotent
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_tail_follows_until_the_app_ends(env: dict[str, str], isolated_config: Path) -> None:
    launch = torchx(env, "run", "-s", "local_cwd", "--dryrun", "utils.echo", "--msg", "dry")
    assert launch.returncode == 0 and "=== SCHEDULER REQUEST ===" in launch.stdout
    (isolated_config / "ticker.py").write_text(
        textwrap.dedent(
            '''
            import torchx_core.specs as specs


            def ticker(n: int = 5) -> specs.AppDef:
                """Prints n ticks, one every 0.2 s.

                Args:
                    n: number of ticks
                """
                return specs.AppDef(
                    name="ticker",
                    roles=[specs.Role(
                        name="tick", image="/", entrypoint="sh",
                        args=["-c", f"for i in $(seq {n}); do echo tick $i; sleep 0.2; done"],
                    )],
                )
            '''
        )
    )
    # launch detached through Python (the CLI would wait), then follow with `torchx log -t`
    code = (
        "from torchx_core.runner import get_runner\n"
        "with get_runner() as r:\n"
        "    print(r.run_component('ticker.py:ticker', ['--n', '5'], 'local_cwd'))\n"
    )
    started = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=isolated_config,
        check=True,
    )
    handle = started.stdout.strip()
    tail = torchx(env, "log", "-t", handle)
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines() == [f"tick/0 tick {i}" for i in range(1, 6)]
    assert json.loads(torchx(env, "status", handle, "--json").stdout)["state"] == "SUCCEEDED"


def test_runopts_and_configure_for_local(env: dict[str, str], isolated_config: Path) -> None:
    p = torchx(env, "runopts", "local_cwd")
    assert p.returncode == 0 and "local_cwd" in p.stdout
    assert torchx(env, "configure", "-s", "local_cwd", "--all").returncode == 0
    assert "[local_cwd]" in (isolated_config / ".torchxconfig").read_text()
    # the written file is valid input for the next run
    p = torchx(env, "run", "utils.echo", "--msg", "cfg ok")
    assert p.returncode == 0, p.stderr
    assert "echo/0 cfg ok" in p.stderr


def test_ctrl_c_on_a_foreground_local_run_cancels_the_app(
    env: dict[str, str], isolated_config: Path
) -> None:
    import signal
    import threading

    p, handle = _run_sleeper_in_foreground(env, isolated_config)
    try:
        # the CLI relays the replicas' output only once it waits on the app: Ctrl-C is sent
        # when a relayed line shows up, not after a guessed delay
        assert p.stderr is not None
        err: list[str] = []
        relayed = threading.Event()

        def read() -> None:
            for line in iter(p.stderr.readline, ""):
                err.append(line)
                if line.startswith(("sleep/0 started", "sleep/1 started")):
                    relayed.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert relayed.wait(timeout=60), "the CLI never relayed the replicas' output: " + "".join(
            err
        )
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == 130
        state = json.loads(torchx(env, "status", handle, "--json").stdout)["state"]
        assert state == "CANCELLED"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_run_hot_path_imports_no_plugin_scan_or_heavy_modules(env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from torchx_core.cli.main import run_main\n"
        "rc = run_main(['run', '-s', 'local_cwd', 'utils.echo', '--msg', 'hi'])\n"
        "bad = [m for m in ('importlib.metadata', 'fsspec', 'yaml', 'torch', 'docker',\n"
        "       'kubernetes', 'boto3', 'ray', 'torchx_core.specs.finder',\n"
        "       'torchx_core.cli.cmd_status') if m in sys.modules]\n"
        "print(rc, bad, file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert p.stderr.strip().splitlines()[-1] == "0 []", p.stderr


def test_copy_and_booth_components_run_locally(env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "src.txt"
    src.write_text("copied bytes\n")
    dst = tmp_path / "out" / "dst.txt"
    p = torchx(
        env,
        "run",
        "-s",
        "local_cwd",
        "utils.copy",
        "--src",
        f"file://{src}",
        "--dst",
        f"file://{dst}",
    )
    assert p.returncode == 0, p.stderr
    assert dst.read_text() == "copied bytes\n"
    p = torchx(
        env,
        "run",
        "-s",
        "local_cwd",
        "utils.booth",
        "--x1",
        "1",
        "--x2",
        "3",
        "--tracker_base",
        str(tmp_path / "booth"),
    )
    assert p.returncode == 0, p.stderr
    # TorchX's layout: FsspecResultTracker(tracker_base)[trial_idx], one JSON file per key
    assert json.loads((tmp_path / "booth" / "0").read_text())["booth_eval"] == 0.0


def test_log_streams_selection(env: dict[str, str], isolated_config: Path) -> None:
    (isolated_config / "both.py").write_text(
        textwrap.dedent(
            '''
            import torchx_core.specs as specs


            def both() -> specs.AppDef:
                """Writes one line to stdout and one to stderr."""
                return specs.AppDef(
                    name="both",
                    roles=[specs.Role(name="b", image="/", entrypoint="sh",
                                      args=["-c", "echo to-out; echo to-err >&2"])],
                )
            '''
        )
    )
    p = torchx(env, "run", "-s", "local_cwd", "both.py:both")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip().splitlines()[-1]
    assert torchx(env, "log", "--streams", "stdout", handle).stdout == "b/0 to-out\n"
    assert torchx(env, "log", "--streams", "stderr", handle).stdout == "b/0 to-err\n"
    combined = torchx(env, "log", handle).stdout.splitlines()
    assert sorted(combined) == ["b/0 to-err", "b/0 to-out"]
    bad = torchx(env, "log", "--streams", "both", handle)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_workspace_flag_runs_the_app_in_a_copy_of_the_project(
    env: dict[str, str], isolated_config: Path
) -> None:
    project = isolated_config / "project"
    project.mkdir()
    (project / "data.txt").write_text("from the project\n")
    p = torchx(
        env,
        "run",
        "--workspace",
        "project",
        "utils.python",
        "-c",
        "import os; print(open('data.txt').read().strip(), os.getcwd())",
    )
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip().splitlines()[-1]
    text, cwd = torchx(env, "log", handle).stdout.removeprefix("python/0 ").rsplit(" ", 1)
    assert text == "from the project"
    # it ran in a copy inside the app's directory, not in the project itself
    assert (
        cwd.startswith(os.path.realpath(env["TORCHX_LOCAL_ROOT"]))
        and handle.rsplit("/", 1)[1] in cwd
    )
    bad = torchx(env, "run", "--workspace", "no-such-dir", "utils.sh", "true")
    assert bad.returncode == 1 and "no-such-dir" in bad.stderr and "Traceback" not in bad.stderr


HUNDRED = textwrap.dedent(
    '''
    import sys

    import torchx_core.specs as specs


    def hundred(replicas: int = 2) -> specs.AppDef:
        """Prints 100 numbered lines per replica and exits at once.

        Args:
            replicas: how many replicas
        """
        code = "for i in range(100): print(f'line {i:03d}')"
        return specs.AppDef(
            name="hundred",
            roles=[specs.Role(name="h", image="/", entrypoint=sys.executable, args=["-c", code],
                              num_replicas=replicas)],
        )
    '''
)


@pytest.mark.parametrize("flags", [["--log"], ["--wait", "--log"]])
def test_run_log_gives_each_line_of_a_short_app_once(
    env: dict[str, str], tmp_path: Path, flags: list[str]
) -> None:
    (tmp_path / "hundred.py").write_text(HUNDRED)
    p = torchx(env, "run", "-s", "local_cwd", *flags, str(tmp_path / "hundred.py") + ":hundred")
    assert p.returncode == 0, p.stderr
    printed = [line for line in p.stderr.splitlines() if line.startswith("h/")]
    assert sorted(printed) == sorted(f"h/{k} line {i:03d}" for k in range(2) for i in range(100))


def _live_with_env(entry: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment holds ``entry``."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if entry.encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.parametrize("command", ["cancel", "delete"])
@pytest.mark.parametrize("garbage", [b"", b'{"state": "RUNN'])
def test_cancel_and_delete_stop_a_running_app_whose_status_file_is_unreadable(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, command: str, garbage: bytes
) -> None:
    """As ``Runner.cancel`` does (and the README says): the processes are stopped, exit 0."""
    from torchx_core.runner import get_runner
    from torchx_core.specs import AppDef, AppState, Role, parse_app_handle

    monkeypatch.setenv("TORCHX_LOCAL_ROOT", env["TORCHX_LOCAL_ROOT"])
    app = AppDef("garbled", roles=[Role("r", image="", entrypoint="sleep", args=["600"])])
    with get_runner("test") as runner:
        handle = runner.run(app, "local_cwd")
        deadline = time.monotonic() + 60
        while (s := runner.status(handle)) is None or s.state != AppState.RUNNING:
            assert time.monotonic() < deadline, s
            time.sleep(0.05)
    app_id = parse_app_handle(handle).app_id
    marker = f"TORCHX_APP_ID={app_id}"
    assert _live_with_env(marker)
    Path(env["TORCHX_LOCAL_ROOT"], app_id, "status.json").write_bytes(garbage)
    try:
        done = torchx(env, command, handle)
        assert done.returncode == 0, done.stderr
        assert "corrupt" in done.stderr  # said, not hidden
        assert _live_with_env(marker) == []
    finally:
        with get_runner("cleanup") as runner:
            runner.delete(handle)
