"""Enforces the one-way layering of ARCHITECTURE.md by scanning every import statement (AST).

``specs`` <- ``schedulers`` <- ``runner`` <- ``cli`` / ``components``; the adapters
(``torchx_airflow``, ``torchx_kfp``, ``torchx_prefect``) use only the public
``torchx_core.specs`` / ``torchx_core.runner`` API (and the stdlib-only ``torchx_core.util``); a
scheduler never imports another scheduler. Private means private: a module ``_name`` (or a
``_name`` defined in a module) is imported only from inside the package that holds it.

Every import counts: module level, inside functions, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("torchx_core", "torchx_airflow", "torchx_kfp", "torchx_prefect")
ADAPTERS = ("torchx_airflow", "torchx_kfp", "torchx_prefect")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _source_files() -> Iterator[Path]:
    for pkg in PACKAGES:
        root = REPO / pkg
        if root.is_dir():
            yield from sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Returns ``(line, absolute module name)`` for every import in ``path``.

    ``from pkg import name`` yields both ``pkg`` and ``pkg.name`` (name may be a module).
    """
    module = _module_name(path)
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".")
                drop = node.level - 1 if is_pkg else node.level
                base_parts = base_parts[: len(base_parts) - drop] if drop else base_parts
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.append((node.lineno, base))
            out.extend(
                (node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"
            )
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# backends that live in a shared family package (``schedulers/<family>/``)
_FAMILY = {"kubernetes_mcad": "kubernetes", "aws_batch": "aws", "aws_sagemaker": "aws"}


def scheduler_of(name: str) -> str | None:
    """The scheduler a ``torchx_core.schedulers`` module belongs to, or None if neutral.

    ``schedulers/<x>_scheduler.py`` and the subpackage ``schedulers/<x>/`` belong to ``<x>``;
    ``api``, ``registry``, ``__init__`` and ``_private`` helpers are neutral.
    """
    if not _under(name, "torchx_core.schedulers"):
        return None
    parts = name.split(".")
    if len(parts) < 3:
        return None
    head = parts[2]
    if head.endswith("_scheduler"):  # TorchX's import paths: aliases of the family packages
        backend = head[: -len("_scheduler")]
        return _FAMILY.get(backend, backend)
    if head.startswith("_") or head in ("api", "registry"):
        return None
    sched_dir = REPO / "torchx_core" / "schedulers"
    if (sched_dir / head).is_dir():
        return head
    if (sched_dir / f"{head}.py").is_file():
        return None  # a neutral module (`from ...devices import get_device_mounts`)
    return head if len(parts) > 3 else None


# the layers below specs: what each may import from torchx_core
_BASE: dict[str, tuple[str, ...]] = {
    "torchx_core.util": ("torchx_core.util",),
    "torchx_core.plugins": ("torchx_core.plugins", "torchx_core.util"),
}

# job-side code (imported inside users' apps): light, and never the launcher's layers
_JOB_SIDE: dict[str, tuple[str, ...]] = {
    "torchx_core.distributed": ("torchx_core.distributed",),
    "torchx_core.runtime": ("torchx_core.runtime", "torchx_core.specs"),
    "torchx_core.tracker": (
        "torchx_core.tracker",
        "torchx_core.specs",
        "torchx_core.plugins",
        "torchx_core.util",
        "torchx_core.distributed",
    ),
}


# the dashboard sits above runner, beside cli: the public layers (app output is shown escaped
# by `torchx_core.util.terminal`, as `torchx log` shows it)
_DASHBOARD = (
    "torchx_core.dashboard",
    "torchx_core.specs",
    "torchx_core.runner",
    "torchx_core.util",
)


def _core_import(imp: str) -> bool:
    """An import of a ``torchx_core`` module (the package's own ``__init__`` excepted)."""
    return _under(imp, "torchx_core") and imp != "torchx_core"


def _only(imp: str, allowed: Iterable[str]) -> bool:
    return any(_under(imp, a) for a in allowed)


def _specs_rule(mod: str, imp: str) -> Iterator[str]:
    if (
        _under(mod, "torchx_core.specs")
        and _core_import(imp)
        and not _only(imp, ("torchx_core.specs", *_BASE))
    ):
        yield "specs may only import torchx_core.specs, .plugins and .util"


def _base_rule(mod: str, imp: str) -> Iterator[str]:
    for low, allowed in _BASE.items():
        if _under(mod, low) and _core_import(imp) and not _only(imp, allowed):
            yield f"{low} may only import {', '.join(allowed)}"


def _job_side_rule(mod: str, imp: str) -> Iterator[str]:
    for job_side, allowed in _JOB_SIDE.items():
        if _under(mod, job_side) and _core_import(imp) and not _only(imp, allowed):
            yield f"job-side {job_side} may only import {', '.join(allowed)}"


def _scheduler_rule(mod: str, imp: str) -> Iterator[str]:
    if not (_under(mod, "torchx_core.schedulers") or _under(mod, "torchx_core.workspace")):
        return
    for upper in ("torchx_core.runner", "torchx_core.cli", "torchx_core.components"):
        if _under(imp, upper):
            yield f"schedulers/workspace must not import {upper}"
    mine, theirs = scheduler_of(mod), scheduler_of(imp)
    if theirs is not None and theirs != mine:
        owner = f"the {mine} scheduler" if mine else "a neutral scheduler helper"
        yield f"{owner} must not import the {theirs} scheduler"


def _runner_rule(mod: str, imp: str) -> Iterator[str]:
    if _under(mod, "torchx_core.runner") and _under(imp, "torchx_core.cli"):
        yield "runner must not import cli"


def _dashboard_rule(mod: str, imp: str) -> Iterator[str]:
    if (
        _under(imp, "torchx_core.dashboard")
        and not _under(mod, "torchx_core.dashboard")
        and mod != "torchx_core.cli.cmd_dashboard"
    ):
        yield "only the `torchx dashboard` command imports the dashboard"
    if _under(mod, "torchx_core.dashboard") and _core_import(imp) and not _only(imp, _DASHBOARD):
        yield f"the dashboard may only import {', '.join(_DASHBOARD)}"


def _adapter_rule(mod: str, imp: str) -> Iterator[str]:
    for adapter in ADAPTERS:
        if not _under(mod, adapter):
            continue
        if _core_import(imp) and not _only(
            imp, ("torchx_core.specs", "torchx_core.runner", "torchx_core.util")
        ):
            yield "adapters use only torchx_core.specs / torchx_core.runner (and .util)"
        if _under(imp, "torchx_core") and any(part.startswith("_") for part in imp.split(".")):
            yield "adapters use only the public API (no private names)"
        if any(other != adapter and _under(imp, other) for other in ADAPTERS):
            yield "adapters must not import another adapter"


def private_owner(imp: str) -> str | None:
    """The package whose private name ``imp`` is (``a.b`` for ``a.b._c`` or ``a.b._c.d``), or
    None when no part of it is private (dunder names such as ``__version__`` are public)."""
    parts = imp.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i])
    return None


