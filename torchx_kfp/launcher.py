"""The launcher step: a KFP lightweight component that runs any AppDef through the Runner.

A KFP task is one pod, so a multi-role or multi-replica app (or one that runs on Slurm, Ray,
AWS Batch, ...) runs as a launcher step: a small Python step that submits the app with the
TorchX Runner, streams every replica's log to the step log, waits, and succeeds or fails with
the app. See :mod:`torchx_kfp.runtime` for what it does at run time.

The component ships its function's source (KFP lightweight components). The function holds no
closure: the AppDef travels as a JSON parameter, and the body imports ``torchx_kfp.runtime``
(and through it ``torchx_core``). ``install_kfp_package=False``: the image must already hold
``torchx-suite[kfp]`` (kfp.local's ``SubprocessRunner(use_venv=False)`` uses the current
interpreter). KFP's ``sh -ec`` wrapper ``exec``s the step, so a SIGTERM sent only to the pod's
main process reaches the launcher, which cancels its app.

Run options (``cfg``) are checked against the scheduler's runopts when the pipeline is
defined (unknown scheduler, unknown key, wrong type, missing required option:
:class:`~torchx_kfp.InvalidKfpOptionsError`) and travel as a JSON string, so an int stays an
int (a KFP ``dict`` parameter carries every number as a double).

The app's name is derived from the pipeline job id, the task name and
``dsl.PIPELINE_TASK_ID_PLACEHOLDER`` (plus the AppDef), so a retried step finds its app while
the iterations of a ``dsl.ParallelFor`` get one app each, even for the very same AppDef. What
that placeholder is: under ``kfp.local`` a random id drawn per task execution (seen in the
tests; kfp.local has no retries); on a KFP backend the driver resolves it once per task, to
the id of the enclosing DAG execution (the MLMD driver: ``DAGExecutionID``, one per loop
iteration) or, in the 2025 driver rewrite, the parent task's id (read in kubeflow/pipelines'
``backend/src/v2/driver``, not run: no live KFP backend was available, so neither "one id per
iteration" nor "the same id for a retried pod" is verified there). If iterations of one
identical AppDef share an app on a backend, pass the loop item in ``env``
(``env={"ITEM": item}``), which makes each iteration's AppDef differ.

Example::

    from kfp import dsl
    import torchx_kfp

    @dsl.pipeline
    def pipeline() -> str:
        first = torchx_kfp.launch(app, scheduler="local_cwd")
        second = torchx_kfp.launch(other_app, scheduler="slurm", after=first)
        return second.outputs["app_handle"]
"""

# No ``from __future__ import annotations`` here: KFP reads the component function's
# annotations as objects.

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from torchx_core.runner.launch_options import LaunchOptions
from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_base
from torchx_core.runner.step_settings import SETTINGS
from torchx_core.specs import (
    AppDef,
    InvalidRunConfigException,
    MissingDependencyError,
    UnknownSchedulerException,
    import_optional,
)
from torchx_kfp.errors import InvalidKfpOptionsError

__all__ = [
    "DEFAULT_BASE_IMAGE",
    "cancel_apps_on_exit",
    "cancel_component",
    "launch",
    "launcher_component",
    "torchx_cancel_job_apps",
    "torchx_launcher",
]

logger: logging.Logger = logging.getLogger(__name__)

# The component function's signature needs kfp's TaskConfig at definition time.
dsl = import_optional("kfp.dsl", "kfp", "torchx_kfp.launcher")

DEFAULT_BASE_IMAGE = "torchx-kfp-launcher:latest"
"""The launcher steps' image when ``base_image`` is not given (read when a step is defined).

``make kfp-launcher-image`` builds it (``docker/kfp-launcher/Dockerfile``); set this to the
name you pushed it under to use it for every step defined afterwards::

    import torchx_kfp.launcher
    torchx_kfp.launcher.DEFAULT_BASE_IMAGE = "registry.example.com/ml/torchx-kfp:0.1"
"""


def _image(base_image: str | None) -> str:
    image = DEFAULT_BASE_IMAGE if base_image is None else base_image
    if not isinstance(image, str) or not image:
        raise InvalidKfpOptionsError(
            f"base_image must be a non-empty image name (the launcher image, see"
            f" `make kfp-launcher-image`), got {image!r}"
        )
    return image


