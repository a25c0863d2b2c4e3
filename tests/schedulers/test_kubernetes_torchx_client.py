"""The kubernetes scheduler's API calls as TorchX makes them, for code written against TorchX.

TorchX users' tests patch ``kubernetes.client.CustomObjectsApi`` methods, without a kubeconfig,
and check the keyword arguments of each call; their code catches the client's ``ApiException``.
These tests do the same against our scheduler (the real round trips are in
``test_kubernetes_integration.py``).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from support.docker_fixtures import BUSYBOX, FakeDockerClient

from torchx_core import specs
from torchx_core.schedulers.kubernetes._client import (
    KubernetesApiError,
    KubernetesJobExistsError,
    KubernetesSpecError,
    api_errors,
    make_api_client,
)
from torchx_core.schedulers.kubernetes.scheduler import KubernetesOpts, create_scheduler
from torchx_core.specs.overlays import set_overlay

kubernetes = pytest.importorskip("kubernetes")
from kubernetes.client import ApiException, CustomObjectsApi  # noqa: E402

VOLCANO = {"group": "batch.volcano.sh", "version": "v1alpha1", "plural": "jobs"}
JOBSET = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "plural": "jobsets"}


@pytest.fixture(autouse=True)
def no_kubeconfig(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No kubeconfig and no in-cluster config, as on a developer's machine running unit tests."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture
def create() -> Iterator[mock.MagicMock]:
    with mock.patch.object(CustomObjectsApi, "create_namespaced_custom_object") as m:
        m.return_value = {}
        yield m


def _app(role: str = "trainer", name: str = "test") -> specs.AppDef:
    return specs.AppDef(
        name, [specs.Role(role, image="img", entrypoint="main", resource=specs.resource(cpu=1))]
    )


def test_no_kubeconfig_gives_an_unconfigured_client_that_says_how_to_configure_one() -> None:
    api = make_api_client()  # TorchX: a warning and an unconfigured client, not an error
    api.configuration.host = "http://127.0.0.1:1"  # nothing listens there
    api.configuration.retries = 0
    with (
        pytest.raises(
            KubernetesApiError, match=r"cannot reach the Kubernetes API server.*KUBECONFIG"
        ),
        api_errors("listing jobs"),
    ):
        CustomObjectsApi(api).list_namespaced_custom_object(**VOLCANO, namespace="default")


def test_the_injected_client_is_the_schedulers_client_attribute() -> None:
    client = object()
    assert create_scheduler("t", client=client)._client is client  # TorchX's attribute name


def test_the_injected_docker_client_is_the_docker_client_attribute() -> None:
    docker = FakeDockerClient()
    assert create_scheduler("t", docker_client=docker)._docker_client is docker  # as TorchX


def test_api_errors_are_also_the_clients_api_exception() -> None:
    with (
        pytest.raises(ApiException) as info,  # what TorchX users' code catches
        api_errors("describing job ns/a"),
    ):
        raise ApiException(status=500, reason="Internal Server Error")
    err = info.value
    assert err.status == 500 and err.reason == "Internal Server Error"
    assert isinstance(err, KubernetesApiError)
    assert str(err) == "describing job ns/a failed: HTTP 500 Internal Server Error"
    copy = pickle.loads(pickle.dumps(err))  # adapters hand errors across processes
    assert isinstance(copy, ApiException) and isinstance(copy, KubernetesApiError)
    assert (str(copy), copy.status, copy.reason) == (str(err), 500, "Internal Server Error")


def test_submit_creates_the_job_with_keyword_arguments(create: mock.MagicMock) -> None:
    create.return_value = {"metadata": {"name": "testid"}}
    sched = create_scheduler("t")
    info = sched.submit_dryrun(_app(), {"namespace": "testnamespace", "queue": "q"})
    create.assert_not_called()  # a dry run does not contact the cluster by default
    assert sched.schedule(info) == "testnamespace:testid"  # the name the server gave
    assert create.call_args.kwargs == {
        **VOLCANO,
        "namespace": "testnamespace",
        "body": info.request.resource,
    }


def test_submit_of_an_existing_name_is_a_value_error(create: mock.MagicMock) -> None:
    create.side_effect = ApiException(status=409, reason="Conflict")
    sched = create_scheduler("t")
    info = sched.submit_dryrun(_app(), {"namespace": "ns"})
    with pytest.raises(KubernetesJobExistsError, match="already exists in namespace ns") as e:
        sched.schedule(info)
    assert isinstance(e.value, ValueError)


def test_a_conflict_names_the_job_of_the_error_body(
    create: mock.MagicMock, caplog: pytest.LogCaptureFixture
) -> None:
    """As TorchX: the name is read from the 409's JSON body (``details.name``)."""
    conflict = ApiException(status=409, reason="Conflict")
    conflict.body = '{"details": {"name": "the-old-job"}}'
    create.side_effect = conflict
    sched = create_scheduler("t")
    info = sched.submit_dryrun(_app(), {"namespace": "ns"})
    with pytest.raises(KubernetesJobExistsError, match="'the-old-job' already exists"):
        sched.schedule(info)
    conflict.body = "not json"
    caplog.clear()
    with caplog.at_level("ERROR", logger="torchx_core.schedulers.kubernetes_scheduler"):
        assert sched._get_job_name_from_exception(conflict) is None
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    caplog.records[0].getMessage()  # formats: no stray logging argument
    with pytest.raises(KubernetesJobExistsError, match=f"{info.request.name!r} already exists"):
        sched.schedule(info)  # no name in the body: the name submitted


