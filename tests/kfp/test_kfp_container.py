"""Container components from AppDefs, compiled with the KFP compiler and read back as IR YAML."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import compiler, dsl

from torchx_core import specs
from torchx_core.specs.errors import extra_install_hint
from torchx_kfp import (
    ContainerOptions,
    InvalidKfpOptionsError,
    UnsupportedAppError,
    component_from_app,
    container_from_app,
    input_ref,
)

pytestmark = pytest.mark.kfp


def _app(**role_kwargs: Any) -> specs.AppDef:
    kwargs: dict[str, Any] = {
        "name": "trainer",
        "image": "ghcr.io/acme/train:1.0",
        "entrypoint": "python",
        "args": ["-m", "train", "--epochs", "3"],
        "env": {"LOG_LEVEL": "INFO"},
        "resource": specs.Resource(cpu=4, gpu=0, memMB=3072),
    }
    kwargs.update(role_kwargs)
    return specs.AppDef(name="my-train", roles=[specs.Role(**kwargs)])


def compile_pipeline(fn: Any, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Compiles a pipeline function, returns (pipeline spec, kubernetes platform spec or None)."""
    out = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(fn, str(out))
    docs = list(yaml.safe_load_all(out.read_text()))
    platform = docs[1]["platforms"]["kubernetes"] if len(docs) > 1 else None
    return docs[0], platform


def only_executor(spec: dict[str, Any]) -> dict[str, Any]:
    executors = spec["deploymentSpec"]["executors"]
    assert len(executors) == 1, executors
    return next(iter(executors.values()))["container"]


def only_task(spec: dict[str, Any]) -> dict[str, Any]:
    tasks = spec["root"]["dag"]["tasks"]
    assert len(tasks) == 1, tasks
    return next(iter(tasks.values()))


def test_container_image_command_args_env_resources(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="train-pipeline")
    def pipeline() -> None:
        container_from_app(app)

    spec, platform = compile_pipeline(pipeline, tmp_path)
    container = only_executor(spec)
    assert container["image"] == "ghcr.io/acme/train:1.0"
    assert container["command"] == ["python"]
    assert container["args"] == ["-m", "train", "--epochs", "3"]
    assert container["env"] == [{"name": "LOG_LEVEL", "value": "INFO"}]
    res = container["resources"]
    assert res["resourceCpuRequest"] == "4"
    assert res["resourceCpuLimit"] == "4"
    # memMB is MiB: 3072 MiB, never "3072M"
    assert res["resourceMemoryRequest"] == "3072Mi"
    assert res["resourceMemoryLimit"] == "3072Mi"
    assert "accelerator" not in res
    assert platform is None  # nothing asked needs kfp-kubernetes
    task = only_task(spec)
    assert "retryPolicy" not in task  # max_retries=0
    assert task["taskInfo"]["name"] == "my-train"


def test_caching_is_off_by_default_and_can_be_enabled(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="p")
    def default_pipeline() -> None:
        container_from_app(app)

    spec, _ = compile_pipeline(default_pipeline, tmp_path)
    assert only_task(spec)["cachingOptions"].get("enableCache", False) is False

    @dsl.pipeline(name="p")
    def cached_pipeline() -> None:
        container_from_app(app, options=ContainerOptions(enable_caching=True))

    spec, _ = compile_pipeline(cached_pipeline, tmp_path)
    assert only_task(spec)["cachingOptions"]["enableCache"] is True


def test_retry_policy_from_max_retries(tmp_path: Path) -> None:
    app = _app(max_retries=3)

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    assert only_task(spec)["retryPolicy"]["maxRetryCount"] == 3


