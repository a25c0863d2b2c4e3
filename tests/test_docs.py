"""Every code block of the documentation (README.md and docs/) is checked, and runs where it can.

A fenced block is opened with its language, and an HTML comment on the line above may say how
it is tested (``<!-- docs-test: MODE -->``):

* ``python``: the page's blocks run top to bottom in one fresh interpreter, after the page's
  hidden set-up (``<!-- docs-test: setup`` ... ``-->``, code the reader does not need to see,
  e.g. the ``app`` a snippet refers to). ``syntax (reason)`` compiles the block only.
* ``bash``: ``run`` runs the page's run-blocks in one shell, in a scratch folder, with this
  interpreter's ``bin`` first on ``PATH`` (``docs/install.md``: in a fresh venv and a copy of the
  checkout, the way a user installs); ``syntax (reason)`` checks it with ``bash -n``. A bash
  block must say which.
* ``ini``: parsed as ``.torchxconfig`` and Airflow read it (``configparser``, no inline
  comments), and no value may hold a ``#`` comment (it would become part of the value).
* ``nginx``: a ``location`` recipe, checked by ``nginx -t`` inside a minimal ``server`` (when
  nginx is installed: ``make test`` installs it for the dashboard's proxy test), else for
  balanced braces.
* ``pycon``: only in ``docs/specs.md``, whose blocks run as doctests in
  ``tests/specs/test_specs_docs.py``.

A syntax-only block names its reason, so what is not run is visible in the page's source.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
LANGS = ("python", "pycon", "bash", "ini", "nginx")

_FENCE = re.compile(
    r"^(?:<!-- docs-test: (?P<mark>[^\n]*?) -->\n)?```(?P<lang>[^\n]*)\n(?P<body>.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_SETUP = re.compile(r"^<!-- docs-test: setup\n(?P<body>.*?)^-->$", re.MULTILINE | re.DOTALL)
_SYNTAX = re.compile(r"^syntax \((?P<reason>.+)\)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    mark: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.mark == "run" or (self.lang == "python" and not self.mark)


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a markdown page, in order."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, text.count("\n", 0, m.start("lang")) + 1, m.group("lang").strip(),
              m.group("body"), m.group("mark") or "")
        for m in _FENCE.finditer(text)
    ]  # fmt: skip


def setup_code(page: Path) -> str:
    return "\n".join(m.group("body") for m in _SETUP.finditer(page.read_text(encoding="utf-8")))


def _id(page: Path) -> str:
    return str(page.relative_to(REPO))


ALL = [b for p in PAGES for b in blocks(p)]


def _problems(b: Block) -> list[str]:
    if b.lang not in LANGS:
        return [f"language {b.lang!r} is not one of {', '.join(LANGS)}"]
    if b.mark and b.mark != "run" and not _SYNTAX.match(b.mark):
        return [f"mark {b.mark!r} is neither `run` nor `syntax (reason)`"]
    if b.lang == "pycon" and b.page != REPO / "docs" / "specs.md":
        return ["pycon runs in docs/specs.md only (tests/specs/test_specs_docs.py): use python"]
    if b.lang == "bash" and not b.mark:
        return ["a bash block says `<!-- docs-test: run -->` or `<!-- docs-test: syntax (why) -->`"]
    if b.lang == "python":
        try:
            compile(b.body, b.where, "exec")
        except SyntaxError as e:
            return [f"python syntax: {e}"]
    if b.lang == "bash":
        proc = subprocess.run(["bash", "-n"], input=b.body, text=True, capture_output=True)
        if proc.returncode != 0:
            return [f"bash -n: {proc.stderr.strip()}"]
    if b.lang == "ini":
        return _ini_problems(b.body)
    if b.lang == "nginx":
        return _nginx_problems(b.body)
    return []


def _nginx_problems(body: str) -> list[str]:
    if body.count("{") != body.count("}"):
        return ["nginx: unbalanced braces"]
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
    )
    if nginx is None:
        return []
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp, "nginx.conf")
        conf.write_text(
            f"pid {tmp}/nginx.pid;\nerror_log {tmp}/error.log;\nevents {{}}\n"
            f"http {{ access_log off; server {{ listen 127.0.0.1:1;\n{body}\n}} }}\n"
        )
        proc = subprocess.run(
            [nginx, "-t", "-q", "-c", str(conf), "-p", tmp], capture_output=True, text=True
        )
    return [] if proc.returncode == 0 else [f"nginx -t: {proc.stderr.strip()}"]


def _ini_problems(body: str) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)  # as .torchxconfig is read
    try:
        parser.read_string(body)
    except configparser.Error as e:
        return [f"configparser: {e}"]
    return [
        f"[{s}] {k} = {v!r}: an inline comment becomes part of the value"
        for s in parser.sections()
        for k, v in parser.items(s)
        if re.search(r"\s[#;]", v)
    ]


def test_every_block_is_checked() -> None:
    assert len(ALL) > 50, f"found only {len(ALL)} code blocks: is the fence pattern right?"
    problems = [f"{b.where}: {p}" for b in ALL for p in _problems(b)]
    assert not problems, "\n".join(problems)


def test_inline_comment_check_catches_the_old_tracker_example() -> None:
    old = "[torchx:tracker]\nfsspec = fsspec                      # name = an entry point\n"
    assert _ini_problems(old), "the old .torchxconfig example must be refused"
    assert not _ini_problems("[torchx:tracker]\n# name = an entry point\nfsspec = fsspec\n")


def test_tracker_example_works_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracking page's .torchxconfig, copied verbatim, builds the tracker it names."""
    page = REPO / "docs" / "guide" / "tracking.md"
    (ini,) = [b for b in blocks(page) if b.lang == "ini" and "[torchx:tracker]" in b.body]
    conf = tmp_path / "fsspec.conf"
    conf.write_text(f"protocol = file\nroot_path = {tmp_path / 'tracker'}\n")
    (tmp_path / ".torchxconfig").write_text(ini.body.replace("/path/to/fsspec.conf", str(conf)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / ".torchxconfig"))
    from torchx_core.runner.api import get_configured_tracker_factories, get_configured_trackers
    from torchx_core.tracker.api import build_trackers

    configured = get_configured_trackers()
    trackers = list(build_trackers(configured, factories=get_configured_tracker_factories()))
    assert len(trackers) == 1, configured
    trackers[0].add_metadata("local_cwd://docs/app", lr=0.1)
    assert trackers[0].metadata("local_cwd://docs/app") == {"lr": 0.1}