def torchx_launcher(
    app_json: str = "",
    component: str = "",
    component_args: Optional[list[str]] = None,  # noqa: UP045 - KFP needs typing.Optional
    scheduler: str = "local_cwd",
    cfg_json: str = "",
    env: Optional[dict[str, str]] = None,  # noqa: UP045
    job_id: str = "",
    task_name: str = "",
    task_id: str = "",
    wait_interval: float = 1.0,
    unknown_state_timeout: float = 300.0,
    pass_resources: bool = False,
    dashboard_url: str = "",
    task_config: dsl.TaskConfig = None,  # type: ignore[name-defined] # KFP fills it
    tracker_metrics: dsl.Output[dsl.Metrics] = None,  # type: ignore[name-defined] # KFP fills it
    tracker_artifacts: dsl.Output[dsl.Artifact] = None,  # type: ignore[name-defined] # KFP fills it
) -> NamedTuple(  # type: ignore[valid-type] # KFP's functional output syntax
    "Outputs", [("app_handle", str), ("state", str), ("status_json", str), ("ui_url", str)]
):
    """Runs a TorchX app through the Runner and waits for it (KFP launcher step).

    Args:
        app_json: the AppDef as JSON (``json.dumps(app.to_dict())``)
        component: or a TorchX component name (``utils.echo``) ...
        component_args: ... with its arguments
        scheduler: the TorchX scheduler to run the app on
        cfg_json: the scheduler's run config as a JSON object (a KFP ``dict`` parameter
            would turn ints into floats)
        env: environment variables added to every role (e.g. an upstream step's app handle)
        job_id: the pipeline job id (names the app deterministically)
        task_name: the pipeline task name (names the app deterministically)
        task_id: the pipeline task id placeholder (tells ParallelFor iterations apart)
        wait_interval: seconds between status polls (> 0: the poll interval of every engine)
        unknown_state_timeout: seconds an UNKNOWN app is tolerated before the step fails
        pass_resources: apply the resources asked on this task to the app's roles
        dashboard_url: a ``torchx dashboard`` address: the ``ui_url`` output is then the app's
            page there ("" : ``$TORCHX_DASHBOARD_URL`` of the step, else the scheduler's UI URL)
        task_config: filled by KFP with the task's settings (resources passthrough)
        tracker_metrics: output: the numeric metadata the app recorded through its tracker
            (``torchx_core.tracker``), one metric each
        tracker_artifacts: output: the app's tracker artifacts (name -> path and metadata)
    """
    import collections

    from torchx_kfp.runtime import run_launcher

    resources = None
    if pass_resources and task_config is not None:
        resources = task_config.resources
    result = run_launcher(
        app_json=app_json,
        component=component,
        component_args=component_args,
        scheduler=scheduler,
        cfg_json=cfg_json,
        env=env,
        job_id=job_id,
        task_name=task_name,
        task_id=task_id,
        wait_interval=wait_interval,
        unknown_state_timeout=unknown_state_timeout,
        resources=resources,
        dashboard_url=dashboard_url,
    )
    from torchx_kfp.runtime import publish_tracker_results

    publish_tracker_results(result.app_handle, tracker_metrics, tracker_artifacts)
    outputs = collections.namedtuple("outputs", ["app_handle", "state", "status_json", "ui_url"])
    return outputs(result.app_handle, result.state, result.status_json, result.ui_url)


def torchx_cancel_job_apps(
    job_id: str,
    scheduler: str = "local_cwd",
    cfg_json: str = "",
    final_status: dsl.PipelineTaskFinalStatus = None,  # type: ignore[name-defined] # KFP fills it
) -> list[str]:
    """Cancels the unfinished apps of this pipeline job's launcher steps (KFP exit handler).

    Args:
        job_id: the pipeline job id
        scheduler: the TorchX scheduler the launcher steps ran on
        cfg_json: the scheduler's run config as a JSON object
        final_status: the status of the exit handler's tasks (logged)
    """
    import logging

    from torchx_kfp.runtime import cancel_job_apps

    if final_status is not None:
        logging.getLogger("torchx_kfp").info("pipeline tasks ended %s", final_status.state)
    return cancel_job_apps(job_id=job_id, scheduler=scheduler, cfg_json=cfg_json)


