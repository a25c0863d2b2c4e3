"""Fault injection, group "hostile output": app output cannot take over the user's terminal.

``torchx log`` and the streamed output of ``torchx run`` write to a terminal with every control
sequence but colours shown escaped (clear screen, window title, OSC 52 clipboard writes...);
``--raw`` writes the output as is, and so does output to a pipe or a file.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from torchx_core.cli._term import sanitize

pytestmark = [pytest.mark.integration, pytest.mark.local, pytest.mark.timeout(300)]

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write "rm -rf ~" into the clipboard
COLOR = "\x1b[31mred\x1b[0m"
HOSTILE = f"{CLEAR}{TITLE}{CLIPBOARD}{COLOR}\x9b6n\bend"


def test_sanitize_keeps_colours_and_neutralises_the_rest() -> None:
    out = sanitize(HOSTILE)
    assert COLOR in out
    for raw in (CLEAR, TITLE, CLIPBOARD, "\x9b", "\b"):
        assert raw not in out
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in out and "\\x1b[2J" in out and "\\x9b6n" in out
    assert sanitize("plain\ttext\r50%\r100%\n") == "plain\ttext\r50%\r100%\n"


def _run_in_pty(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """Runs the CLI with stdout and stderr on a pseudo-terminal; returns what it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchx_core.cli.main", *args],
        stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
    )  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TORCHX_LOCAL_ROOT": str(tmp_path / "local-root")}
    env.pop("NO_COLOR", None)
    return env


def _hostile_app(env: dict[str, str], cwd: Path) -> str:
    script = cwd / "hostile.py"
    script.write_text(f"import sys; sys.stdout.write({HOSTILE!r} + '\\n')\n")
    out = subprocess.run(
        [sys.executable, "-m", "torchx_core.cli.main", "run", "-s", "local_cwd", "utils.python",
         "--script", str(script)],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    handle = next(w for w in out.stdout.split() if w.startswith("local_cwd://"))
    # piped (not a terminal): the output is written as is
    assert CLIPBOARD in out.stderr
    return handle


def test_torchx_log_on_a_terminal_shows_control_sequences_escaped(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    handle = _hostile_app(cli_env, tmp_path)
    shown = _run_in_pty(["log", handle], cli_env, tmp_path)
    assert "end" in shown
    for raw in (CLEAR, TITLE, CLIPBOARD, "\x9b"):
        assert raw not in shown
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown and COLOR in shown
    raw = _run_in_pty(["log", "--raw", handle], cli_env, tmp_path)
    assert CLIPBOARD in raw and CLEAR in raw


def test_torchx_run_streams_sanitised_output_to_a_terminal(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(f"import sys; sys.stdout.write({HOSTILE!r} + '\\n')\n")
    args = ["run", "-s", "local_cwd", "utils.python", "--script", str(script)]
    shown = _run_in_pty(args, cli_env, tmp_path)
    assert "end" in shown and CLIPBOARD not in shown and TITLE not in shown
    assert "\\x1b]0;pwned\\x07" in shown
    raw = _run_in_pty([args[0], "--raw", *args[1:]], cli_env, tmp_path)
    assert CLIPBOARD in raw