def _private_rule(mod: str, imp: str) -> Iterator[str]:
    owner = private_owner(imp)
    # top-level private names are the standard library's (`_thread`) or the local supervisor's
    # run-by-path sibling imports (`import _layout`), not another package's
    if owner and _only(imp, PACKAGES) and not _under(mod, owner):
        yield f"a private name of {owner} is imported from outside it; make it public there"


_RULES: tuple[Callable[[str, str], Iterator[str]], ...] = (
    _specs_rule,
    _base_rule,
    _job_side_rule,
    _scheduler_rule,
    _runner_rule,
    _dashboard_rule,
    _adapter_rule,
    _private_rule,
)


def violations() -> list[str]:
    found: list[str] = []
    for path in _source_files():
        mod = _module_name(path)
        rel = path.relative_to(REPO)
        for line, imp in imports_of(path):
            found += [
                f"{rel}:{line} imports {imp}: {msg}" for rule in _RULES for msg in rule(mod, imp)
            ]
    return found


def test_layering_rules_hold() -> None:
    problems = violations()
    assert not problems, "layering violations (see ARCHITECTURE.md):\n" + "\n".join(problems)


# the layers above the runner use objects through their public API, never `obj._private`;
# (module, expression) pairs allowed, each with why
_ABOVE_RUNNER = ("torchx_core.cli", "torchx_core.dashboard", "torchx_core.components")
_PRIVATE_ATTRS_ALLOWED = {
    # the action's own bookkeeping on argparse's Namespace (no API of another layer)
    ("torchx_core.cli.cmd_run", "namespace._seen_once"),
}


def private_attribute_reaches() -> list[str]:
    """``path:line expr`` for each ``name._private`` (not ``self``/``cls``) above the runner."""
    found: list[str] = []
    for path in _source_files():
        mod = _module_name(path)
        if not _only(mod, _ABOVE_RUNNER):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and private_owner(node.attr) == ""
                and isinstance(node.value, ast.Name)
                and node.value.id not in ("self", "cls")
                and (mod, ast.unparse(node)) not in _PRIVATE_ATTRS_ALLOWED
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_private_attribute_reach_above_the_runner() -> None:
    problems = private_attribute_reaches()
    assert not problems, "private attributes used from above the runner:\n" + "\n".join(problems)


def test_scan_sees_the_packages() -> None:
    names = {_module_name(p) for p in _source_files()}
    assert "torchx_core.specs.api" in names and "torchx_core.specs" in names


# --- the checker itself catches what it should ---------------------------------------------