def test_task_templates_are_dicts_that_read_as_v1pods() -> None:
    """TorchX's request holds ``V1Pod`` task templates (``template.spec.node_selector``); ours
    are the API dicts that also read as the ``V1Pod`` built from them."""
    role = specs.Role("trainer", image="img", entrypoint="main", resource=specs.resource(cpu=1))
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"gpu": "true"}}})
    sched = create_scheduler("t")
    for kind in ("volcano", "jobset"):
        req = sched.submit_dryrun(specs.AppDef("test", [role]), {"job_kind": kind}).request
        spec = req.resource["spec"]
        if kind == "volcano":
            template = spec["tasks"][0]["template"]
        else:
            template = spec["replicatedJobs"][0]["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"gpu": "true"}  # the dict sent and printed
        assert template.spec.node_selector == {"gpu": "true"}
        assert template.spec.containers[0].image == "img"
        assert template.metadata.labels == template["metadata"]["labels"]
        assert type(pickle.loads(pickle.dumps(template))) is type(template)
        assert copy.deepcopy(template) == template
        assert not hasattr(template, "_private") and not hasattr(template, "to_dict")


def test_list_makes_torchxs_volcano_call_and_keeps_torchxs_jobs() -> None:
    sched = create_scheduler("t")
    ours = {
        "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "torchx.pytorch.org"}}
    }
    theirs = {"metadata": {"name": "b"}, "status": {"state": {"phase": "Running"}}}
    with mock.patch.object(CustomObjectsApi, "list_namespaced_custom_object") as list_jobs:
        list_jobs.side_effect = [{"items": []}, {"items": [ours, theirs]}]  # JobSets, Volcano
        apps = sched.list({"namespace": "ns"})
    assert list_jobs.call_args == mock.call(  # the last call: TorchX's, every Volcano Job
        **VOLCANO, namespace="ns", timeout_seconds=30
    )
    assert list_jobs.call_args_list[0] == mock.call(
        **JOBSET, namespace="ns", label_selector="app.kubernetes.io/managed-by=torchx.pytorch.org"
    )
    assert [a.app_id for a in apps] == ["ns:a"]  # the unlabelled job was not launched by torchx


def test_validate_spec_asks_the_server_for_a_dry_run(create: mock.MagicMock) -> None:
    sched = create_scheduler("t")
    info = sched.submit_dryrun(_app(), KubernetesOpts(namespace="ns", validate_spec=True))
    assert create.call_args.kwargs == {
        **VOLCANO,
        "namespace": "ns",
        "body": info.request.resource,
        "dry_run": "All",
    }
    create.side_effect = ApiException(status=422, reason="Invalid")
    with pytest.raises(KubernetesSpecError, match="Invalid job spec") as e:
        sched.submit_dryrun(_app(), KubernetesOpts(namespace="ns", validate_spec=True))
    assert isinstance(e.value, ValueError)
    create.reset_mock()
    sched.submit_dryrun(_app(), KubernetesOpts(namespace="ns", validate_spec=False))
    create.assert_not_called()


def test_validate_spec_refuses_pod_names_longer_than_a_hostname(create: mock.MagicMock) -> None:
    sched = create_scheduler("t")
    cfg = KubernetesOpts(validate_spec=True)
    with pytest.raises(KubernetesSpecError, match="exceeds 63 character limit"):
        sched.submit_dryrun(_app(role="y" * 20, name="x" * 50), cfg)
    create.assert_not_called()  # refused before asking the server
    jobset = KubernetesOpts(validate_spec=True, job_kind="jobset")
    with pytest.raises(KubernetesSpecError, match="Pod name"):
        sched.submit_dryrun(_app(role="y" * 20, name="x" * 50), jobset)


def test_describe_reads_the_status_subresource() -> None:
    with mock.patch.object(CustomObjectsApi, "get_namespaced_custom_object_status") as get:
        get.side_effect = ApiException(status=404, reason="Not Found")
        assert create_scheduler("t").describe("ns:gone") is None
        assert get.call_args_list == [
            mock.call(**VOLCANO, namespace="ns", name="gone"),
            mock.call(**JOBSET, namespace="ns", name="gone"),
        ]
        get.side_effect = ApiException(status=500, reason="Internal Server Error")
        with pytest.raises(ApiException):
            create_scheduler("t").describe("ns:a")


def test_delete_tries_each_job_kind() -> None:
    sched = create_scheduler("t")
    with (
        mock.patch.object(type(sched), "exists", return_value=True),
        mock.patch.object(CustomObjectsApi, "delete_namespaced_custom_object") as delete,
    ):
        delete.side_effect = [ApiException(status=404, reason="Not Found"), {}]
        sched.delete("ns:a-jobset")
    assert delete.call_args_list == [
        mock.call(**VOLCANO, namespace="ns", name="a-jobset"),
        mock.call(**JOBSET, namespace="ns", name="a-jobset"),
    ]


@pytest.mark.parametrize(
    ("context", "namespace"),
    [
        ({"name": "c", "context": {"cluster": "c", "namespace": "team"}}, "team"),
        ({"name": "c", "context": {"cluster": "c"}}, "default"),  # no namespace in the context
        (kubernetes.config.ConfigException("no kubeconfig"), "default"),  # in-cluster pods
    ],
)
def test_list_namespace_comes_from_the_active_context(context: Any, namespace: str) -> None:
    sched = create_scheduler("t")
    active = (
        {"side_effect": context} if isinstance(context, Exception) else {"return_value": context}
    )
    with (
        mock.patch.object(type(sched), "_get_active_context", **active),
        mock.patch.object(CustomObjectsApi, "list_namespaced_custom_object") as list_jobs,
    ):
        list_jobs.return_value = {"items": []}
        assert sched.list() == []
        assert {c.kwargs["namespace"] for c in list_jobs.call_args_list} == {namespace}
        sched.list({"namespace": "given"})
        assert list_jobs.call_args.kwargs["namespace"] == "given"


def test_workspace_image_is_built_pushed_to_image_repo_and_run(
    tmp_path: Any, create: mock.MagicMock
) -> None:
    """As TorchX's kubernetes scheduler: the workspace becomes an image pushed to image_repo."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    docker = FakeDockerClient()
    sched = create_scheduler("t", docker_client=docker)
    assert {"image_repo", "quiet"} <= set(sched.run_opts()._opts)
    res = specs.resource(cpu=1, memMB=64)
    role = specs.Role("trainer", image=BUSYBOX, entrypoint="python", resource=res)
    role.workspace = specs.Workspace({str(project): ""})
    repo = "127.0.0.1:5000/me/ws"
    info = sched.submit_dryrun(specs.AppDef("ws", [role]), {"namespace": "ns", "image_repo": repo})
    ((local, (pushed_repo, tag)),) = info.request.images_to_push.items()
    assert local.startswith("sha256:") and pushed_repo == repo
    template = info.request.resource["spec"]["tasks"][0]["template"]
    assert template["spec"]["containers"][0]["image"] == f"{repo}:{tag}"
    create.return_value = {"metadata": {"name": info.request.name}}
    assert sched.schedule(info) == f"ns:{info.request.name}"
    assert docker.images.pushed == [f"{repo}:{tag}"]  # pushed before the job was created
    create.assert_called_once()
