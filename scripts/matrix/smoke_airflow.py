"""One real use of torchx_airflow in the interpreter's environment (run by scripts/matrix/run.py).

A DAG with a TorchXOperator (utils.echo on local_cwd) through ``dag.test()`` on SQLite in a
temporary AIRFLOW_HOME; the provider and its ``torchx`` connection type listed (Airflow's
ProvidersManager); ``examples/airflow/torchx_dag.py`` run as its docstring says.
Exits non-zero on any failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: the repository's example DAG (the matrix runs this script from a copy of the tree)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "airflow" / "torchx_dag.py"

DAG = """
import pendulum
from airflow.sdk import DAG
if not hasattr(DAG, "test"):  # Airflow 3.0: test() is on the core DAG class
    from airflow.models.dag import DAG
from torchx_airflow import TorchXOperator

with DAG("matrix_smoke", schedule=None, start_date=pendulum.datetime(2025, 1, 1)) as dag:
    TorchXOperator(task_id="echo", component="utils.echo", component_args=["--msg", "matrix-ok"],
                   scheduler="local_cwd", poll_interval=0.5)

if __name__ == "__main__":
    dr = dag.test()
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    print("MATRIX_STATES", states)
    ok = str(dr.state).endswith("success") and states.get("echo", "").endswith("success")
    raise SystemExit(0 if ok else 1)
"""

PROVIDERS = """
from airflow.providers_manager import ProvidersManager
pm = ProvidersManager()
hook = pm.hooks.get("torchx")
print("MATRIX_PROVIDER", "torchx-suite" if "torchx-suite" in pm.providers else "-",
      hook.hook_class_name if hook else "-")
"""


def run(args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise SystemExit(
            f"FAILED {' '.join(args)} (exit {out.returncode}):\n"
            f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    return out.stdout


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="matrix-airflow-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / "matrix_smoke.py").write_text(DAG)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "TORCHX_LOCAL_ROOT": str(home / "torchx"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
    bin_dir = Path(sys.executable).parent
    airflow = str(bin_dir / "airflow")
    run([airflow, "db", "migrate"], env)
    out = run([sys.executable, str(dags / "matrix_smoke.py")], env)
    assert "MATRIX_STATES" in out, out[-2000:]
    # the user-facing example as its docstring says to run it (exit 0 only on a successful run)
    out = run(
        [sys.executable, str(EXAMPLE)], {**env, "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLE.parent)}
    )
    assert ": success" in out, out[-2000:]
    # what `airflow providers list` / `airflow providers hooks` show, without two CLI start-ups
    listed = run([sys.executable, "-c", PROVIDERS], env)
    assert "MATRIX_PROVIDER torchx-suite torchx_airflow.hook.TorchXHook" in listed, listed[-2000:]
    print(
        "airflow smoke OK: dag.test() success, examples/airflow/torchx_dag.py success,"
        " provider listed, torchx connection type"
    )


if __name__ == "__main__":
    main()