def _write(tmp: Path, rel: str, text: str) -> Path:
    path = tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Points the scanner at an empty fake repository."""
    monkeypatch.setitem(globals(), "REPO", tmp_path)
    return tmp_path


def test_relative_imports_are_resolved(fake_repo: Path) -> None:
    f = _write(
        fake_repo,
        "torchx_core/schedulers/local/_launch.py",
        "from ..slurm_scheduler import X\nfrom . import _state\n",
    )
    names = [n for _, n in imports_of(f)]
    assert "torchx_core.schedulers.slurm_scheduler" in names
    assert "torchx_core.schedulers.local._state" in names
    g = _write(
        fake_repo, "torchx_core/specs/__init__.py", "from .api import *\nfrom ..runner import api\n"
    )
    names_g = [n for _, n in imports_of(g)]
    assert "torchx_core.specs.api" in names_g and "torchx_core.runner" in names_g


def test_checker_flags_each_rule(fake_repo: Path) -> None:
    (fake_repo / "torchx_core" / "schedulers" / "local").mkdir(parents=True)
    _write(fake_repo, "torchx_core/specs/api.py", "from torchx_core.schedulers import api\n")
    _write(
        fake_repo,
        "torchx_core/schedulers/slurm/scheduler.py",
        "def f():\n    from torchx_core.schedulers.local.scheduler import LocalScheduler\n",
    )
    _write(
        fake_repo, "torchx_core/schedulers/docker/scheduler.py", "import torchx_core.runner.api\n"
    )
    _write(
        fake_repo,
        "torchx_core/schedulers/_logs.py",
        "from torchx_core.schedulers.local import _state\n",
    )
    _write(fake_repo, "torchx_core/runner/api.py", "from torchx_core.cli import main\n")
    _write(
        fake_repo,
        "torchx_airflow/operator.py",
        "from torchx_core.schedulers.api import Scheduler\nfrom torchx_prefect import x\n"
        "from torchx_core.runner import get_runner\n",
    )
    _write(fake_repo, "torchx_kfp/launcher.py", "from torchx_core.specs._app import Role\n")
    _write(fake_repo, "torchx_core/tracker/api.py", "from torchx_core.runner import get_runner\n")
    _write(fake_repo, "torchx_core/dashboard/_x.py", "from torchx_core.schedulers import api\n")
    _write(fake_repo, "torchx_core/cli/cmd_run.py", "import torchx_core.dashboard\n")
    text = "\n".join(violations())
    assert "specs may only import torchx_core.specs" in text
    assert "the slurm scheduler must not import the local scheduler" in text
    assert "must not import torchx_core.runner" in text
    assert "a neutral scheduler helper must not import the local scheduler" in text
    assert "runner must not import cli" in text
    assert "adapters use only torchx_core.specs / torchx_core.runner" in text
    assert "adapters must not import another adapter" in text
    assert (
        "torchx_kfp/launcher.py:1 imports torchx_core.specs._app: adapters use only the public"
        in text
    )
    assert "torchx_core/tracker/api.py:1 imports torchx_core.runner: job-side" in text
    assert "torchx_airflow/operator.py:3" not in text  # an adapter may use the runner
    assert "torchx_core/dashboard/_x.py:1 imports torchx_core.schedulers: the dashboard may" in text
    assert "cmd_run.py:1 imports torchx_core.dashboard: only the `torchx dashboard` command" in text


def test_checker_flags_private_imports(fake_repo: Path) -> None:
    _write(
        fake_repo, "torchx_core/dashboard/_logs.py", "from torchx_core.cli._term import sanitize\n"
    )
    _write(
        fake_repo,
        "torchx_core/schedulers/api.py",
        "def f():\n    from torchx_core.specs import _limits\n"
        "from torchx_core.specs.errors import _hint\n",
    )
    _write(
        fake_repo,
        "torchx_core/specs/register.py",
        "from torchx_core.plugins._registry import plugins_equal\n"
        "from torchx_core.specs._app import Role\nfrom torchx_core.util import __doc__\n",
    )
    _write(
        fake_repo,
        "torchx_core/schedulers/local/scheduler.py",
        "from torchx_core.schedulers.local import _state\n"
        "from torchx_core.schedulers._logs import x\nimport _thread\n",
    )
    found = [v for v in violations() if "a private name of" in v]
    assert sorted(v.split(": ")[0] for v in found) == [
        "torchx_core/dashboard/_logs.py:1 imports torchx_core.cli._term",
        "torchx_core/dashboard/_logs.py:1 imports torchx_core.cli._term.sanitize",
        "torchx_core/schedulers/api.py:2 imports torchx_core.specs._limits",
        "torchx_core/schedulers/api.py:3 imports torchx_core.specs.errors._hint",
        "torchx_core/specs/register.py:1 imports torchx_core.plugins._registry",
        "torchx_core/specs/register.py:1 imports torchx_core.plugins._registry.plugins_equal",
    ]  # inside the package that holds it, dunder names and the standard library's are fine
    assert "a private name of torchx_core.cli is imported from outside it" in found[0]


def test_checker_flags_private_attribute_reach(fake_repo: Path) -> None:
    _write(
        fake_repo,
        "torchx_core/cli/cmd_base.py",
        "def searched(runner):\n    return runner._scheduler('x').lookup_scope()\n",
    )
    _write(
        fake_repo,
        "torchx_core/cli/cmd_ok.py",
        "class C:\n    def f(self):\n        return self._x, C.__name__\n",
    )
    _write(fake_repo, "torchx_core/runner/api.py", "def f(s):\n    return s._scheduler\n")
    found = private_attribute_reaches()
    assert found == ["torchx_core/cli/cmd_base.py:2 runner._scheduler"]
