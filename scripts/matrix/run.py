"""Runs the version matrix (``cells.py``): one venv per cell, its unit tests, one real use.

    python scripts/matrix/run.py            # every cell; exit 1 if any cell fails
    python scripts/matrix/run.py kfp-2.16.0 prefect   # cells by id or engine
    python scripts/matrix/run.py --table    # the Compatibility table (docs/compatibility.md)

For each cell: a venv under ``$CI_STATE_DIR/matrix/venvs/<cell>`` (default CI_STATE_DIR
``/var/lib/torchx-ci``) with the interpreter from ``$PYENV_ROOT/versions`` (default
``/root/.pyenv``), the engine pinned and this repository's wheel (``uv build``) with the cell's
extras. A venv whose recipe did not change is kept (only the wheel is reinstalled, offline), so
reruns download nothing; a new recipe resolves offline from uv's cache first, then online.
The tests run from a copy of ``tests/`` without the sources, so they import the installed wheel.
``MATRIX_JOBS`` cells run at once (default 2); ``MATRIX_PREFECT_PORT_BASE`` (default 14250)
numbers the temporary Prefect servers. Logs: ``$CI_STATE_DIR/matrix/logs/<cell>.log``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from cells import CELLS, TEST_DEPS, Cell, table  # beside this script: on sys.path when it runs

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

STATE = Path(os.environ.get("CI_STATE_DIR", "/var/lib/torchx-ci")) / "matrix"
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
UV = os.environ.get("UV", str(REPO / ".tools" / "bin" / "uv"))
#: copied next to each other so that the tests find their helpers but not the sources
TREE_PATHS = ("tests", "conftest.py", "pyproject.toml", "examples", "scripts", "docs", "README.md")
STEP_TIMEOUT = 900


class CellFailed(Exception):
    """A step of a cell failed (the message names it; the log has the output)."""


def interpreter(version: str) -> Path:
    """The newest pyenv interpreter of ``version`` (e.g. ``3.10`` -> versions/3.10.13)."""
    found = sorted(
        (p for p in PYENV.glob(f"{version}.*") if (p / "bin" / "python").exists()),
        key=lambda p: [int(x) for x in p.name.split(".") if x.isdigit()],
    )
    if not found:
        raise CellFailed(f"no Python {version} in {PYENV} (install it with pyenv)")
    return found[-1] / "bin" / "python"


def run(
    args: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(args)}\n")
        out.flush()
        try:
            proc = subprocess.run(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                timeout=STEP_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CellFailed(f"timed out after {STEP_TIMEOUT}s: {' '.join(args[:4])}") from None
    if proc.returncode != 0:
        raise CellFailed(f"exit {proc.returncode}: {' '.join(args[:6])}")


def recipe(cell: Cell, python: Path) -> str:
    return json.dumps(
        {**asdict(cell), "interpreter": str(python.resolve()), "test_deps": TEST_DEPS},
        sort_keys=True,
    )


def build_venv(cell: Cell, wheel: Path, log: Path) -> Path:
    """The cell's venv, rebuilt only when its recipe changed; the wheel is always reinstalled.

    The first build resolves online and freezes the result under ``frozen/<cell>.txt``; a
    rebuild with the same recipe installs exactly that list (offline from uv's cache if it can),
    so a cell's dependencies do not drift between runs.
    """
    python = interpreter(cell.python)
    venv = STATE / "venvs" / cell.id
    vpy = str(venv / "bin" / "python")
    stamp = venv / ".matrix-recipe"
    frozen = STATE / "frozen" / f"{cell.id}.txt"
    want = recipe(cell, python)
    spec = f"{wheel}[{','.join(cell.extras)}]" if cell.extras else str(wheel)
    wheel_only = [
        UV,
        "pip",
        "install",
        "--python",
        vpy,
        "--no-deps",
        "--reinstall-package",
        "torchx-suite",
        str(wheel),
    ]
    if stamp.exists() and stamp.read_text() == want:
        run([*wheel_only, "--offline"], log)
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    run([UV, "venv", "--python", str(python), str(venv)], log)
    frozen_recipe = frozen.with_suffix(".recipe")
    if frozen.exists() and frozen_recipe.exists() and frozen_recipe.read_text() == want:
        exact = [
            UV,
            "pip",
            "install",
            "--python",
            vpy,
            "--compile-bytecode",
            "--no-deps",
            "-r",
            str(frozen),
        ]
        try:
            run([*exact, "--offline"], log)
        except CellFailed:
            run(exact, log)  # not in uv's cache (any more)
        run(wheel_only, log)
    else:
        install = [
            UV,
            "pip",
            "install",
            "--python",
            vpy,
            "--compile-bytecode",
            *cell.pins,
            spec,
            *TEST_DEPS,
        ]
        if cell.exclude_newer:
            install += ["--exclude-newer", cell.exclude_newer]
        run(install, log)
        frozen.parent.mkdir(parents=True, exist_ok=True)
        listing = subprocess.run(
            [UV, "pip", "freeze", "--python", vpy], check=True, capture_output=True, text=True
        ).stdout
        frozen.write_text(
            "".join(
                line + "\n" for line in listing.splitlines() if not line.startswith("torchx-suite")
            )
        )
        frozen_recipe.write_text(want)
    stamp.write_text(want)
    return venv


def check_pins(venv: Path, cell: Cell, log: Path) -> None:
    """The pinned engine is what got installed (the extras did not move it)."""
    code = (
        "import sys, importlib.metadata as m\n"
        "bad = [(r, m.version(r.split('==')[0])) for r in sys.argv[1:]"
        " if m.version(r.split('==')[0]) != r.split('==')[1]]\n"
        "print('pins', sys.argv[1:], 'moved:', bad)\nsys.exit(1 if bad else 0)\n"
    )
    run([str(venv / "bin" / "python"), "-c", code, *cell.pins], log)


def cell_env(venv: Path, index: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        and not k.startswith("PREFECT_")
        and not k.startswith("AIRFLOW")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["MATRIX_PREFECT_PORT"] = str(
        int(os.environ.get("MATRIX_PREFECT_PORT_BASE", "14250")) + index
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the venv's bytecode is compiled once, keep using it
    return env


def run_cell(cell: Cell, index: int, wheel: Path, tree: Path) -> tuple[Cell, str, float]:
    log = STATE / "logs" / f"{cell.id}.log"
    log.write_text(f"cell {cell.id}\n")
    start = time.monotonic()
    try:
        venv = build_venv(cell, wheel, log)
        check_pins(venv, cell, log)
        python = str(venv / "bin" / "python")
        env = cell_env(venv, index)
        run(
            [
                python,
                "-c",
                (
                    "import torchx_core, sys; p = torchx_core.__file__;"
                    " print(p); sys.exit(0 if p.startswith(sys.prefix) else 1)"
                ),
            ],
            log,
            env=env,
            cwd=tree,
        )
        if cell.unit:
            run(
                [
                    python,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--timeout",
                    "300",
                    *cell.unit,
                ],
                log,
                env=env,
                cwd=tree,
            )
        if cell.smoke:
            run(
                [python, str(tree / "scripts" / "matrix" / f"smoke_{cell.smoke}.py")],
                log,
                env=env,
                cwd=tree,
            )
        result = "passed"
    except CellFailed as e:
        result = f"FAILED ({e})"
    return cell, result, time.monotonic() - start


def make_tree(root: Path) -> Path:
    """The test files without the sources (so the tests import the installed wheel)."""
    tree = root / "tree"
    tree.mkdir()
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *TREE_PATHS],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)
    return tree


def build_wheel(root: Path) -> Path:
    out = root / "dist"
    subprocess.run(
        [UV, "build", "--wheel", "--out-dir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=STEP_TIMEOUT,
    )
    (wheel,) = out.glob("torchx_suite-*.whl")
    return wheel


def select(names: list[str]) -> list[Cell]:
    if not names:
        return list(CELLS)
    chosen = [c for c in CELLS if c.id in names or c.engine in names]
    unknown = set(names) - {c.id for c in chosen} - {c.engine for c in chosen}
    if unknown:
        valid = ", ".join(c.id for c in CELLS)
        raise SystemExit(f"unknown cell(s) {sorted(unknown)}; valid: {valid} (or an engine name)")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*", help="cell ids or engine names (default: all)")
    parser.add_argument("--table", action="store_true", help="print the Compatibility table")
    args = parser.parse_args()
    if args.table:
        print(table())
        return 0
    cells = select(args.cells)
    (STATE / "logs").mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torchx-matrix-") as tmp:
        root = Path(tmp)
        wheel = build_wheel(root)
        tree = make_tree(root)
        jobs = int(os.environ.get("MATRIX_JOBS", "2"))
        # the slowest first: Airflow, then Prefect (their venvs and real uses take longest)
        order = sorted(
            enumerate(cells),
            key=lambda ic: ["airflow", "prefect", "kfp", "python"].index(ic[1].engine),
        )
        results: list[tuple[Cell, str, float]] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run_cell, c, i, wheel, tree) for i, c in order]
            for fut in concurrent.futures.as_completed(futures):
                cell, result, secs = fut.result()
                print(f"matrix: {cell.id:<16} {result} in {secs:.0f}s", flush=True)
                results.append((cell, result, secs))
    wall = time.monotonic() - began
    failed = [(c, r) for c, r, _ in results if r != "passed"]
    print(
        f"matrix: {len(results) - len(failed)}/{len(results)} cells passed in {wall:.0f}s"
        f" (logs: {STATE / 'logs'})"
    )
    for cell, result in failed:
        log = STATE / "logs" / f"{cell.id}.log"
        print(f"\n===== {cell.id}: {result}; last lines of {log}:")
        print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))
    (STATE / "last-run.json").write_text(
        json.dumps(
            {
                "wall_seconds": round(wall),
                "cells": {c.id: {"result": r, "seconds": round(s)} for c, r, s in results},
            },
            indent=2,
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