def cancel_component(base_image: str | None = None) -> Any:
    """Returns the exit-handler KFP component that cancels a job's leftover apps."""
    return _cancel_component(_image(base_image))


@functools.cache
def _cancel_component(base_image: str) -> Any:
    return _exec_step(
        dsl.component(torchx_cancel_job_apps, base_image=base_image, install_kfp_package=False)
    )


_KFP_RUN_LINE = "_KFP_RUNTIME=true python3 -m "


def _exec_step(component: Any) -> Any:
    """Makes the step's ``sh -ec`` wrapper ``exec`` the Python step, so a SIGTERM sent to the
    wrapper (the pod's main process) reaches the launcher, which then cancels its app; without
    it the shell dies at once and leaves the launcher and the app running.

    Raises:
        RuntimeError: this kfp version wraps lightweight components differently (checked when
            the component is made, not in the pod)
    """
    container = component.component_spec.implementation.container
    command = list(container.command or [])
    if command[:2] != ["sh", "-ec"] or len(command) < 3 or _KFP_RUN_LINE not in command[2]:
        raise RuntimeError(
            f"unexpected kfp component wrapper {command[:3]!r}: torchx_kfp makes the wrapper"
            " exec the launcher (so SIGTERM reaches it) and supports kfp's `sh -ec` wrapper"
        )
    command[2] = command[2].replace(_KFP_RUN_LINE, "export _KFP_RUNTIME=true\nexec python3 -m ", 1)
    container.command = command
    return component


def cancel_apps_on_exit(
    scheduler: str = "local_cwd",
    cfg: Mapping[str, Any] | None = None,
    base_image: str | None = None,
) -> Any:
    """Creates an exit-handler task that cancels the apps this pipeline job left running.

    A second line behind the launcher's SIGTERM handler (KFP does not always signal a step it
    terminates). Create it first, then wrap the launcher steps::

        cleanup = torchx_kfp.cancel_apps_on_exit(scheduler="slurm")
        with dsl.ExitHandler(cleanup):
            torchx_kfp.launch(app, scheduler="slurm")

    Args:
        scheduler: the scheduler the launcher steps run on
        cfg: the scheduler's run config (for listing apps)
        base_image: the step's image (default :data:`DEFAULT_BASE_IMAGE`)
    """
    problems = _options_problems(LaunchOptions(scheduler=scheduler, cfg=cfg))
    if problems:
        raise InvalidKfpOptionsError(
            "Invalid cancel_apps_on_exit(...) arguments: " + "; ".join(problems)
        )
    kwargs: dict[str, Any] = {"job_id": dsl.PIPELINE_JOB_ID_PLACEHOLDER, "scheduler": scheduler}
    if cfg:
        kwargs["cfg_json"] = json.dumps(dict(cfg))
    task = cancel_component(base_image)(**kwargs)
    task.set_caching_options(enable_caching=False)
    task.set_display_name("cancel-torchx-apps")
    return task


def launcher_component(base_image: str | None = None, pass_resources: bool = False) -> Any:
    """Returns the launcher KFP component (a lightweight Python component).

    Args:
        base_image: the step's image; it must have ``torchx-suite[kfp]`` (and the extras of
            the scheduler it launches on) installed, since KFP installs nothing
            (``install_kfp_package=False``)
        pass_resources: declare ``TaskConfigField.RESOURCES`` as a passthrough, so resources
            set on the task reach the launched app instead of reserving them for the launcher
            pod (call :func:`launch` with ``pass_resources=True``)

    Raises:
        MissingDependencyError: kfp is not installed
    """
    return _launcher_component(_image(base_image), pass_resources)


@functools.cache
def _launcher_component(base_image: str, pass_resources: bool) -> Any:
    passthroughs = [dsl.TaskConfigField.RESOURCES] if pass_resources else None
    return _exec_step(
        dsl.component(
            torchx_launcher,
            base_image=base_image,
            install_kfp_package=False,
            task_config_passthroughs=passthroughs,
        )
    )


