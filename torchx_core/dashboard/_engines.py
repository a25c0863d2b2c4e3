"""The engine that owns an app, read from its owner token, as a link back to that engine's UI.

Owner tokens (recorded by the adapters through ``Runner.set_owner``)::

    airflow:<dag>/<task>/<run>/<map index>#try=<n>
        -> <airflow>/dags/<dag>/runs/<run>/tasks/<task>
    prefect:<flow run>#run=<n>/<task>/<task run>#try=<n>
        -> <prefect>/runs/flow-run/<flow run>
    prefect-worker:<flow run>
        -> <prefect>/runs/flow-run/<flow run>
    kfp:<job>/<task>/<task id>@<host>/<pid>
        -> <kfp>/#/runs/details/<job>

The engines' base URLs are given to ``torchx dashboard --engine-url airflow=http://...``; without
one the owner is shown as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["EngineLink", "engine_link"]

ENGINES = ("airflow", "prefect", "kfp")


@dataclass(frozen=True)
class EngineLink:
    """Who owns the app: the engine, what it calls the owner, and a URL when known."""

    engine: str
    label: str
    url: str | None


def _q(part: str) -> str:
    return quote(part, safe="")


def engine_link(owner: str | None, urls: Mapping[str, str]) -> EngineLink | None:
    """The owner's engine and a link to it (``urls``: engine -> base URL); None if no owner."""
    if not owner:
        return None
    kind, _, rest = owner.partition(":")
    if kind == "airflow":
        parts = rest.split("#", 1)[0].split("/")
        if len(parts) >= 3:
            dag, task, run = parts[0], parts[1], "/".join(parts[2:-1]) or parts[2]
            base = urls.get("airflow")
            url = f"{base}/dags/{_q(dag)}/runs/{_q(run)}/tasks/{_q(task)}" if base else None
            return EngineLink("airflow", f"DAG {dag}, run {run}, task {task}", url)
    if kind in ("prefect", "prefect-worker"):
        flow_run = rest.split("#", 1)[0].split("/", 1)[0]
        base = urls.get("prefect")
        url = f"{base}/runs/flow-run/{_q(flow_run)}" if base and flow_run else None
        return EngineLink("prefect", f"flow run {flow_run}", url)
    if kind == "kfp":
        job = rest.split("/", 1)[0]
        base = urls.get("kfp")
        url = f"{base}/#/runs/details/{_q(job)}" if base and job else None
        return EngineLink("kfp", f"pipeline run {job}", url)
    return EngineLink("", owner, None)