def test_gpu_count_and_accelerator_type(tmp_path: Path) -> None:
    default_gpu = _app(resource=specs.Resource(cpu=8, gpu=2, memMB=1024))
    typed_gpu = _app(
        resource=specs.Resource(
            cpu=8, gpu=1, memMB=1024, capabilities={"accelerator_type": "amd.com/gpu"}
        )
    )

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(default_gpu)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    acc = only_executor(spec)["resources"]["accelerator"]
    assert (acc["resourceType"], acc["resourceCount"]) == ("nvidia.com/gpu", "2")

    @dsl.pipeline(name="p")
    def typed() -> None:
        container_from_app(typed_gpu)

    spec, _ = compile_pipeline(typed, tmp_path)
    acc = only_executor(spec)["resources"]["accelerator"]
    assert (acc["resourceType"], acc["resourceCount"]) == ("amd.com/gpu", "1")


def test_single_device_becomes_the_accelerator(tmp_path: Path) -> None:
    app = _app(resource=specs.Resource(cpu=1, gpu=0, memMB=512, devices={"google.com/tpu": 4}))

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    acc = only_executor(spec)["resources"]["accelerator"]
    assert (acc["resourceType"], acc["resourceCount"]) == ("google.com/tpu", "4")


def test_null_resource_sets_no_resources(tmp_path: Path) -> None:
    app = _app(resource=specs.NULL_RESOURCE)

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    assert "resources" not in only_executor(spec)


def test_macros_are_substituted(tmp_path: Path) -> None:
    app = _app(
        args=["--id", specs.macros.app_id, "--rank0-env", specs.macros.rank0_env],
        env={"REPLICA": specs.macros.replica_id},
    )

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    container = only_executor(spec)
    assert container["args"] == ["--id", "my-train", "--rank0-env", "TORCHX_RANK0_HOST"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"REPLICA": "0", "TORCHX_RANK0_HOST": "localhost"}


def test_inputs_become_component_parameters(tmp_path: Path) -> None:
    app = _app(
        args=["--lr", input_ref("lr"), f"--epochs={input_ref('epochs')}"],
        env={"LOG_LEVEL": "INFO", "LR": input_ref("lr")},
    )
    factory = component_from_app(app, inputs={"lr": float, "epochs": int})

    @dsl.pipeline(name="p")
    def pipeline(lr: float = 0.1) -> None:
        factory(lr=lr, epochs=5)

    spec, _ = compile_pipeline(pipeline, tmp_path)
    container = only_executor(spec)
    assert container["args"] == [
        "--lr",
        "{{$.inputs.parameters['lr']}}",
        "--epochs={{$.inputs.parameters['epochs']}}",
    ]
    assert container["env"] == [
        {"name": "LOG_LEVEL", "value": "INFO"},
        {"name": "LR", "value": "{{$.inputs.parameters['lr']}}"},
    ]
    params = spec["components"]["comp-my-train"]["inputDefinitions"]["parameters"]
    assert params == {
        "lr": {"parameterType": "NUMBER_DOUBLE"},
        "epochs": {"parameterType": "NUMBER_INTEGER"},
    }
    task_inputs = only_task(spec)["inputs"]["parameters"]
    assert task_inputs["lr"] == {"componentInputParameter": "lr"}


def test_undeclared_input_is_rejected() -> None:
    with pytest.raises(InvalidKfpOptionsError, match=r"undeclared inputs \['lr'\]"):
        component_from_app(_app(args=[input_ref("lr")]))


def test_bad_input_types_are_rejected() -> None:
    with pytest.raises(InvalidKfpOptionsError, match="valid: str, int, float, bool"):
        component_from_app(_app(), inputs={"x": list})
    with pytest.raises(InvalidKfpOptionsError, match="identifier"):
        input_ref("not an identifier")