def _options_problems(options: LaunchOptions) -> list[str]:
    """The shared checks of ``options``, then (when the scheduler and cfg pass them) the
    scheduler's runopts check of ``cfg``."""
    problems = options.problems({"unknown_timeout": "unknown_state_timeout"})
    scheduler: object = options.scheduler
    cfg: object = options.cfg
    if (
        isinstance(scheduler, str)
        and scheduler.strip()
        and (cfg is None or isinstance(cfg, Mapping))
    ):
        problems += _run_option_problems(scheduler, dict(cfg or {}))
    return problems


def _run_option_problems(scheduler: str, cfg: dict[str, Any]) -> list[str]:
    """Checks the scheduler name and ``cfg`` against its runopts, when the pipeline is defined.

    Unknown keys, wrong types and missing required options are reported here (strict), not in
    the launcher pod minutes later. A scheduler whose client library is not installed where the
    pipeline is defined cannot list its options: its cfg is then checked in the pod.
    """
    from torchx_core.runner import get_runner

    problems = []
    try:
        json.dumps(cfg)
    except (TypeError, ValueError) as e:
        problems.append(
            f"cfg must hold JSON values (str, int, float, bool, lists and dicts of str) known"
            f" when the pipeline is defined ({e}); got {cfg!r}"
        )
    with get_runner() as runner:
        try:
            opts = runner.scheduler_run_opts(scheduler)
        except UnknownSchedulerException as e:
            return [str(e)]
        except MissingDependencyError as e:
            logger.warning(
                "cannot check the run options of %s here (%s); the launcher step checks them",
                scheduler,
                e,
            )
            return problems
    try:
        opts.resolve(cfg, strict=not opts.free_form)
    except InvalidRunConfigException as e:
        problems.append(f"cfg for scheduler {scheduler!r}: {e}")
    return problems


def _is_str_like(value: object) -> bool:
    """A str, or a KFP parameter output/pipeline parameter (resolved to a value at run time).

    An artifact output is not: a launcher input of type str or dict cannot carry one (KFP
    would pass ``null``); :func:`_artifact_problems` says so.
    """
    return isinstance(value, str) or (
        isinstance(value, dsl.pipeline_channel.PipelineChannel)
        and not isinstance(value, dsl.pipeline_channel.PipelineArtifactChannel)
    )


def _artifact_problems(name: str, values: Sequence[object]) -> list[str]:
    return [
        f"{name} value {v.name!r} is an artifact output ({v.channel_type}) of task"
        f" {v.task_name!r}; the launcher takes parameters (str) only, so KFP would pass null."
        f" Pass a parameter output instead, e.g. a step that returns the artifact's URI"
        f" (`artifact.uri`) as a str"
        for v in values
        if isinstance(v, dsl.pipeline_channel.PipelineArtifactChannel)
    ]


def _dryrun_problems(
    app_json: str,
    component: str,
    component_args: Sequence[Any] | None,
    scheduler: str,
    cfg: Mapping[str, Any] | None,
    pass_resources: bool,
) -> list[str]:
    """The scheduler's dry-run of the app, when the pipeline is defined, not in the pod: no
    roles, ``num_replicas=0`` or above the limit, a role without the resource the scheduler
    needs, an unknown component or wrong component arguments.

    Component arguments that are pipeline outputs are only known at run time: then only the
    component's existence is checked. Roles without a resource get a placeholder when
    ``pass_resources`` brings the task's resources at run time. A scheduler whose client
    library is not installed here is dry-run in the pod.
    """
    import copy

    from torchx_core.runner import get_runner
    from torchx_core.specs import NULL_RESOURCE, ComponentNotFoundException, Resource, TorchXError

    with get_runner() as runner:
        try:
            if app_json:
                app = AppDef.from_dict(json.loads(app_json))
            elif all(isinstance(a, str) for a in component_args or []):
                app = runner.materialize_component(component, list(component_args or []))
            else:
                try:
                    runner.materialize_component(component, [])
                except ComponentNotFoundException:
                    raise
                except TorchXError:
                    pass  # the arguments (some are pipeline outputs) are checked in the pod
                return []
            if pass_resources:
                app = copy.deepcopy(app)
                for role in app.roles:
                    if role.resource == NULL_RESOURCE:
                        role.resource = Resource(cpu=1, gpu=0, memMB=1024)
            runner.dryrun(app, scheduler, cfg=dict(cfg or {}))
        except MissingDependencyError as e:
            logger.warning(
                "cannot dry-run the app on %s here (%s); the launcher step does", scheduler, e
            )
        except TorchXError as e:
            return [str(e)]
    return []


