"""The launcher component, compiled with the KFP compiler and read back as IR YAML."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import compiler, dsl

from torchx_core import specs
from torchx_kfp import InvalidKfpOptionsError, launch, launcher_component

pytestmark = pytest.mark.kfp


_RES = specs.Resource(cpu=1, gpu=0, memMB=512)


def _app(num_replicas: int = 2) -> specs.AppDef:
    return specs.AppDef(
        name="ddp",
        roles=[
            specs.Role(
                "trainer",
                image="img",
                entrypoint="python",
                args=["-c", "pass"],
                num_replicas=num_replicas,
                resource=_RES,
            ),
            specs.Role("ps", image="img", entrypoint="python", resource=_RES),
        ],
    )


def _compile(fn: Any, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(fn, str(out))
    return yaml.safe_load(out.read_text())


def _const(task: dict[str, Any], name: str) -> Any:
    return task["inputs"]["parameters"][name]["runtimeValue"]["constant"]


def test_launch_compiles_a_lightweight_step(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="launch")
    def pipeline() -> str:
        return launch(app, scheduler="slurm", cfg={"partition": "gpu"}).outputs["app_handle"]

    spec = _compile(pipeline, tmp_path)
    (task,) = spec["root"]["dag"]["tasks"].values()
    assert json.loads(_const(task, "app_json")) == app.to_dict()
    assert _const(task, "scheduler") == "slurm"
    assert json.loads(_const(task, "cfg_json")) == {"partition": "gpu"}
    assert _const(task, "job_id") == "{{$.pipeline_job_uuid}}"
    assert _const(task, "task_name") == "{{$.pipeline_task_name}}"
    assert task["cachingOptions"].get("enableCache", False) is False
    assert "retryPolicy" not in task  # engine retries default to 0
    assert task["taskInfo"]["name"] == "ddp"
    (executor,) = spec["deploymentSpec"]["executors"].values()
    container = executor["container"]
    assert (
        container["image"] == "torchx-kfp-launcher:latest"
    )  # what `make kfp-launcher-image` builds
    shipped = "\n".join(container["command"])
    assert "def torchx_launcher(" in shipped
    assert "from torchx_kfp.runtime import run_launcher" in shipped
    assert "pip install" not in shipped  # install_kfp_package=False
    outputs = spec["components"]["comp-torchx-launcher"]["outputDefinitions"]["parameters"]
    assert set(outputs) == {"app_handle", "state", "status_json", "ui_url"}


def test_launch_with_component_retries_and_caching(tmp_path: Path) -> None:
    @dsl.pipeline(name="launch")
    def pipeline() -> None:
        launch(
            component="utils.echo",
            component_args=["--msg", "hi"],
            retries=2,
            enable_caching=True,
            base_image="ghcr.io/acme/torchx:1",
        )

    spec = _compile(pipeline, tmp_path)
    (task,) = spec["root"]["dag"]["tasks"].values()
    assert _const(task, "component") == "utils.echo"
    assert _const(task, "component_args") == ["--msg", "hi"]
    assert _const(task, "app_json") == ""
    assert task["retryPolicy"]["maxRetryCount"] == 2
    assert task["cachingOptions"]["enableCache"] is True
    (executor,) = spec["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == "ghcr.io/acme/torchx:1"


def test_two_steps_pass_the_handle(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="two")
    def pipeline() -> None:
        first = launch(app)
        launch(component="utils.echo", component_args=["--msg", "after"], after=first)

    spec = _compile(pipeline, tmp_path)
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"torchx-launcher", "torchx-launcher-2"}
    assert tasks["torchx-launcher-2"]["dependentTasks"] == ["torchx-launcher"]


def test_resources_passthrough_goes_to_the_app(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="pass")
    def pipeline() -> None:
        task = launch(app, pass_resources=True)
        task.set_cpu_limit("8").set_memory_limit("16Gi")

    spec = _compile(pipeline, tmp_path)
    (task,) = spec["root"]["dag"]["tasks"].values()
    assert _const(task, "pass_resources") is True
    comp = spec["components"]["comp-torchx-launcher"]
    assert comp["taskConfigPassthroughs"] == [{"field": "RESOURCES"}]


def test_resources_on_launcher_without_passthrough_stay_on_the_pod(tmp_path: Path) -> None:
    @dsl.pipeline(name="nopass")
    def pipeline() -> None:
        launch(_app()).set_cpu_limit("1")

    spec = _compile(pipeline, tmp_path)
    assert "taskConfigPassthroughs" not in spec["components"]["comp-torchx-launcher"]
    (executor,) = spec["deploymentSpec"]["executors"].values()
    assert executor["container"]["resources"]["resourceCpuLimit"] == "1"


def test_launcher_component_is_cached_per_settings() -> None:
    assert launcher_component() is launcher_component()
    assert launcher_component(pass_resources=True) is not launcher_component()


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((), {}, "exactly one of app"),
        ((_app(),), {"component": "utils.echo"}, "exactly one of app"),
        ((_app(),), {"component_args": ["x"]}, "component_args needs component"),
        ((), {"component": "utils.echo", "component_args": "--msg hi"}, "list of str"),
        ((_app(),), {"retries": -1}, "retries must be an int >= 0"),
        (
            (_app(),),
            {"cfg": "a=b"},
            r"cfg must be a mapping \(dict\) of the scheduler\'s run options",
        ),
        (("{not json",), {}, "not AppDef JSON"),
        ((42,), {}, "must be an AppDef or its JSON"),
        ((_app(),), {"scheduler": ""}, "scheduler must be a scheduler name"),
        ((_app(),), {"scheduler": 3}, r"scheduler must be .*`torchx schedulers` lists them"),
        ((), {"component": 5}, r"component must be a component name \(str\)"),
        (
            (_app(),),
            {"wait_interval": "1s"},
            "wait_interval must be a finite number of seconds > 0",
        ),
        ((_app(),), {"wait_interval": -1}, "wait_interval must be a finite number of seconds > 0"),
        ((_app(),), {"wait_interval": 0}, "wait_interval must be a finite number of seconds > 0"),
        (
            (_app(),),
            {"unknown_state_timeout": None},
            "unknown_state_timeout must be a finite number of seconds >= 0",
        ),
        ((_app(),), {"pass_resources": "maybe"}, "pass_resources must be True or False"),
        ((_app(),), {"enable_caching": 1}, "enable_caching must be True or False"),
        ((_app(),), {"display_name": 3}, "display_name must be a str"),
        ((_app(),), {"after": "train"}, r"after must be a task .* got \['train'\]"),
        # scheduler names and run options are checked against the scheduler's runopts here,
        # when the pipeline is defined, not minutes later in the launcher pod
        (
            (_app(),),
            {"scheduler": "slurmm"},
            r"Scheduler backend: 'slurmm' does not exist. Valid schedulers: .*slurm",
        ),
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "priorty": 5}},
            r"unknown run option 'priorty'.*priority",
        ),
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "priority": "high"}},
            r"priority, must be of type: int, but was: 'high'",
        ),
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "priority": 5.5}},
            r"priority, must be of type: int, but was: 5.5",
        ),
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"priority": 5}},
            r"Required run option: queue",
        ),
        ((_app(),), {"cfg": {"grace_period": {"a": 1}}}, "grace_period, must be of type: float"),
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "ulimits": [object()]}},
            "not JSON",
        ),
    ],
)
def test_launch_validates(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidKfpOptionsError, match=message):
        launch(*args, **kwargs)


def test_int_run_options_travel_as_typed_json(tmp_path: Path) -> None:
    """A KFP ``dict`` parameter turns 5 into 5.0; run options travel as a JSON string, which
    keeps the types the scheduler's runopts declare (issue 13, fault 3)."""

    @dsl.pipeline(name="typed-cfg")
    def pipeline() -> None:
        launch(
            _app(),
            scheduler="aws_batch",
            cfg={"queue": "q", "priority": 5, "privileged": True, "ulimits": ["nofile=1024:2048"]},
        )

    spec = _compile(pipeline, tmp_path)
    (task,) = spec["root"]["dag"]["tasks"].values()
    carried = _const(task, "cfg_json")
    assert isinstance(carried, str)
    decoded = json.loads(carried)
    assert decoded == {
        "queue": "q",
        "priority": 5,
        "privileged": True,
        "ulimits": ["nofile=1024:2048"],
    }
    assert type(decoded["priority"]) is int
    inputs = spec["components"]["comp-torchx-launcher"]["inputDefinitions"]["parameters"]
    assert inputs["cfg_json"]["parameterType"] == "STRING"
    assert "cfg" not in inputs