def test_kubernetes_platform_config(tmp_path: Path) -> None:
    app = _app(
        mounts=[specs.VolumeMount(src="datasets", dst_path="/data")],
        resource=specs.Resource(
            cpu=2,
            gpu=1,
            memMB=2048,
            capabilities={"node.kubernetes.io/instance-type": "p3.2xlarge"},
        ),
    )
    options = ContainerOptions(
        shm_size="1Gi",
        secret_volumes={"creds": "/etc/creds"},
        secret_env={"api": {"token": "API_TOKEN"}},
        node_selector={"pool": "gpu"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        image_pull_secrets=["regcred"],
        pod_labels={"team": "ml"},
        timeout_seconds=3600,
    )

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app, options=options)

    spec, platform = compile_pipeline(pipeline, tmp_path)
    assert platform is not None
    (executor,) = platform["deploymentSpec"]["executors"].values()
    assert [(m["constant"], m["mountPath"]) for m in executor["pvcMount"]] == [
        ("datasets", "/data")
    ]
    assert executor["emptyDirMounts"] == [
        {"medium": "Memory", "mountPath": "/dev/shm", "volumeName": "dshm", "sizeLimit": "1Gi"}
    ]
    assert [(s["secretName"], s["mountPath"]) for s in executor["secretAsVolume"]] == [
        ("creds", "/etc/creds")
    ]
    assert executor["secretAsEnv"][0]["secretName"] == "api"
    assert executor["secretAsEnv"][0]["keyToEnv"] == [{"secretKey": "token", "envVar": "API_TOKEN"}]
    assert executor["nodeSelector"]["labels"] == {
        "pool": "gpu",
        "node.kubernetes.io/instance-type": "p3.2xlarge",
    }
    assert executor["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert executor["imagePullSecret"] == [
        {"secretName": "regcred", "secretNameParameter": {"runtimeValue": {"constant": "regcred"}}}
    ]
    assert executor["podMetadata"]["labels"] == {"team": "ml"}
    assert executor["activeDeadlineSeconds"] == "3600"
    acc = only_executor(spec)["resources"]["accelerator"]
    assert acc["resourceCount"] == "1"


def test_shm_without_size_limit(tmp_path: Path) -> None:
    app = _app()

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app, options=ContainerOptions(shm_size=""))

    _, platform = compile_pipeline(pipeline, tmp_path)
    assert platform is not None
    (executor,) = platform["deploymentSpec"]["executors"].values()
    assert executor["emptyDirMounts"] == [
        {"medium": "Memory", "mountPath": "/dev/shm", "volumeName": "dshm"}
    ]


def test_multi_role_app_points_to_the_launcher() -> None:
    app = specs.AppDef(
        name="ps",
        roles=[
            specs.Role("trainer", image="img", entrypoint="python"),
            specs.Role("ps", image="img", entrypoint="python"),
        ],
    )
    with pytest.raises(UnsupportedAppError, match=r"2 roles.*torchx_kfp\.launch"):
        component_from_app(app)


def test_multi_replica_app_points_to_the_launcher() -> None:
    with pytest.raises(UnsupportedAppError, match=r"num_replicas=4.*torchx_kfp\.launch"):
        component_from_app(_app(num_replicas=4))


def test_bind_and_device_mounts_are_rejected() -> None:
    with pytest.raises(UnsupportedAppError, match="BindMount"):
        component_from_app(_app(mounts=[specs.BindMount(src_path="/host", dst_path="/c")]))
    with pytest.raises(UnsupportedAppError, match="DeviceMount"):
        component_from_app(_app(mounts=[specs.DeviceMount(src_path="/dev/fuse", dst_path="/d")]))


def test_gpu_plus_devices_is_rejected() -> None:
    res = specs.Resource(cpu=1, gpu=1, memMB=1, devices={"vpc.amazonaws.com/efa": 1})
    with pytest.raises(UnsupportedAppError, match="single accelerator kind"):
        component_from_app(_app(resource=res))


def test_not_an_appdef_is_rejected() -> None:
    with pytest.raises(UnsupportedAppError, match=r"expected a torchx_core\.specs\.AppDef"):
        component_from_app({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"enable_caching": "yes"}, "enable_caching must be a bool"),
        ({"tolerations": [{"key": "a", "colour": "red"}]}, r"unknown keys \['colour'\]"),
        ({"tolerations": {"key": "a"}}, "tolerations must be a list"),
        ({"node_selector": {"a": 1}}, "node_selector must be a mapping of str to str"),
        ({"secret_env": {"s": {"k": 3}}}, r"secret_env\['s'\]"),
        ({"image_pull_secrets": "regcred"}, "image_pull_secrets must be a list"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive int"),
        ({"shm_size": 5}, "shm_size must be a str"),
    ],
)
def test_container_options_validate(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidKfpOptionsError, match=message):
        ContainerOptions(**kwargs)