def _app_json(app: AppDef | str) -> str:
    if isinstance(app, AppDef):
        return json.dumps(app.to_dict())
    if isinstance(app, str):
        # validate early, at pipeline-definition time, not in the pod
        try:
            data = json.loads(app)
        except json.JSONDecodeError as e:
            raise InvalidKfpOptionsError(f"app is a str but not AppDef JSON: {e}") from e
        AppDef.from_dict(data)
        return app
    raise InvalidKfpOptionsError(
        f"app must be an AppDef or its JSON, got {type(app).__name__};"
        " for a component name use launch(component='utils.echo', component_args=[...])"
    )


def _app_arg_problems(
    app: object, component: object, component_args: object, env: object
) -> list[str]:
    """What is wrong with the app (or component and its arguments) and the env of a step."""
    problems = []
    if not isinstance(component, str):
        problems.append(f"component must be a component name (str), got {component!r}")
    if (app is None) == (not component):
        problems.append("give exactly one of app (an AppDef) or component (a component name)")
    if component_args is not None and not component:
        problems.append("component_args needs component")
    if component_args is not None and (
        not isinstance(component_args, Sequence)
        or isinstance(component_args, str)
        or not all(_is_str_like(a) for a in component_args)
    ):
        args = list(component_args) if isinstance(component_args, Sequence) else []
        problems += _artifact_problems("component_args", args) or [
            f"component_args must be a list of str or pipeline outputs, got {component_args!r}"
        ]
    if env is not None and (
        not isinstance(env, Mapping)
        or not all(isinstance(k, str) and _is_str_like(v) for k, v in env.items())
    ):
        problems += _artifact_problems(
            "env", list(env.values()) if isinstance(env, Mapping) else []
        ) or [f"env must be a dict of str to str or pipeline outputs, got {env!r}"]
    return problems


def _step_problems(
    wait_interval: object, retries: object, dashboard_url: object, display_name: object
) -> list[str]:
    """What is wrong with the KFP step's own settings."""
    problems = [
        p
        for p in (
            # the poll interval under KFP's name: the same rule as at every entry point (> 0)
            SETTINGS["poll_interval"].problem(wait_interval, "wait_interval"),
            SETTINGS["retries"].problem(retries),
        )
        if p is not None
    ]
    if not isinstance(dashboard_url, str):
        problems.append(f"dashboard_url must be an http(s) URL string, got {dashboard_url!r}")
    elif dashboard_url:
        try:
            dashboard_base(dashboard_url)
        except InvalidDashboardUrlError as e:
            problems.append(str(e))
    if display_name is not None and not isinstance(display_name, str):
        problems.append(f"display_name must be a str, got {display_name!r}")
    return problems


