"""The Airflow "TorchX app" extra link of a real task, on a real Airflow 3 deployment
(``scripts/services/airflow``), opened in a real browser: it lands on the app's dashboard page.

The task's ``torchx`` connection carries the ``dashboard_url`` of a ``torchx dashboard`` this
test starts over the deployment's local scheduler root.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_browser import artifacts_dir, chromium, dashboard_process
from support.airflow_deployment import AirflowDeployment, airflow_deployment  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.airflow,
    pytest.mark.browser,
    pytest.mark.local,
    pytest.mark.timeout(900),
]

DAG_ID = "live_dashboard_link"
CONN_ID = "torchx_dashboard"


@pytest.fixture(scope="module")
def dashboard(airflow_deployment: AirflowDeployment) -> Iterator[str]:  # noqa: F811
    env = {**airflow_deployment.env(), "TORCHX_LOCAL_ROOT": str(airflow_deployment.local_root)}
    with dashboard_process(["-s", "local_cwd", "--refresh", "1"], env) as url:
        yield url


def test_the_extra_link_of_a_real_task_opens_its_app_page(
    airflow_deployment: AirflowDeployment,  # noqa: F811 - the fixture imported above
    dashboard: str,
) -> None:
    dep = airflow_deployment
    dep.cli("connections", "delete", CONN_ID, check=False)
    dep.cli(
        "connections",
        "add",
        CONN_ID,
        "--conn-type",
        "torchx",
        "--conn-extra",
        json.dumps({"scheduler": "local_cwd", "dashboard_url": dashboard}),
    )
    shutil.copy(
        Path(__file__).parent / "dags" / "live_dashboard.py", dep.dags / "live_dashboard.py"
    )
    run = dep.trigger(DAG_ID)
    ti = dep.wait_ti(DAG_ID, run, "train", {"success", "failed"})
    assert ti["state"] == "success", dep.task_log(DAG_ID, run, "train", 1)
    handle = dep.xcom(DAG_ID, run, "train", "app_handle")
    links = dep.api("GET", f"/dags/{DAG_ID}/dagRuns/{run}/taskInstances/train/links")
    link = (links.get("extra_links") or links)["TorchX app"]
    assert link.startswith(dashboard + "/app?handle="), links
    with chromium() as browser:
        page: Any = browser.new_page()
        page.goto(link)
        page.locator("h1.handle").wait_for()
        assert page.locator("h1.handle").inner_text() == handle
        page.locator("#app-state", has_text="SUCCEEDED").wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts_dir() / "airflow-extra-link.png"), full_page=True)
        page.locator("a.log-link").first.click()
        page.locator("#log", has_text="trained-for-dashboard").wait_for(timeout=60_000)