def test_options_must_be_container_options() -> None:
    with pytest.raises(InvalidKfpOptionsError, match="ContainerOptions"):
        component_from_app(_app(), options={"enable_caching": True})  # type: ignore[arg-type]


def test_component_can_be_saved_and_reloaded(tmp_path: Path) -> None:
    from kfp import components

    factory = component_from_app(_app())
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(factory.component, str(path))
    reloaded = components.load_component_from_file(str(path))
    assert reloaded.name == "my-train"
    container = reloaded.component_spec.implementation.container
    assert container.image == "ghcr.io/acme/train:1.0"
    assert container.env == [{"name": "LOG_LEVEL", "value": "INFO"}]


def test_kubernetes_pod_overlay_reaches_the_task(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from torchx_core.specs.overlays import set_overlay

    app = _app()
    role = app.roles[0]
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"zone": "a"}}})
    set_overlay(
        role,
        "kubernetes",
        "V1Pod",
        {
            "spec": {
                "tolerations": [{"key": "spot", "operator": "Exists", "tolerationSeconds": 30}],
                "hostNetwork": True,
            }
        },
    )

    @dsl.pipeline(name="p")
    def pipeline() -> None:
        container_from_app(app, options=ContainerOptions(node_selector={"pool": "x"}))

    with caplog.at_level("WARNING", logger="torchx_kfp.container"):
        _, platform = compile_pipeline(pipeline, tmp_path)
    assert platform is not None
    (executor,) = platform["deploymentSpec"]["executors"].values()
    assert executor["nodeSelector"]["labels"] == {"zone": "a", "pool": "x"}
    assert executor["tolerations"] == [
        {"key": "spot", "operator": "Exists", "tolerationSeconds": "30"}
    ]
    assert "['hostNetwork']" in caplog.text


@pytest.mark.parametrize("installed", [False, True])
def test_missing_kfp_kubernetes_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, installed: bool
) -> None:
    import sys

    from torchx_core.specs import MissingDependencyError, _dependencies

    monkeypatch.setitem(sys.modules, "kfp.kubernetes", None)  # the module does not import
    if not installed:  # ... and no kfp-kubernetes distribution is installed
        real = _dependencies.installed_version
        monkeypatch.setattr(
            _dependencies, "installed_version", lambda d: None if d == "kfp-kubernetes" else real(d)
        )
    options = ContainerOptions(shm_size="1Gi")
    with pytest.raises(MissingDependencyError) as info:

        @dsl.pipeline(name="p")
        def pipeline() -> None:
            container_from_app(_app(), options=options)

    message = str(info.value)
    assert info.value.distribution == "kfp-kubernetes"
    if installed:  # installed but unusable: its version, never "not installed"
        assert "kfp-kubernetes 2." in message and "not installed" not in message
        assert "pip install --force-reinstall 'kfp-kubernetes>=" in message
    else:
        assert "is not installed" in message
        assert extra_install_hint("kfp-kubernetes") in message


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_kfp_kubernetes_of_another_minor_than_kfp_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The extra next to an older kfp can pull the newest kfp-kubernetes: the error says which
    kfp-kubernetes matches the kfp the user has (a .dist-info shadows the installed one)."""
    import kfp

    from torchx_core.specs import MissingDependencyError
    from torchx_kfp.container import check_kfp_kubernetes_matches_kfp

    check_kfp_kubernetes_matches_kfp()  # the locked pair matches
    minor = ".".join(kfp.__version__.split(".")[:2])
    _fake_dist(tmp_path, "kfp-kubernetes", "2.99.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependencyError) as info:
        check_kfp_kubernetes_matches_kfp()
    message = str(info.value)
    assert "kfp-kubernetes 2.99.0 is installed" in message
    assert f"pip install 'kfp-kubernetes=={minor}.*'" in message