def launch(
    app: AppDef | str | None = None,
    *,
    component: str = "",
    component_args: Sequence[str] | None = None,
    scheduler: str = "local_cwd",
    cfg: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
    base_image: str | None = None,
    wait_interval: float = 1.0,
    unknown_state_timeout: float = 300.0,
    retries: int = 0,
    pass_resources: bool = False,
    enable_caching: bool = False,
    display_name: str | None = None,
    after: Sequence[Any] | Any | None = None,
    dashboard_url: str = "",
) -> Any:
    """Adds a launcher step running ``app`` (or a component) to the pipeline being defined.

    Call inside a ``@dsl.pipeline`` function. The step's outputs are ``app_handle``,
    ``state``, ``status_json`` and ``ui_url`` (``task.outputs["app_handle"]``), and the
    artifacts ``tracker_metrics`` (``dsl.Metrics``: the app's numeric tracker metadata) and
    ``tracker_artifacts`` (the app's tracker artifacts) when a tracker is configured.

    Args:
        app: the AppDef (or its JSON); exclusive with ``component``
        component: a TorchX component name (``utils.echo``, ``dist.ddp``, ...)
        component_args: the component's arguments, as on the command line
        scheduler: the TorchX scheduler to run on
        cfg: the scheduler's run config (JSON-serializable)
        env: environment variables added to every role of the app; values may be upstream
            parameter outputs (``{"UPSTREAM": first.outputs["app_handle"]}``), not artifacts
            (pass an artifact's URI from a step that returns it as a str)
        base_image: the launcher step's image, with ``torchx-suite[kfp]`` and the scheduler's
            extras installed (default :data:`DEFAULT_BASE_IMAGE`; see ``make
            kfp-launcher-image``)
        wait_interval: seconds between status polls (> 0: the poll interval of every engine)
        unknown_state_timeout: seconds an UNKNOWN app is tolerated
        retries: KFP retries of the step (default 0: ``Role.max_retries`` already retries
            the app, and the two multiply). A retried step reattaches to its app.
        pass_resources: resources set on the returned task go to the app's roles (KFP
            TaskConfig passthrough) instead of the launcher pod
        enable_caching: let KFP skip the step for identical inputs (off: launching is a side
            effect)
        display_name: the task's display name (default: the app or component name)
        after: tasks this step runs after
        dashboard_url: a ``torchx dashboard`` address (``http://ml-host:8288``): the step's
            ``ui_url`` output links the app's page there (default: the step's
            ``$TORCHX_DASHBOARD_URL``, else the scheduler's UI URL)

    Returns:
        The KFP ``PipelineTask``.

    The app is dry-run on the scheduler here, when the pipeline is defined (as at submission:
    roles, replicas, resources the scheduler needs, the component and its arguments), so such
    mistakes fail the definition, not the pod minutes later. A component must therefore be
    resolvable where the pipeline is defined.

    Raises:
        InvalidKfpOptionsError: the arguments are invalid or contradict each other, or the
            scheduler's dry-run refuses the app
    """
    options = LaunchOptions(
        scheduler=scheduler,
        cfg=cfg,
        unknown_timeout=unknown_state_timeout,
        flags={"pass_resources": pass_resources, "enable_caching": enable_caching},
    )
    problems = [
        *_options_problems(options),
        *_app_arg_problems(app, component, component_args, env),
        *_step_problems(wait_interval, retries, dashboard_url, display_name),
    ]
    upstream = [] if after is None else list(after) if isinstance(after, (list, tuple)) else [after]
    bad = [u for u in upstream if not isinstance(u, dsl.PipelineTask)]
    if bad:
        problems.append(f"after must be a task or a list of tasks of this pipeline, got {bad!r}")
    if problems:
        raise InvalidKfpOptionsError("Invalid launch(...) arguments: " + "; ".join(problems))
    flags = options.parsed().flags  # "no" is False, as at every entry point
    pass_resources, enable_caching = flags["pass_resources"], flags["enable_caching"]
    app_json = _app_json(app) if app is not None else ""
    problems = _dryrun_problems(app_json, component, component_args, scheduler, cfg, pass_resources)
    if problems:
        raise InvalidKfpOptionsError(
            f"launch(...) cannot run this app on {scheduler!r}: " + "; ".join(problems)
        )
    kwargs: dict[str, Any] = {
        "app_json": app_json,
        "component": component,
        "scheduler": scheduler,
        "job_id": dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        "task_name": dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        "task_id": dsl.PIPELINE_TASK_ID_PLACEHOLDER,
        "wait_interval": SETTINGS["poll_interval"].parse(wait_interval),
        "unknown_state_timeout": SETTINGS["unknown_timeout"].parse(unknown_state_timeout),
        "pass_resources": pass_resources,
    }
    if component_args is not None:
        kwargs["component_args"] = list(component_args)
    if cfg:
        kwargs["cfg_json"] = json.dumps(dict(cfg))
    if env:
        kwargs["env"] = dict(env)
    if dashboard_url:
        kwargs["dashboard_url"] = dashboard_url
    task = launcher_component(base_image, pass_resources)(**kwargs)
    task.set_caching_options(enable_caching=enable_caching)
    if SETTINGS["retries"].parse(retries):
        task.set_retry(num_retries=int(SETTINGS["retries"].parse(retries)))  # type: ignore[arg-type]
    name = display_name or (AppDef.from_dict(json.loads(app_json)).name if app_json else component)
    task.set_display_name(name)
    for previous in upstream:
        task.after(previous)
    return task
