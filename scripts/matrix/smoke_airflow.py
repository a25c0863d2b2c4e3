"""One real use of torchx_airflow in the interpreter's environment (run by scripts/matrix/run.py).

A DAG with a TorchXOperator (utils.echo on local_cwd) through ``dag.test()`` on SQLite in a
temporary AIRFLOW_HOME; the provider listed; a ``torchx`` connection saved with that type.
Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DAG = '''
import pendulum
from airflow.sdk import DAG
from torchx_airflow import TorchXOperator

with DAG("matrix_smoke", schedule=None, start_date=pendulum.datetime(2025, 1, 1)) as dag:
    TorchXOperator(task_id="echo", component="utils.echo", component_args=["--msg", "matrix-ok"],
                   scheduler="local_cwd", poll_interval=0.5)

if __name__ == "__main__":
    dr = dag.test()
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    print("MATRIX_STATES", states)
    raise SystemExit(0 if str(dr.state).endswith("success") and states.get("echo", "").endswith("success") else 1)
'''


def run(args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"FAILED {' '.join(args)} (exit {out.returncode}):\n"
                         f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="matrix-airflow-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / "matrix_smoke.py").write_text(DAG)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "TORCHX_LOCAL_ROOT": str(home / "torchx"),
           "AIRFLOW__CORE__UNIT_TEST_MODE": "False"}
    bin_dir = Path(sys.executable).parent
    airflow = str(bin_dir / "airflow")
    run([airflow, "db", "migrate"], env)
    out = run([sys.executable, str(dags / "matrix_smoke.py")], env)
    assert "MATRIX_STATES" in out, out[-2000:]
    providers = run([airflow, "providers", "list", "-o", "json"], env)
    assert any(p.get("package_name") == "torchx-suite" for p in json.loads(providers)), providers
    run([airflow, "connections", "add", "matrix_tx", "--conn-type", "torchx",
         "--conn-extra", '{"scheduler": "local_cwd"}'], env)
    got = json.loads(run([airflow, "connections", "get", "matrix_tx", "-o", "json"], env))
    conn_type = got[0]["conn_type"] if isinstance(got, list) else got["conn_type"]
    assert conn_type == "torchx", got
    hooks = run([airflow, "providers", "hooks", "-o", "json"], env)
    assert '"torchx"' in hooks, hooks[-2000:]
    print("airflow smoke OK: dag.test() success, provider listed, torchx connection type")


if __name__ == "__main__":
    main()
