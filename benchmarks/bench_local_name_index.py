"""Attaching by name on the local scheduler: the cost with 0 and with N apps in the root.

``AppLifecycle.attach`` looks for a step's app by name before submitting it (every Airflow task
start, every Prefect/KFP step). Before the index by name, that look-up listed the whole root
(one ``status.json`` read per app, apps kept 7 days); with it (``<root>/.index``), it reads the
named apps only. This prints both look-ups, over a root of one real app plus N clones of it
(each indexed as a submit indexes it), so no supervisor runs.

usage: .venv/bin/python benchmarks/bench_local_name_index.py [--apps 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _clone(root: str, app_id: str, n: int) -> None:
    """``n`` copies of the finished app ``app_id`` under other ids and names, indexed."""
    from torchx_core.schedulers.local import _name_index

    src = Path(root, app_id)
    doc = json.loads((src / "status.json").read_text())
    for i in range(n):
        new_id, name = f"other{i}-{app_id.rsplit('-', 1)[1]}", f"other{i}"
        dst = Path(root, new_id)
        shutil.copytree(src, dst, symlinks=True)
        (dst / ".torchx-app").write_text((src / ".torchx-app").read_text().replace(app_id, new_id))
        (dst / "status.json").write_text(json.dumps({**doc, "app_id": new_id, "name": name}))
        _name_index.add(root, name, new_id)


def _time(fn: object, repeat: int) -> float:
    """Median milliseconds of ``fn()``."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - began) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-name-index-")
    os.environ["TORCHX_LOCAL_ROOT"] = root
    from torchx_core.runner import get_runner
    from torchx_core.specs import AppDef, Role

    try:
        with get_runner() as runner:
            app = AppDef(name="step", roles=[Role(name="r", image=root, entrypoint="true")])
            handle = runner.run(app, "local_cwd")
            runner.wait(handle)
            app_id = handle.rsplit("/", 1)[1]

            def by_index() -> None:
                assert [r.app_id for r in runner.list_named("local_cwd", "step") or []] == [app_id]

            def by_listing() -> None:  # the look-up before the index
                assert [r.app_id for r in runner.list("local_cwd") if r.name == "step"] == [app_id]

            print(f"{'apps in the root':>18} {'index by name':>14} {'full listing':>13}")
            for n in (0, args.apps):
                if n:
                    _clone(root, app_id, n)
                idx, full = (
                    _time(by_index, args.repeat),
                    _time(by_listing, max(3, args.repeat // 4)),
                )
                print(f"{n + 1:>18} {idx:>11.2f} ms {full:>10.2f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
