"""Mutation testing of the core logic with mutmut, one target (modules + unit tests) at a time.

Usage (from the repository root, after ``make venv``)::

    .venv/bin/python scripts/mutation.py                 # every target, then the overall score
    .venv/bin/python scripts/mutation.py specs local     # only these targets
    .venv/bin/python scripts/mutation.py --list          # the targets and what they cover

Each target runs in its own scratch copy of the repository (``build/mutation/<target>``) with a
``[tool.mutmut]`` section naming only that target's modules and unit tests, so a target finishes in
minutes on a small machine and targets can be re-run one by one. The script prints, per target and
overall, the number of mutants killed and the score, then lists every surviving mutant (``mutmut
show <name>`` inside the scratch copy prints its diff). Exit status 1 when the overall score is
below ``--min-score``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRATCH = REPO / "build" / "mutation"
MUTMUT = Path(sys.executable).with_name("mutmut")


@dataclass(frozen=True)
class Target:
    """Functions to mutate and the unit tests that must kill the mutants.

    ``functions`` maps a module path to the functions mutated in it: ``"name"`` for a function,
    ``"Class.method"`` for a method, ``"*"`` for every function of the module.
    """

    functions: dict[str, tuple[str, ...]]
    tests: tuple[str, ...]

    def patterns(self) -> list[str]:
        """mutmut mutant-name globs selecting exactly these functions."""
        out = []
        for path, names in self.functions.items():
            module = path.removesuffix(".py").replace("/", ".")
            for name in names:
                if name == "*":
                    out.append(f"{module}.*")
                elif "." in name:
                    cls, meth = name.split(".")
                    out.append(f"{module}.x\u01c1{cls}\u01c1{meth}__mutmut_*")
                else:
                    out.append(f"{module}.x_{name}__mutmut_*")
        return out


TARGETS: dict[str, Target] = {
    # specs: run option casts and parsing, status formatting and JSON, app handles, overlays
    "specs": Target(
        functions={
            "torchx_core/specs/_runopts.py": (
                "_cast",
                "_split_items",
                "_split_cfg_str",
                "_unwrap_optional",
                "_to_camel",
                "runopt.cast_to_type",
                "runopts.add",
                "runopts.get",
                "runopts.resolve",
                "runopts.cfg_from_str",
                "runopts.cfg_from_json_repr",
                "runopts.is_type",
            ),
            "torchx_core/specs/_status.py": (
                "AppStatus.format",
                "AppStatus._format_replica",
                "AppStatus.to_json",
                "AppStatus.raise_for_status",
                "parse_app_handle",
                "make_app_handle",
                "_is_backend_name",
            ),
            "torchx_core/specs/overlays.py": ("*",),
        },
        tests=("tests/specs",),
    ),
    # the local supervisor's retry policies and budgets
    "local": Target(
        functions={
            "torchx_core/schedulers/local/_supervisor.py": (
                "Supervisor.on_exit",
                "Supervisor.restart",
                "Supervisor.run_barriers",
            ),
        },
        tests=(
            "tests/schedulers/test_local_retry_policy.py",
            "tests/schedulers/test_local_scheduler.py",
        ),
    ),
    # every scheduler's state mapping (the tables themselves are module-level literals, which
    # mutmut does not mutate: tests compare each with an independently written literal table)
    "slurm": Target(
        functions={
            "torchx_core/schedulers/slurm/_status.py": (
                "appstate_from_slurm_state",
                "_state_of",
                "_exit",
                "_sacct_exit",
                "_number",
                "role_and_replica",
                "_replica_state",
                "describe_from_records",
            ),
        },
        tests=("tests/schedulers/test_slurm_scheduler.py", "tests/schedulers/test_slurm_status.py"),
    ),
    "states": Target(
        functions={
            "torchx_core/schedulers/docker/scheduler.py": ("_replica_state",),
            "torchx_core/schedulers/aws/batch.py": ("_job_state",),
            "torchx_core/schedulers/lsf/scheduler.py": ("_state",),
            "torchx_core/schedulers/kubernetes/scheduler.py": (
                "_volcano_state",
                "_jobset_state",
                "_volcano_task_states",
            ),
        },
        tests=(
            "tests/schedulers/test_docker_scheduler.py",
            "tests/schedulers/test_aws_batch_scheduler.py",
            "tests/schedulers/test_lsf_scheduler.py",
            "tests/schedulers/test_kubernetes_scheduler.py",
            "tests/schedulers/test_kubernetes_status.py",
            "tests/schedulers/test_state_functions.py",
        ),
    ),
    # Kubernetes resource mapping
    "kubernetes": Target(
        functions={
            "torchx_core/schedulers/kubernetes/_pods.py": (
                "cpu_quantity",
                "resource_requirements",
                "node_selector",
                "tolerations",
                "replica_status_from_pods",
            ),
        },
        tests=(
            "tests/schedulers/test_kubernetes_scheduler.py",
            "tests/schedulers/test_kubernetes_status.py",
        ),
    ),
    # the adapters' state tables (Airflow, KFP, Prefect)
    "adapters": Target(
        functions={
            "torchx_airflow/states.py": ("*",),
            "torchx_kfp/states.py": ("*",),
            "torchx_prefect/states.py": ("*",),
        },
        tests=(
            "tests/airflow/test_airflow_states.py",
            "tests/airflow/test_airflow_state_messages.py",
            "tests/kfp/test_kfp_states.py",
            "tests/kfp/test_kfp_state_messages.py",
            "tests/prefect/test_states.py",
        ),
    ),
    # the app lifecycle's decisions: phases, grace, names, reattach/reconcile, ownership
    "lifecycle": Target(
        functions={
            "torchx_core/runner/lifecycle.py": (
                "phase_of",
                "GraceClock.observe",
                "app_name",
                "AppLifecycle._find",
                "AppLifecycle._adoptable",
                "AppLifecycle._reconcile",
                "AppLifecycle._owns",
                "AppLifecycle._observe",
                "AppLifecycle.result",
                "_is_named",
                "_seconds",
            ),
        },
        tests=("tests/runner/test_lifecycle.py",),
    ),
    # the shared status and list reads (the StatusWatcher object)
    "status_watch": Target(
        functions={"torchx_core/runner/status_watch.py": ("*",)},
        tests=("tests/runner/test_status_watch.py", "tests/runner/test_shared_list.py"),
    ),
    # the Runner: handles, status_many, shared reads, wait, cancel (and the events they record)
    "runner": Target(
        functions={
            "torchx_core/runner/api.py": (
                "Runner.status",
                "Runner.status_many",
                "Runner.watch_key",
                "Runner.watch_status",
                "Runner.awatch_status",
                "Runner.watch",
                "Runner.unwatch",
                "Runner.shared_list",
                "Runner._wait",
                "Runner.cancel",
                "Runner.name_lock",
                "Runner.submit_order",
                "Runner.set_owner",
                "Runner.owner",
                "Runner.list",
            ),
        },
        tests=(
            "tests/runner/test_runner_api.py",
            "tests/runner/test_runner_events.py",
            "tests/runner/test_status_watch.py",
            "tests/runner/test_shared_list.py",
            "tests/runner/test_lifecycle.py",  # the Runner's main user (name_lock, submit_order)
            # mutmut's own instrumentation imports importlib.metadata into every test process
            "--deselect",
            "tests/runner/test_runner_api.py::test_importing_the_runner_is_light",
        ),
    ),
    # the local scheduler's state: markers, instances, dead-supervisor sweep, GC
    "local_state": Target(
        functions={
            "torchx_core/schedulers/local/_state.py": (
                "read_marker",
                "is_owned",
                "sweep_target",
                "read_status",
                "_unless_stopped",
                "final_from_lock",
                "supervisor_pid",
                "collect_garbage",
                "_collectable",
            ),
        },
        tests=(
            "tests/schedulers/local/test_local_state_unit.py",
            "tests/schedulers/local/test_local_state_functions.py",
            "tests/schedulers/test_local_scheduler.py",
        ),
    ),
    # the Slurm job comment (app name and owner)
    "slurm_comment": Target(
        functions={"torchx_core/schedulers/slurm/_comment.py": ("*",)},
        tests=("tests/schedulers/test_slurm_comment.py",),
    ),
    # the Prefect launch arguments, digests and results
    "prefect_launch": Target(
        functions={"torchx_prefect/_launch.py": ("*",)},
        tests=("tests/prefect/test_launch.py",),
    ),
    # the CLI's own decisions (exit codes, messages)
    "cli": Target(
        functions={
            "torchx_core/cli/cmd_status.py": ("*",),
            "torchx_core/cli/cmd_cancel.py": ("*",),
        },
        tests=("tests/cli/test_cli_main.py", "tests/cli/test_cli_status_cancel.py"),
    ),
}

_COPY = (
    "torchx_core",
    "torchx_airflow",
    "torchx_kfp",
    "torchx_prefect",
    "tests",
    "examples",
    "docs",
    "conftest.py",
)
# mutmut runs the tests inside <scratch>/mutants: what they read beside the sources goes there too
_ALSO_COPY = ("docs", "examples", "conftest.py")


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(name: str, target: Target) -> Path:
    """Fresh scratch copy of the repository whose pyproject mutates only ``target``."""
    work = SCRATCH / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for item in _COPY:
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, work / item)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pyproject += (
        "\n[tool.mutmut]\n"
        'source_paths = ["torchx_core", "torchx_airflow", "torchx_kfp", "torchx_prefect"]\n'
        f"only_mutate = {_toml_list(list(target.functions))}\n"
        "pytest_add_cli_args_test_selection = "
        f"{_toml_list([*target.tests, '-m', 'not integration'])}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        "use_git_change_detection = false\n"
        f"also_copy = {_toml_list(_ALSO_COPY)}\n"
    )
    (work / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return work


def run_target(name: str, target: Target, max_children: int) -> tuple[int, int, list[str]]:
    """Run mutmut for one target; return (killed, total, surviving mutant names and statuses)."""
    work = prepare(name, target)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)
    patterns = target.patterns()
    subprocess.run(
        [str(MUTMUT), "run", "--max-children", str(max_children), *patterns],
        cwd=work,
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    listing = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    killed = total = 0
    survivors: list[str] = []
    for line in listing.splitlines():
        mutant, _, status = line.strip().rpartition(": ")
        if not mutant or not any(fnmatch.fnmatchcase(mutant, p) for p in patterns):
            continue
        if status == "skipped":
            continue
        total += 1
        if status in ("killed", "timeout"):
            killed += 1
        else:  # survived, no tests (no unit test reaches it), suspicious, not checked
            survivors.append(f"{mutant}: {status}")
    return killed, total, survivors


def _score(killed: int, total: int) -> float:
    return 100.0 * killed / total if total else 100.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", help=f"subset of {sorted(TARGETS)}")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant workers")
    parser.add_argument("--min-score", type=float, default=85.0, help="fail below this score (%%)")
    args = parser.parse_args(argv)
    if args.list:
        for name, target in TARGETS.items():
            funcs = "; ".join(f"{m}: {', '.join(f)}" for m, f in target.functions.items())
            print(f"{name}: {funcs}  <-  {', '.join(target.tests)}")
        return 0
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; valid: {sorted(TARGETS)}")
    chosen = args.targets or list(TARGETS)
    killed = total = 0
    survivors: list[str] = []
    for name in chosen:
        t_killed, t_total, t_survivors = run_target(name, TARGETS[name], args.max_children)
        killed += t_killed
        total += t_total
        survivors += [f"{name}: {s}" for s in t_survivors]
        print(f"{name}: {t_killed}/{t_total} killed ({_score(t_killed, t_total):.1f}%)", flush=True)
    score = _score(killed, total)
    print(f"mutation score: {killed}/{total} killed ({score:.1f}%)")
    if survivors:
        print(f"survivors ({len(survivors)}):")
        for line in survivors:
            print(f"  {line}")
    return 0 if score >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
