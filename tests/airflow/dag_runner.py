"""Runs ``dag.test()`` of one DAG from a DAG file and prints a JSON report (test helper).

Usage: ``python dag_runner.py <dag_file> <dag_id> [--logical-date ISO]``

The DAG file is loaded with ``runpy`` (so its ``if __name__ == "__main__"`` block does not run),
the DAG is found by id, ``dag.test()`` runs it in this process, and one line
``@@DAGTEST-REPORT@@{json}`` reports each task instance's state, try number and XComs.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from datetime import datetime
from typing import Any

REPORT_MARK = "@@DAGTEST-REPORT@@"


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
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            out.setdefault(row.task_id, {})[row.key] = value
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dag_file")
    parser.add_argument("dag_id")
    parser.add_argument("--logical-date", default=None)
    args = parser.parse_args(argv)

    namespace = runpy.run_path(args.dag_file, run_name="torchx_dag_under_test")
    from airflow.sdk import DAG

    dags = [v for v in namespace.values() if isinstance(v, DAG) and v.dag_id == args.dag_id]
    if not dags:
        print(f"no DAG {args.dag_id!r} in {args.dag_file}", file=sys.stderr)
        return 2
    dag = dags[0]
    kwargs: dict[str, Any] = {}
    if args.logical_date:
        when = datetime.fromisoformat(args.logical_date)
        kwargs = {"logical_date": when, "run_after": when}
    dr = dag.test(**kwargs)
    xcoms = _xcoms(dag.dag_id, dr.run_id)
    tis = {
        ti.task_id: {
            "state": str(ti.state.value if hasattr(ti.state, "value") else ti.state),
            "try_number": ti.try_number,
            "xcom": xcoms.get(ti.task_id, {}),
        }
        for ti in dr.get_task_instances()
    }
    state = dr.state.value if hasattr(dr.state, "value") else str(dr.state)
    report = {"dag_run_state": state, "run_id": dr.run_id, "tis": tis}
    print(REPORT_MARK + json.dumps(report, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
