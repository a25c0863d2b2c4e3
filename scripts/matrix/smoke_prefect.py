"""One real use of torchx_prefect in the interpreter's environment (run by scripts/matrix/run.py).

A flow calling ``run_app`` (utils.echo on local_cwd) against a temporary ``prefect server``
(port ``MATRIX_PREFECT_PORT``, stopped by PID), and the ``torchx`` worker type found through
Prefect's collection registry. Exits non-zero on any failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

FLOW = """
import asyncio
from prefect import flow
from torchx_prefect import run_app

@flow
async def matrix_smoke():
    return await run_app("utils.echo", ["--msg", "matrix-ok"], scheduler="local_cwd")

if __name__ == "__main__":
    result = asyncio.run(matrix_smoke())
    print("MATRIX_RESULT", result)
    assert str(getattr(result, "state", result)).endswith("SUCCEEDED"), result

    from prefect.plugins import load_prefect_collections
    from prefect.workers.base import BaseWorker
    load_prefect_collections()
    worker = BaseWorker.get_worker_class_from_type("torchx")
    assert worker is not None and worker.type == "torchx", worker
    print("MATRIX_WORKER", worker)
"""


def main() -> None:
    port = os.environ.get("MATRIX_PREFECT_PORT", "14400")
    home = Path(tempfile.mkdtemp(prefix="matrix-prefect-"))
    url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_LOCAL_STORAGE_PATH=str(home / "storage"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_UI_ENABLED="false",
        TORCHX_LOCAL_ROOT=str(home / "torchx"),
    )
    prefect = str(Path(sys.executable).parent / "prefect")
    log = (home / "server.log").open("w")
    server = subprocess.Popen(
        [prefect, "server", "start", "--host", "127.0.0.1", "--port", port],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=3)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "prefect server did not start:\n"
                        + (home / "server.log").read_text()[-3000:]
                    ) from None
                time.sleep(1)
        (home / "flow.py").write_text(FLOW)
        out = subprocess.run(
            [sys.executable, str(home / "flow.py")],
            env={**env, "PREFECT_API_URL": url},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if out.returncode != 0 or "MATRIX_WORKER" not in out.stdout:
            raise SystemExit(
                f"flow failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
            )
        print("prefect smoke OK: run_app flow against a server, torchx worker type found")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


if __name__ == "__main__":
    main()
