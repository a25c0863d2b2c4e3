"""``taskConfigPassthroughs: RESOURCES``: what reaches the app, checked wherever kfp lets us.

* Compiled IR: ``test_kfp_launcher.py`` checks the component declares the passthrough and the
  task carries the resources.
* kfp's own executor (what ``python3 -m kfp.dsl.executor_main`` runs in the pod), given the
  executor input a KFP backend's driver builds: the ``task_config`` parameter holding the task's
  Kubernetes ``resources``. The launched app (a real local-scheduler app) gets them.
* kfp.local: it has no driver, so it never fills ``task_config`` (kfp 2.16): the app keeps its
  own resources. Checked here, so a kfp.local that starts passing them is noticed.
* Not verified: a live KFP backend (none on this machine); that the driver's JSON has exactly
  the ``{"resources": {"limits": ..., "requests": ...}}`` shape comes from kfp's
  ``dsl.TaskConfig`` and executor sources, not from a run.
"""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import json
import sys
from pathlib import Path

import pytest
from kfp import dsl

from torchx_core import specs
from torchx_core.runner import get_runner
from torchx_kfp import launch, launcher_component

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.local]


def _app(name: str) -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                "worker",
                image="/tmp",
                entrypoint=sys.executable,
                args=["-c", "pass"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=256),
            )
        ],
    )


def _role_resource(handle: str) -> specs.Resource:
    with get_runner() as runner:
        described = runner.describe(handle)
    assert described is not None, handle
    return described.roles[0].resource


def test_kfp_executor_hands_the_task_resources_to_the_app(local_apps: Path, tmp_path: Path) -> None:
    from kfp.dsl.executor import Executor

    component = launcher_component(pass_resources=True)
    outputs = tmp_path / "outputs"
    executor_input = {
        "inputs": {
            "parameterValues": {
                "app_json": json.dumps(_app("kfpres").to_dict()),
                "scheduler": "local_cwd",
                "wait_interval": 0.1,
                "pass_resources": True,
                # injected by the backend's driver under the parameter's name
                "task_config": {
                    "resources": {
                        "limits": {"cpu": "3", "memory": "768Mi"},
                        "requests": {"cpu": "2", "memory": "512Mi"},
                    }
                },
            }
        },
        "outputs": {
            "parameters": {
                name: {"outputFile": str(outputs / name)}
                for name in ("app_handle", "state", "status_json", "ui_url")
            },
            "outputFile": str(outputs / "executor_output.json"),
        },
    }
    Executor(executor_input, component).execute()
    written = json.loads((outputs / "executor_output.json").read_text())["parameterValues"]
    assert written["state"] == "SUCCEEDED"
    res = _role_resource(written["app_handle"])
    assert (res.cpu, res.memMB) == (3, 768)  # limits win over requests


def test_kfp_local_does_not_fill_the_passthrough(kfp_local: Path) -> None:
    @dsl.pipeline(name="kfp-local-passthrough")
    def pipeline() -> str:
        task = launch(_app("kfplocalres"), pass_resources=True, wait_interval=0.1)
        task.set_cpu_limit("3").set_memory_limit("768Mi")
        return task.outputs["app_handle"]

    res = _role_resource(pipeline().output)
    assert (res.cpu, res.memMB) == (1, 256)  # the app's own: kfp.local left task_config empty