def test_float_run_option_given_as_int_is_accepted(tmp_path: Path) -> None:
    @dsl.pipeline(name="float-cfg")
    def pipeline() -> None:
        launch(_app(), cfg={"grace_period": 2})  # runopts accept an int for a float

    (task,) = _compile(pipeline, tmp_path)["root"]["dag"]["tasks"].values()
    assert json.loads(_const(task, "cfg_json")) == {"grace_period": 2}
    assert _const(task, "task_id") == "{{$.pipeline_task_uuid}}"


def test_launch_reports_every_problem_at_once() -> None:
    with pytest.raises(InvalidKfpOptionsError) as info:
        launch(_app(), scheduler="", retries=-1, wait_interval=None)
    message = str(info.value)
    for part in ("scheduler must be", "retries must be", "wait_interval must be"):
        assert part in message


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scheduler": None}, "scheduler must be a scheduler name"),
        ({"cfg": "a=b"}, r"cfg must be a mapping \(dict\) of the scheduler\'s run options"),
        ({"scheduler": "nope"}, "Scheduler backend: 'nope' does not exist"),
        (
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "priority": "x"}},
            "must be of type: int",
        ),
    ],
)
def test_cancel_apps_on_exit_validates(kwargs: dict[str, Any], message: str) -> None:
    from torchx_kfp import cancel_apps_on_exit

    with pytest.raises(InvalidKfpOptionsError, match=message):
        cancel_apps_on_exit(**kwargs)