PY_PAGES = [p for p in PAGES if any(b.lang == "python" and b.runs for b in blocks(p))]
SH_PAGES = [p for p in PAGES if any(b.lang == "bash" and b.runs for b in blocks(p))]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHXCONFIG",)}
    env.update(
        TORCHX_LOCAL_ROOT=str(tmp / "torchx-local"),
        AIRFLOW_HOME=str(tmp / "airflow"),
        PREFECT_HOME=str(tmp / "prefect"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
    )
    return env


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.parametrize("page", PY_PAGES, ids=_id)
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    runs = [b for b in blocks(page) if b.lang == "python" and b.runs]
    code = "\n".join([setup_code(page), *(f"# {b.where}\n{b.body}" for b in runs)])
    (tmp_path / "page.py").write_text(code)
    proc = subprocess.run(
        [sys.executable, "page.py"], cwd=tmp_path, env=_env(tmp_path),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def _fresh_checkout_venv(tmp: Path, env: dict[str, str]) -> Path:
    """A copy of the checkout's sources and a fresh venv, activated in ``env``."""
    work = tmp / "checkout"
    skip = shutil.ignore_patterns(".git", ".venv", ".tools", "build", "dist", "*.egg-info")
    shutil.copytree(REPO, work, ignore=skip, symlinks=True)
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    env.pop("PYTHONPATH", None)
    tools = REPO / ".tools" / "bin"  # uv, as `make venv` installs it
    env.update(VIRTUAL_ENV=str(env_dir), PATH=os.pathsep.join([str(env_dir / "bin"), str(tools),
                                                              os.environ["PATH"]]))  # fmt: skip
    return work


@pytest.mark.integration
@pytest.mark.local
@pytest.mark.parametrize("page", SH_PAGES, ids=_id)
def test_bash_blocks_run(page: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    cwd = tmp_path
    if page == REPO / "docs" / "install.md":
        cwd = _fresh_checkout_venv(tmp_path, env)
    script = "\n".join(
        f"# {b.where}\n{b.body}" for b in blocks(page) if b.lang == "bash" and b.runs
    )
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def test_no_install_from_an_index() -> None:
    """torchx-suite is not on a package index: the pages install from a checkout or a wheel."""
    bad = re.compile(r"""(pip|uv pip|pipx|uv tool) install\s+['"]?torchx-suite\b""")
    found = [
        f"{_id(p)}:{n}: {line.strip()}"
        for p in PAGES
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if bad.search(line)
    ]
    assert not found, "\n".join(found)
