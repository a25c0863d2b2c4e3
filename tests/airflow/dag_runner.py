"""Runs ``dag.test()`` of one DAG from a DAG file and prints a JSON report (test helper).

Usage: ``python dag_runner.py <dag_file>::<dag_id> [<dag_file>::<dag_id> ...] [--logical-date ISO]``

Each DAG file is loaded with ``runpy`` (so its ``if __name__ == "__main__"`` block does not run),
the DAG is found by id, ``dag.test()`` runs it in this process, and one line
``@@DAGTEST-REPORT@@{json}`` per DAG reports each task instance's state, try number and XComs
(mapped task instances as ``task_id[map_index]``).
Several DAGs run one after the other in the same interpreter (Airflow's import cost is paid
once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import runpy
import sys
from datetime import datetime
from typing import Any

REPORT_MARK = "@@DAGTEST-REPORT@@"
BEGIN_MARK = "@@DAGTEST-BEGIN@@"


def _xcoms(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    out: dict[str, dict[str, Any]] = {}
    with create_session() as session:
        rows = (
            session.query(XComModel)
            .filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id)
            .all()
        )
        for row in rows:
            value = row.value
            if isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            key = row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"
            out.setdefault(key, {})[row.key] = value
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dags", nargs="+", help="<dag_file>::<dag_id>")
    parser.add_argument("--logical-date", default=None)
    args = parser.parse_args(argv)
    kwargs: dict[str, Any] = {}
    if args.logical_date:
        when = datetime.fromisoformat(args.logical_date)
        kwargs = {"logical_date": when, "run_after": when}
    for spec in args.dags:
        dag_file, _, dag_id = spec.partition("::")
        run_one(dag_file, dag_id, kwargs)
    return 0


def run_one(dag_file: str, dag_id: str, kwargs: dict[str, Any]) -> None:
    """Runs one DAG with ``dag.test(**kwargs)`` and prints its report line."""
    print(BEGIN_MARK + dag_id, flush=True)
    namespace = runpy.run_path(dag_file, run_name="torchx_dag_under_test")
    from airflow.sdk import DAG

    dags = [v for v in namespace.values() if isinstance(v, DAG) and v.dag_id == dag_id]
    if not dags:
        raise SystemExit(f"no DAG {dag_id!r} in {dag_file}")
    dag = dags[0]
    dr = dag.test(**kwargs)
    xcoms = _xcoms(dag.dag_id, dr.run_id)
    tis = {}
    for ti in dr.get_task_instances():
        key = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        tis[key] = {
            "state": str(ti.state.value if hasattr(ti.state, "value") else ti.state),
            "try_number": ti.try_number,
            "xcom": xcoms.get(key, {}),
        }
    state = dr.state.value if hasattr(dr.state, "value") else str(dr.state)
    report = {"dag_id": dag_id, "dag_run_state": state, "run_id": dr.run_id, "tis": tis}
    print(REPORT_MARK + json.dumps(report, default=str), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