def test_module_default_base_image_applies_to_steps_defined_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchx_kfp.launcher

    monkeypatch.setattr(torchx_kfp.launcher, "DEFAULT_BASE_IMAGE", "registry.example.com/tx:7")

    @dsl.pipeline(name="default-image")
    def pipeline() -> None:
        launch(_app())
        launch(_app(), base_image="ghcr.io/acme/other:1")

    images = {
        e["container"]["image"]
        for e in _compile(pipeline, tmp_path)["deploymentSpec"]["executors"].values()
    }
    assert images == {"registry.example.com/tx:7", "ghcr.io/acme/other:1"}


def test_launcher_base_image_is_validated() -> None:
    with pytest.raises(InvalidKfpOptionsError, match="base_image"):
        launcher_component("")


def test_exit_handler_cancels_leftover_apps(tmp_path: Path) -> None:
    from torchx_kfp import cancel_apps_on_exit

    @dsl.pipeline(name="with-cleanup")
    def pipeline() -> None:
        cleanup = cancel_apps_on_exit(scheduler="slurm", cfg={"partition": "p"})
        with dsl.ExitHandler(cleanup):
            launch(_app(), scheduler="slurm")

    spec = _compile(pipeline, tmp_path)
    tasks = spec["root"]["dag"]["tasks"]
    exit_task = tasks["torchx-cancel-job-apps"]
    assert exit_task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert _const(exit_task, "job_id") == "{{$.pipeline_job_uuid}}"
    assert _const(exit_task, "scheduler") == "slurm"
    assert json.loads(_const(exit_task, "cfg_json")) == {"partition": "p"}
    assert exit_task["cachingOptions"].get("enableCache", False) is False
    shipped = "\n".join(
        spec["deploymentSpec"]["executors"]["exec-torchx-cancel-job-apps"]["container"]["command"]
    )
    assert "from torchx_kfp.runtime import cancel_job_apps" in shipped


def _one(name: str = "one", **role: Any) -> specs.AppDef:
    return specs.AppDef(name, roles=[specs.Role("r", image="img", entrypoint="python", **role)])


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        # the scheduler's dry-run, when the pipeline is defined (as container_from_app refuses)
        ((specs.AppDef("empty", roles=[]),), {}, "app `empty` has no roles"),
        ((_one(num_replicas=0),), {}, "role `r` has num_replicas=0"),
        ((_one(num_replicas=100000),), {}, "asks for 100000 replicas, more than the limit"),
        (
            (_one(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q"}},
            r"cannot run on `aws_batch`: role `r` has no resource",
        ),
        ((), {"component": "no_such.component"}, "Component `no_such.component` not found"),
        (
            (),
            {"component": "utils.echo", "component_args": ["--bogus", "1"]},
            "unrecognized arguments: --bogus 1",
        ),
        # a bool is not an int run option
        (
            (_app(),),
            {"scheduler": "aws_batch", "cfg": {"queue": "q", "priority": True}},
            r"priority, must be of type: int, but was: True",
        ),
    ],
    ids=[
        "no_roles",
        "zero_replicas",
        "too_many_replicas",
        "batch_without_resource",
        "unknown_component",
        "bad_component_args",
        "bool_priority",
    ],
)
def test_launch_dry_runs_the_app_at_definition(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidKfpOptionsError, match=message):
        launch(*args, **kwargs)


def test_dry_run_leaves_run_time_values_to_the_pod(tmp_path: Path) -> None:
    """Resources passed through from the task, and component arguments that are pipeline
    outputs, are only known at run time: the definition accepts them."""

    @dsl.pipeline(name="late-values")
    def pipeline(msg: str = "hi") -> None:
        launch(_one("batchy"), scheduler="aws_batch", cfg={"queue": "q"}, pass_resources=True)
        launch(component="utils.echo", component_args=["--msg", msg])

    assert len(_compile(pipeline, tmp_path)["root"]["dag"]["tasks"]) == 2


@pytest.mark.parametrize("where", ["env", "component_args"])
def test_an_upstream_artifact_is_refused_at_definition(where: str) -> None:
    """An artifact output cannot travel in the launcher's str/dict inputs (KFP passes null)."""
    with pytest.raises(
        InvalidKfpOptionsError,
        match=rf"{where} value 'tracker_metrics' is an artifact output .*uri",
    ):

        @dsl.pipeline(name="artifact-in-env")
        def pipeline() -> None:
            first = launch(_app())
            metrics = first.outputs["tracker_metrics"]
            if where == "env":
                launch(_app(), env={"METRICS": metrics})
            else:
                launch(component="utils.echo", component_args=["--msg", metrics])
