"""The version matrix: which engine releases and Python versions CI tests, and how.

Each cell is a fresh venv built the way a user installs into an engine they already run: the
engine pinned, plus this repository's built wheel with the adapter's extra (never our lock).
``run.py`` runs the cells; the "Compatibility" table of docs/compatibility.md is generated from
this list (``python scripts/matrix/run.py --table``) and ``tests/test_compat_table.py`` keeps
them equal.

Lower bounds in ``pyproject.toml`` are the ``oldest`` cells' versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the test dependencies every cell installs next to the wheel
TEST_DEPS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100")


@dataclass(frozen=True)
class Cell:
    """One venv of the matrix.

    Args:
        engine: ``airflow``, ``prefect``, ``kfp`` or ``python`` (the core alone)
        version: the engine release (the Python version for ``python`` cells)
        roles: why this version is tested: ``oldest``, ``locked``, ``newest``, ``supported``
        python: the interpreter (a pyenv version directory name prefix, e.g. ``"3.10"``)
        pins: requirements installed with the wheel (the engine pinned)
        extras: the wheel's extras
        exclude_newer: resolve the other dependencies as of this date (a deployment of that
            release's time); None resolves them as of today
        unit: the pytest arguments of the unit tests the cell runs
        smoke: the script (``scripts/matrix/smoke_<engine>.py``) of one real use, or None
    """

    engine: str
    version: str
    roles: tuple[str, ...]
    python: str
    pins: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    exclude_newer: str | None = None
    unit: tuple[str, ...] = ()
    smoke: str | None = None
    tested: str = field(default="", compare=False)

    @property
    def id(self) -> str:
        return f"{self.engine}-{self.version}"


_AIRFLOW_UNIT = ("tests/airflow", "-m", "not integration")
_AIRFLOW_USE = (
    "unit tests; a DAG with TorchXOperator through `dag.test()` on SQLite, and"
    " `examples/airflow/torchx_dag.py` run as its docstring says; provider and `torchx`"
    " connection type listed"
)
_PREFECT_UNIT = ("tests/prefect", "-m", "not integration")
_PREFECT_USE = (
    "unit tests; a flow with `run_app` against a temporary `prefect server`;"
    " `torchx` worker type found"
)
_KFP_UNIT = ("tests/kfp", "-m", "not integration")
_KFP_USE = (
    "unit tests; a launcher step compiled and run with"
    " `kfp.local.SubprocessRunner(use_venv=False)`; kfp-kubernetes settings compiled"
)
#: the core's unit tests that need no extra (the backends' and adapters' need their clients)
_CORE_UNIT = (
    "tests/specs",
    "tests/runner",
    "tests/cli",
    "tests/util",
    "tests/plugins",
    "tests/components",
    "tests/runtime",
    "tests/test_import_hygiene.py",
    # drives every engine's entry point (each needs its extra); the main suite runs it
    "--ignore=tests/runner/test_settings_table.py",
    "-m",
    "not integration",
)
_CORE_USE = (
    "torchx_core unit tests that need no extra (specs, runner, cli, util, plugins, components,"
    " runtime, import hygiene)"
)

CELLS: tuple[Cell, ...] = (
    Cell(
        "airflow",
        "3.0.0",
        ("oldest",),
        "3.10",
        pins=("apache-airflow==3.0.0",),
        extras=("airflow",),
        unit=_AIRFLOW_UNIT,
        smoke="airflow",
        tested=_AIRFLOW_USE,
    ),
    Cell(
        "airflow",
        "3.3.2",
        ("locked", "newest"),
        "3.11",
        pins=("apache-airflow==3.3.2",),
        extras=("airflow",),
        unit=_AIRFLOW_UNIT,
        smoke="airflow",
        tested=_AIRFLOW_USE,
    ),
    # Prefect's own dependencies have no upper bounds: its older releases break with today's
    # pydantic/fastapi (3.7.7's server with fastapi 0.165), so they resolve as of a month after
    # their release (3.1.6: 2024-12-11, 3.7.7: 2026-07-03), like a deployment of that time
    Cell(
        "prefect",
        "3.1.6",
        ("oldest",),
        "3.10",
        pins=("prefect==3.1.6",),
        extras=("prefect",),
        exclude_newer="2025-01-11T00:00:00Z",
        unit=_PREFECT_UNIT,
        smoke="prefect",
        tested=_PREFECT_USE,
    ),
    Cell(
        "prefect",
        "3.7.7",
        ("locked",),
        "3.11",
        pins=("prefect==3.7.7",),
        extras=("prefect",),
        exclude_newer="2026-08-03T00:00:00Z",
        unit=_PREFECT_UNIT,
        smoke="prefect",
        tested=_PREFECT_USE,
    ),
    Cell(
        "prefect",
        "3.9.1",
        ("newest",),
        "3.12",
        pins=("prefect==3.9.1",),
        extras=("prefect",),
        unit=_PREFECT_UNIT,
        smoke="prefect",
        tested=_PREFECT_USE,
    ),
    Cell(
        "kfp",
        "2.16.0",
        ("oldest",),
        "3.10",
        pins=("kfp==2.16.0", "kfp-kubernetes==2.16.0"),
        extras=("kfp", "kfp-kubernetes"),
        unit=_KFP_UNIT,
        smoke="kfp",
        tested=_KFP_USE,
    ),
    Cell(
        "kfp",
        "2.16.1",
        ("locked",),
        "3.11",
        pins=("kfp==2.16.1", "kfp-kubernetes==2.16.1"),
        extras=("kfp", "kfp-kubernetes"),
        unit=_KFP_UNIT,
        smoke="kfp",
        tested=_KFP_USE,
    ),
    Cell(
        "kfp",
        "2.17.3",
        ("newest",),
        "3.12",
        pins=("kfp==2.17.3", "kfp-kubernetes==2.17.3"),
        extras=("kfp", "kfp-kubernetes"),
        unit=_KFP_UNIT,
        smoke="kfp",
        tested=_KFP_USE,
    ),
    *(
        Cell("python", v, ("supported",), v, unit=_CORE_UNIT, tested=_CORE_USE)
        for v in ("3.10", "3.11", "3.12", "3.13")
    ),
)

ENGINE_NAMES = {
    "airflow": "Airflow",
    "prefect": "Prefect",
    "kfp": "KFP (kfp, kfp-kubernetes)",
    "python": "Python",
}


def table() -> str:
    """The Compatibility table of docs/compatibility.md (Markdown), one row per cell."""
    rows = ["| engine | version | Python | why | tested in CI |", "| --- | --- | --- | --- | --- |"]
    for c in CELLS:
        rows.append(
            f"| {ENGINE_NAMES[c.engine]} | {c.version} | {c.python} | {', '.join(c.roles)}"
            f" | {c.tested} |"
        )
    return "\n".join(rows)
